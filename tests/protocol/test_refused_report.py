"""A worker's report refused as bad input: its usage holds a number out of range or a key that is
not one of input_tokens, output_tokens, cost_usd (refused the same on every surface: the kernel,
the worker verb, REST, MCP, ``.board/result.json``), and a worker that ignores the refusal and
exits 0 ends as a protocol violation that says its report was refused and why, never that it did
not report (real dispatcher, real worker processes, the real ``agentboard complete``)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from api.conftest import start_api
from dispatch.conftest import dispatcher  # noqa: F401
from testenv import wait_for

from agentboard.domain.errors import InvalidInput
from agentboard.kernel import budgets, runs, tokens
from agentboard.protocol import result

from .test_mcp_bad_input import _calls, _error

#: a script agent that calls `agentboard complete` with the usage in its env and ignores the exit
IGNORES_EXIT = r'''
import os, subprocess, sys
subprocess.run([sys.executable, "-m", "agentboard", "complete", "--summary", "did it", "--usage", os.environ["USAGE"]])
'''

UNKNOWN = [{"total_cost_usd": 3}, {"cost": 5}, {"input_tokens": 10, "tokens": 7}]


@pytest.mark.parametrize("usage", UNKNOWN, ids=["total_cost_usd", "cost", "tokens"])
def test_a_usage_with_an_unknown_key_is_refused_by_the_kernel_naming_the_key_and_the_accepted_ones(
        ab: Any, board: Any, usage: dict[str, Any]) -> None:
    budgets.set_budget(ab.db, "board", "default", budgets.Limits.build(max_cost=1.0))
    t = board.create("spend", assignee="w")
    run = runs.claim(ab.db, "default", t["id"])
    key = next(k for k in usage if k not in ("input_tokens", "output_tokens", "cost_usd"))
    with pytest.raises(InvalidInput) as err:
        runs.complete(ab.db, "default", t["id"], summary="done", run_id=run["run_id"], usage=usage)
    assert err.value.message == (f"usage has an unknown key {key!r}: the accepted keys are input_tokens, "
                                 "output_tokens, cost_usd")
    assert board.show(t["id"])["status"] == "running"


def test_the_api_and_the_mcp_tool_refuse_an_unknown_usage_key_and_result_json_still_does(
        ab: Any, board: Any) -> None:
    ab.add_profile("orch", command="true", orchestrator=True)
    t = board.create("spend", assignee="orch")
    run = runs.claim(ab.db, "default", t["id"])
    with start_api(ab) as api:
        worker = api.client(tokens.create_run_token(ab.db, "default", t["id"], run["run_id"]))
        r = worker.post(f"/api/tasks/{t['id']}/complete", json={"summary": "x", "usage": {"total_cost_usd": 3}})
        assert r.status_code == 400, r.text
        assert "unknown key 'total_cost_usd'" in r.json()["error"]["message"]
        assert "input_tokens, output_tokens, cost_usd" in r.json()["error"]["message"]
    (refused,) = _calls(ab, t["id"], run["run_id"], [("kanban_complete", {"summary": "s", "usage": {"cost": 5}})])
    assert "unknown key 'cost'" in _error(refused)["message"]
    assert board.show(t["id"])["status"] == "running"
    parsed = result.parse_text(json.dumps({"success": True, "summary": "x", "usage": {"total_cost_usd": 3}}))
    assert not parsed.valid and any("total_cost_usd" in e for e in parsed.errors)


def test_a_refused_report_is_remembered_on_the_run_of_the_token_that_sent_it(ab: Any, board: Any) -> None:
    t = board.create("spend", assignee="w")
    run = runs.claim(ab.db, "default", t["id"])
    with start_api(ab) as api:
        worker = api.client(tokens.create_run_token(ab.db, "default", t["id"], run["run_id"]))
        r = worker.post(f"/api/tasks/{t['id']}/complete", json={"summary": "x", "usage": {"input_tokens": -5000}})
        assert r.status_code == 400, r.text
    (shown,) = board.runs(t["id"])
    meta = shown["metadata"] if isinstance(shown["metadata"], dict) else json.loads(shown["metadata"])
    assert meta["report_refused"]["verb"] == "complete"
    assert "usage.input_tokens must be a finite number >= 0" in meta["report_refused"]["error"]


@pytest.mark.parametrize(("usage", "said"), [
    ({"input_tokens": -5000}, "usage.input_tokens must be a finite number >= 0, got -5000"),
    ({"cost_usd": "NaN"}, "usage.cost_usd must be a finite number >= 0, got 'NaN'"),
    ({"input_tokens": 1e308}, "usage.input_tokens is 1e+308; the largest is"),
    ({"total_cost_usd": 3}, "usage has an unknown key 'total_cost_usd'"),
], ids=["negative", "nan", "huge", "unknown-key"])
def test_a_worker_that_ignores_its_refused_report_and_exits_0_is_a_protocol_violation_saying_it_was_refused(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path, usage: dict[str, Any], said: str) -> None:  # noqa: F811
    worker = tmp_path / "ignores_exit.py"
    worker.write_text(IGNORES_EXIT)
    ab.add_profile("sloppy", command=f"{shlex.quote(sys.executable)} {worker}", env={"USAGE": json.dumps(usage)})
    t = board.create("report a bad usage", assignee="sloppy")
    dispatcher(failure_limit=1)
    wait_for(lambda: board.show(t["id"])["status"] == "blocked", timeout=120, what="the task to be blocked")
    (run,) = board.runs(t["id"])
    assert run["outcome"] == "protocol_violation" and run["exit_code"] == 0
    error = run["error"]
    assert "its complete report" in error and "was refused" in error and said in error, error
    assert "without reporting: no kanban_complete" not in error
    assert len([e for e in board.events(task_id=t["id"]) if e["kind"] == "nudged"]) == 1
    # the nudge said so too
    prompt = (Path(run["workspace_path"]) / ".board" / "nudge-prompt.md").read_text()
    assert "Your last report (complete) was refused" in prompt and said in prompt
