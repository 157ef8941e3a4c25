"""Budgets stop spend before it happens: real dispatcher, real worker processes, the fake Claude
CLI printing real usage events ($0.0421 and 1545 tokens a run)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

from dispatch.conftest import FAKES, all_in, events, statuses, wait_for

from agentboard.kernel import budgets

RUN_COST = 0.0421


def _task(board, task_id):
    t = board.show(task_id)
    return t.get("task", t)


def test_fake_claude_runs_trip_the_warning_once_then_the_stop_and_raising_the_limit_releases(ab, board, dispatcher):
    ab.add_profile("claude", adapter="claude", command=str(FAKES / "fake_claude"), max_concurrency=1)
    # one run is expected to cost a cent, so the third run is still let through and overshoots
    budgets.set_budget(ab.db, "profile", "claude", budgets.Limits.build(expected_cost=0.01))
    budgets.set_budget(ab.db, "board", "default", budgets.Limits.build(max_cost=0.10))
    ids = [board.create(f"notes {i}", assignee="claude", priority=10 - i)["id"] for i in range(5)]
    dispatcher()
    wait_for(lambda: statuses(board, ids) == {**{i: "done" for i in ids[:3]}, ids[3]: "blocked", ids[4]: "blocked"},
             280, what="three runs done, the rest blocked by the budget")  # three runs one after another
    wait_for(lambda: events(board, kind="budget_exhausted"), what="the third run's usage counted")
    warnings = events(board, kind="budget_warning")
    assert len(warnings) == 1 and warnings[0]["payload"]["metric"] == "cost"
    spent = events(board, kind="budget_exhausted")
    assert len(spent) == 1
    assert spent[0]["payload"]["spent"] > 0.10 and "over by" in spent[0]["payload"]["message"]
    # the fourth is refused either as soon as the third run's usage is counted (spent), or while it
    # is still to come (the third run counts as under way)
    blocked = _task(board, ids[3])
    assert blocked["block_kind"] == "budget" and "the board default budget" in blocked["block_reason"]
    assert "agentboard budget set --board default --max-cost" in blocked["block_reason"]
    assert spent[0]["payload"]["message"] == "the board default budget is spent: cost $0.1263 of $0.10 (over by $0.0263)"
    assert [len(board.runs(i)) for i in ids] == [1, 1, 1, 0, 0]  # nothing spawned past the limit
    shown = budgets.show(ab.db, scope="board", ref="default")[0]
    assert shown["exhausted"] and abs(shown["spent"]["cost"] - 3 * RUN_COST) < 1e-9
    assert shown["spent"]["tokens"] == 3 * 1545 and shown["spent"]["runs"] == 3

    out = budgets.set_budget(ab.db, "board", "default", budgets.Limits.build(max_cost=1.0))
    assert sorted(out["released"]) == sorted(ids[3:])
    wait_for(lambda: all_in(board, ids, {"done"}), 280, what="released tasks run")
    assert len(events(board, kind="budget_exhausted")) == 1  # no second event below the raised limit


def test_the_pre_spend_estimate_refuses_a_run_the_remaining_budget_cannot_pay(ab, board, dispatcher):
    ab.add_profile("claude", adapter="claude", command=str(FAKES / "fake_claude"))
    budgets.set_budget(ab.db, "profile", "claude", budgets.Limits.build(expected_cost=0.5))
    budgets.set_budget(ab.db, "board", "default", budgets.Limits.build(max_cost=1.0, per="month"))
    t = board.create("too expensive", assignee="claude")
    # an LLM helper call spent 60 cents of the board's month: 40 left, one run is expected to cost 50
    budgets.record_llm_usage(ab.db, "default", t["id"], {"use": "specifier", "cost_usd": 0.6, "input_tokens": 10})
    d = dispatcher(start=False)
    d.run_pass()
    task = _task(board, t["id"])
    assert task["status"] == "blocked" and task["block_kind"] == "budget"
    assert "$0.40 left is below the expected $0.50 of one run" in task["block_reason"], task["block_reason"]
    assert "expected_cost configured for profile 'claude'" in task["block_reason"]
    assert board.runs(t["id"]) == []


def test_a_running_worker_is_told_to_stop_by_its_heartbeat_and_ended_after_the_grace(ab, board, dispatcher, tmp_path):
    marker = tmp_path / "told"
    ab.add_profile("looper", command=f"{shlex.quote(sys.executable)} {shlex.quote(str(LOOPER))} "
                   f"{shlex.quote(str(marker))}")
    budgets.set_budget(ab.db, "board", "default", budgets.Limits.build(max_tokens=1000))
    t = board.create("loop", assignee="looper")
    dispatcher(budget_stop_grace=4.0, dispatch_interval=1.0)
    wait_for(lambda: _task(board, t["id"])["status"] == "running" and _task(board, t["id"]).get("worker_pid"),
             what="the worker runs")
    pid = int(_task(board, t["id"])["worker_pid"])
    # a review's LLM call on the board spends the whole token budget
    budgets.record_llm_usage(ab.db, "default", None, {"use": "reviewer", "input_tokens": 900, "output_tokens": 300})
    wait_for(lambda: marker.exists(), what="the heartbeat answer says stop")
    assert "board default budget is spent: tokens 1,200 tokens of 1,000 tokens" in marker.read_text()
    wait_for(lambda: _task(board, t["id"])["status"] == "blocked", what="the dispatcher stops the worker")
    task = _task(board, t["id"])
    assert task["block_kind"] == "budget"
    run = board.runs(t["id"])[0]
    assert run["outcome"] == "blocked" and "stopped" in run["error"]
    wait_for(lambda: not _alive(pid), what="the worker process is gone")

    budgets.clear_budget(ab.db, "board", "default")
    assert _task(board, t["id"])["status"] == "ready"
    wait_for(lambda: _task(board, t["id"])["status"] == "done", what="the released task runs again and finishes")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of the dispatcher is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


LOOPER = Path(__file__).with_name("looper.py")


def test_an_expected_cost_on_a_budget_other_than_a_profiles_is_refused_saying_where_it_goes(ab) -> None:
    """The gate reads one run's expected cost from the profile's budget only: on a board budget
    it would be shown and ignored, so it is refused there and nothing is written."""
    import pytest

    from agentboard.domain.errors import InvalidInput

    with pytest.raises(InvalidInput, match=r"--profile NAME"):
        budgets.set_budget(ab.db, "board", "default", budgets.Limits.build(max_cost=1.5, expected_cost=1.0))
    assert budgets.show(ab.db, scope="board") == []


def _over_budget(ab) -> tuple[Any, dict[str, Any]]:
    """A board whose budget allows no run, one ready task on it."""
    ab.add_profile("w", command="true")
    board = ab.board()
    t = board.create("over budget", assignee="w")
    budgets.set_budget(ab.db, "board", "default", budgets.Limits.build(max_runs=0))
    return board, t


def _dispatch(ab, *args: str) -> str:
    """``agentboard dispatch ARGS`` on the test's home, its standard output."""
    import subprocess

    env = {**os.environ, "AGENTBOARD_HOME": str(ab.home)}
    if ab.settings.database_url:
        env["AGENTBOARD_DATABASE_URL"] = ab.settings.database_url
    return subprocess.run([sys.executable, "-m", "agentboard", "dispatch", *args], env=env,
                          capture_output=True, text=True, check=True).stdout


def test_a_dry_run_says_which_ready_tasks_a_budget_would_block_and_offers_them_not(ab) -> None:
    import json

    board, t = _over_budget(ab)
    rep = json.loads(_dispatch(ab, "--dry-run", "--json"))
    assert rep["would_spawn"] == []
    assert [(s["task"], s["reason"].split(":")[0]) for s in rep["skipped"]] == [(t["id"], "a budget blocks it")]
    assert board.show(t["id"])["status"] == "ready"  # a dry run writes nothing


def test_a_pass_that_blocks_ready_tasks_for_their_budget_says_so_instead_of_nothing_to_do(ab) -> None:
    import json

    board, t = _over_budget(ab)
    out = _dispatch(ab, "--wait")
    assert "nothing to do" not in out
    assert out.startswith(f"blocked {t['id']}: the board default budget is spent: runs 0 runs of 0 runs; raise it")
    assert board.show(t["id"])["status"] == "blocked"
    t2 = board.create("also over budget", assignee="w")
    rep = json.loads(_dispatch(ab, "--wait", "--json"))
    assert [(s["task"], s["reason"].split(":")[0]) for s in rep["budget_blocked"]] == [
        (t2["id"], "the board default budget is spent")]
