"""A worker's first session already spent its budget (its agent's reported cost is read when it
exits): the dispatcher starts no second paid session of the run — neither the reminder of a
worker that stopped without reporting nor a repair attempt of a malformed result.json — and
closes the run as the budget's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dispatch.conftest import events, wait_for

from agentboard.kernel import budgets

#: a stand-in for Claude Code whose one turn costs $2.00, then ``then`` (Python) runs
_CLAUDE = """#!{python}
import json, sys
if sys.argv[1:] == ["--version"]:
    print("2.1.197 (Claude Code)"); sys.exit(0)
def emit(o): print(json.dumps(o), flush=True)
emit({{"type": "system", "subtype": "init", "session_id": "s", "model": "claude-sonnet-4-5", "tools": []}})
emit({{"type": "assistant", "message": {{"role": "assistant", "model": "claude-sonnet-4-5",
      "content": [{{"type": "text", "text": "I thought hard."}}], "usage": {{"input_tokens": 1000, "output_tokens": 200}}}}}})
{then}
emit({{"type": "result", "subtype": "success", "is_error": False, "num_turns": 3, "result": "I thought hard.",
      "session_id": "s", "total_cost_usd": 2.0, "usage": {{"input_tokens": 1000, "output_tokens": 200}}}})
"""


def _costly_claude(ab: Any, tmp_path: Path, name: str, then: str = "") -> None:
    import sys

    script = tmp_path / f"{name}.py"
    script.write_text(_CLAUDE.format(python=sys.executable, then=then))
    script.chmod(0o755)
    ab.add_profile(name, adapter="claude", command=str(script))
    budgets.set_budget(ab.db, "profile", name, budgets.Limits.build(max_cost=1.5))


def _closed_for_the_budget(board: Any, task_id: str) -> dict[str, Any]:
    wait_for(lambda: board.show(task_id)["status"] == "blocked", timeout=60, what="the task blocked")
    shown = board.show(task_id)
    assert shown["block_kind"] == "budget", shown["block_reason"]
    assert "cost $2.00 of $1.50" in shown["block_reason"], shown["block_reason"]
    runs = [r for r in board.runs(task_id) if not r.get("synthetic")]
    assert [(r["outcome"], r["cost_usd"]) for r in runs] == [("blocked", 2.0)]
    return shown


def test_a_silent_worker_whose_session_spent_the_budget_is_not_reminded_its_run_closes_for_the_budget(
        ab, board, dispatcher, tmp_path):
    """Exit 0 without a report after a $2.00 session under a $1.50 profile budget: no reminder
    (a second $2.00 session); the run is blocked by the budget, which spent $2.00, not $4.00."""
    _costly_claude(ab, tmp_path, "silent")
    t = board.create("think without reporting", assignee="silent")
    dispatcher()
    shown = _closed_for_the_budget(board, t["id"])
    assert "not started again" in shown["block_reason"]
    kinds = [e["kind"] for e in events(board, t["id"])]
    assert "nudged" not in kinds and kinds.count("spawned") == 1, kinds
    (b,) = budgets.show(ab.db, scope="profile", ref="silent")
    assert b["spent"]["cost"] == 2.0


def test_a_malformed_result_after_a_session_that_spent_the_budget_gets_no_repair_attempt(
        ab, board, dispatcher, tmp_path):
    """A $2.00 session that leaves a malformed .board/result.json under a $1.50 profile budget:
    no repair attempt (each a new session); the run is blocked by the budget, saying why."""
    write = "open('.board/result.json', 'w').write('{not json')"
    _costly_claude(ab, tmp_path, "badjson", then=write)
    t = board.create("think and report badly", assignee="badjson")
    dispatcher()
    shown = _closed_for_the_budget(board, t["id"])
    assert "no repair attempt" in shown["block_reason"]
    kinds = [e["kind"] for e in events(board, t["id"])]
    assert kinds.count("spawned") == 1 and "result_invalid" in kinds, kinds
    spawned = events(board, t["id"], "spawned")
    assert not any(e["payload"].get("repair_attempt") for e in spawned), json.dumps(spawned)
    (b,) = budgets.show(ab.db, scope="profile", ref="badjson")
    assert b["spent"]["cost"] == 2.0
