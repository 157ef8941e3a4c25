"""A move by hand sent with the status the person saw (``expected``: the dashboard's
``expected_status``) runs only while the task is still in it: from any other status the kernel
refuses it in the move's own transaction, naming the status the task is in now, and the database
is left exactly as it was — a request for changes on a task approved meanwhile never reopens it."""

from __future__ import annotations

from typing import Any

import pytest
from kernelkit import check_invariants, reach, snapshot, status_of

from agentboard.domain import states
from agentboard.domain.errors import Conflict, InvalidInput
from agentboard.kernel import queries, tasks


@pytest.mark.parametrize("seen", [states.REVIEW, states.RUNNING, states.READY])
def test_a_move_from_a_status_the_task_has_left_changes_nothing_whatever_it_is_now(ab: Any, seen: str) -> None:
    db, board = ab.db, "default"
    for now in states.STATUSES:
        if now == seen:
            continue
        tid = reach(db, board, now, title=f"saw {seen}, is {now}")
        before = snapshot(db, tid)
        for target in states.hand_moves(seen):
            with pytest.raises(Conflict) as refused:
                tasks.set_status(db, board, tid, target, reason="as seen", expected=seen)
            assert refused.value.message == f"task {tid} is now {now}, no longer {seen}: nothing changed"
            with pytest.raises(Conflict):
                tasks.update(db, board, tid, status=target, fields={"priority": 5}, expected=seen)
            assert snapshot(db, tid) == before, f"a move {seen} -> {target} on a task in {now} changed it"
    check_invariants(db)


def test_request_changes_from_review_runs_while_the_task_is_in_review(ab: Any) -> None:
    db, board = ab.db, "default"
    tid = reach(db, board, states.REVIEW, title="still in review")
    out = tasks.set_status(db, board, tid, states.TODO, reason="add tests", expected=states.REVIEW)
    assert out["status"] == states.TODO
    kinds = [e["kind"] for e in queries.task_detail(db, board, tid, events=100)["events"]]
    assert "changes_requested" in kinds and "reopened" not in kinds
    # an expectation that is no status is refused before anything is read
    with pytest.raises(InvalidInput):
        tasks.set_status(db, board, tid, states.READY, expected="finished")
    assert status_of(db, tid) == states.TODO
