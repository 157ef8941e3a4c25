"""A budget block is a person's to lift: the supervisor's unblock of a task whose budget is still
spent is refused (the dispatcher would block it again at once, and wake the supervisor again: a
loop spending on supervision), and its escalation keeps the block a budget block, so raising the
budget still releases the task."""

from __future__ import annotations

from typing import Any

import pytest

from agentboard.domain.errors import Conflict
from agentboard.kernel import budgets, supervision, tasks

from .conftest import ACTOR, supervise


def _budget_blocked(ab: Any, board: Any) -> str:
    ab.add_profile("w", command="true")
    tid = board.create("costly", assignee="w")["id"]
    budgets.set_budget(ab.db, "task", tid, budgets.Limits.build(max_runs=0))
    board.block(tid, "the task budget is spent: runs 0 runs of 0 runs", kind="budget", actor="dispatcher")
    return str(tid)


def test_the_supervisor_cannot_unblock_a_task_whose_budget_is_still_spent(ab: Any, board: Any) -> None:
    supervise(ab, board)
    tid = _budget_blocked(ab, board)
    with pytest.raises(Conflict, match="a supervisor cannot raise a budget"):
        tasks.unblock(ab.db, board.slug, tid, actor=ACTOR)
    assert board.show(tid)["block_kind"] == "budget"
    budgets.set_budget(ab.db, "task", tid, budgets.Limits.build(max_runs=5))  # a person raised it
    assert board.show(tid)["status"] == "ready"


def test_an_escalated_budget_block_is_still_released_by_raising_the_budget(ab: Any, board: Any) -> None:
    supervise(ab, board, escalate_to="alice")
    tid = _budget_blocked(ab, board)
    out = supervision.escalate(ab.db, board.slug, tid, "the budget is spent; a person decides", actor=ACTOR)
    assert (out["block_kind"], out["block_to"]) == ("budget", "alice")
    assert "budget is spent" in board.show(tid)["block_reason"]
    assert tid in [e["id"] for e in supervision.panel(ab.db, board.slug)["escalations"]]
    budgets.set_budget(ab.db, "task", tid, budgets.Limits.build(max_runs=5))
    assert board.show(tid)["status"] == "ready"
