"""The moves by hand offered for a race (what the dashboard's drawer shows, `moves` of `GET
/api/tasks/{id}`), on both backends: a race is finished by a pick, so a race in review whose
attempts none is picked offers neither Approve nor Request changes; one picked into review is
approved like any task."""

from __future__ import annotations

from typing import Any

from agentboard.kernel import offers, races


def _moves(board: Any, task_id: str) -> dict[str, str]:
    return {m["status"]: m["verb"] for m in offers.allowed_moves(board.db, board.slug, task_id)}


def _run_attempt(board: Any, race_id: str, n: int) -> None:
    att = next(a for a in races.attempts(board.db, board.slug, race_id)["attempts"] if a["n"] == n)
    at = att["attempt_task_id"]
    board.complete(at, run_id=board.claim(at)["run_id"])
    races.settle(board.db, board.slug)


def test_a_race_in_review_offers_no_approval_and_no_request_for_changes_until_an_attempt_is_picked(
        board: Any, ab: Any) -> None:
    ab.add_profile("alpha", command="true")
    ab.add_profile("beta", command="true")
    tid = board.create("race", race=["alpha", "beta"])["id"]
    races.settle(board.db, board.slug)
    assert "done" not in _moves(board, tid)  # a running race is not completed by hand either
    _run_attempt(board, tid, 1)
    _run_attempt(board, tid, 2)
    assert board.show(tid)["status"] == "review"
    assert _moves(board, tid) == {"archived": "archive"}

    # a plain task in review still offers every move of review
    plain = board.create("plain", assignee="alpha", review=True)["id"]
    board.complete(plain, run_id=board.claim(plain)["run_id"])
    assert set(_moves(board, plain)) == {"todo", "ready", "blocked", "done", "archived"}


def test_a_race_picked_into_review_is_approved_like_any_task(board: Any, ab: Any) -> None:
    ab.add_profile("alpha", command="true")
    ab.add_profile("beta", command="true")
    tid = board.create("race", race=["alpha", "beta"], review=True)["id"]
    races.settle(board.db, board.slug)
    _run_attempt(board, tid, 1)
    races.pick(board.db, board.slug, tid, 1, to_review=True)
    assert board.show(tid)["status"] == "review"
    moves = _moves(board, tid)
    assert moves["done"] == "approve" and "todo" not in moves and "ready" not in moves


def test_an_attempt_stopped_by_its_budget_is_shown_paused_with_the_reason_not_running(board: Any, ab: Any) -> None:
    from agentboard.dispatch import races as dispatch_races
    from agentboard.kernel.budgets import gate

    ab.add_profile("alpha", command="true")
    ab.add_profile("beta", command="true")
    tid = board.create("race", race=["alpha", "beta"])["id"]
    races.settle(board.db, board.slug)
    first = next(a for a in races.attempts(board.db, board.slug, tid)["attempts"] if a["n"] == 1)
    claimed = board.claim(first["attempt_task_id"])
    assert gate.stop_run(board.db, board.slug, first["attempt_task_id"], claimed["run_id"],
                         "the race's task budget is spent: runs 1 of 1; stopped")
    races.settle(board.db, board.slug)
    shown = {a["n"]: a for a in dispatch_races.view(board.db, board.slug, tid)["attempts"]}
    assert shown[1]["state"] == "running" and shown[1]["outcome"] is None  # it resumes once the limit is raised
    assert shown[1]["paused"] == "budget"
    assert "the race's task budget is spent" in shown[1]["error"]
    assert shown[2]["paused"] is None
