"""A review loop ends: review may send a task back ``rework_limit`` times (5, or the board's
setting); the last of them blocks it ``gave_up`` with the reviews' last word, for a person to
decide, instead of one more paid round without end."""

from __future__ import annotations

from typing import Any


def _round(board: Any, task_id: str, feedback: str) -> dict[str, Any]:
    """One worker round and one review sending the task back."""
    if board.show(task_id)["status"] != "ready":
        board.promote(task_id)
    board.complete(task_id, summary="try", run_id=board.claim(task_id)["run_id"])
    assert board.show(task_id)["status"] == "review"
    return board.request_changes(task_id, feedback)


def test_the_fifth_send_back_blocks_the_task_with_the_last_feedback(ab: Any) -> None:
    ab.add_profile("coder", command="true")
    board = ab.board()
    t = board.create("Never good enough", assignee="coder", review=True)
    for n in range(1, 5):
        assert _round(board, t["id"], f"round {n}: not yet")["status"] == "ready"
    last = _round(board, t["id"], "round 5: still not")
    shown = board.show(t["id"])
    assert (last["status"], shown["block_kind"]) == ("blocked", "gave_up")
    assert "review sent it back 5 times (rework_limit 5)" in shown["block_reason"]
    assert "round 5: still not" in shown["block_reason"] and "unblock" in shown["block_reason"]
    assert len(board.runs(t["id"])) == 5  # no sixth run was started
    # a person gives it one more round
    board.unblock(t["id"])
    assert board.show(t["id"])["status"] == "ready"


def test_a_boards_rework_limit_ends_its_review_loops_sooner(ab: Any) -> None:
    ab.add_profile("coder", command="true")
    ab.create_board("strict", settings={"rework_limit": 2})
    board = ab.board("strict")
    t = board.create("Two chances", assignee="coder", review=True)
    assert _round(board, t["id"], "first: no")["status"] == "ready"
    assert _round(board, t["id"], "second: no")["status"] == "blocked"
    assert "rework_limit 2" in board.show(t["id"])["block_reason"]
