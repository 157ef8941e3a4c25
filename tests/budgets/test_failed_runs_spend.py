"""A run that fails its checks, or reports a failure, spent what it reported: its tokens and
cost are on its run and count against every budget, so a cost budget stops an agent that keeps
failing its checks."""

from __future__ import annotations

import shlex
from typing import Any

from agentboard.kernel import budgets

from .test_review_and_supervisor_runs import _drive, _task


def _reporting(success: bool) -> str:
    report = ('{"success": %s, "summary": "tried", "usage": {"input_tokens": 1000, "output_tokens": 10, '
              '"cost_usd": 0.5}}') % ("true" if success else "false")
    return "sh -c " + shlex.quote(f"echo '{report}' > .board/result.json")


def test_a_run_that_fails_its_checks_keeps_its_spend_and_a_cost_budget_stops_the_loop(ab: Any) -> None:
    ab.add_profile("looper", command=_reporting(True))
    ab.settings.verify_backoff = (0.0,)
    board = ab.board()
    t = board.create("never passes", assignee="looper", verify=["false"], max_retries=10)
    budgets.set_budget(ab.db, "task", t["id"], budgets.Limits.build(max_cost=1.0))
    _drive(ab, lambda: _task(board, t["id"])["status"] == "blocked")
    runs = [r for r in board.runs(t["id"]) if r.get("outcome")]
    assert [r["outcome"] for r in runs] == ["verify_failed", "verify_failed"]
    assert [(r["input_tokens"], r["cost_usd"]) for r in runs] == [(1000, 0.5), (1000, 0.5)]
    task = _task(board, t["id"])
    assert task["block_kind"] == "budget" and "$1.00" in task["block_reason"]
    assert budgets.for_task(ab.db, t["id"])[0]["spent"]["cost"] == 1.0


def test_a_run_that_reports_a_failure_keeps_its_spend(ab: Any) -> None:
    ab.add_profile("stuck", command=_reporting(False))
    board = ab.board()
    t = board.create("needs a person", assignee="stuck")
    _drive(ab, lambda: _task(board, t["id"])["status"] == "blocked")
    (run,) = board.runs(t["id"])
    assert (run["input_tokens"], run["output_tokens"], run["cost_usd"]) == (1000, 10, 0.5)
