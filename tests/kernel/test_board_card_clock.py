"""The board view's running cards carry their current attempt's start (``run_started_at``), so the
dashboard's card clock says how long the current attempt has run, not the first one."""

from __future__ import annotations

from typing import Any


def _cards(board: Any) -> dict[str, Any]:
    return {c["id"]: c for col in board.view()["columns"] for c in col["tasks"]}


def test_a_running_card_carries_when_its_current_attempt_started_not_its_first(ab: Any) -> None:
    ab.add_profile("coder", command="true")
    board = ab.board()
    t = board.create("Sent back once", assignee="coder", review=True)
    first = board.claim(t["id"])["run_id"]
    board.complete(t["id"], summary="for review", run_id=first)
    board.request_changes(t["id"], "handle the empty input too")
    # the first attempt was long ago: the task's started_at (set on the first claim) says so
    ab.db.write(lambda tx: tx.execute("UPDATE tasks SET started_at = started_at - 3600 WHERE id = :i", {"i": t["id"]}))
    if board.show(t["id"])["status"] != "ready":
        board.promote(t["id"])
    second = board.claim(t["id"])["run_id"]
    assert second != first
    runs = {r["id"]: r for r in board.runs(t["id"])}
    card = _cards(board)[t["id"]]
    assert card["status"] == "running" and card["current_run_id"] == second
    assert card["run_started_at"] == runs[second]["started_at"]
    assert card["started_at"] < card["run_started_at"] - 3000  # the first attempt's, kept as it was


def test_only_running_cards_carry_a_current_attempt_start(ab: Any) -> None:
    ab.add_profile("coder", command="true")
    board = ab.board()
    waiting = board.create("Waiting", assignee="coder")
    done = board.create("Finished", assignee="coder")
    board.complete(done["id"], summary="done", run_id=board.claim(done["id"])["run_id"])
    cards = _cards(board)
    assert "run_started_at" not in cards[waiting["id"]]
    assert "run_started_at" not in cards[done["id"]]
