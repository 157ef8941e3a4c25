"""A runtime limit counts the runs under way: what a run has spent so far is in `budget show`, the
gate refuses a run once the runs under way have spent the limit, and the dispatcher stops a worker
that outruns it — real dispatcher, real worker processes."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from dispatch.conftest import events, wait_for

from agentboard.kernel import budgets

#: a worker that heartbeats until it is killed (it never obeys a stop answer)
HEARTBEATS = "sh -c " + shlex.quote("while true; do agentboard heartbeat --note alive; sleep 0.5; done")


def _task(board: Any, task_id: str) -> dict[str, Any]:
    t = board.show(task_id)
    return t.get("task", t)


def _shown(ab: Any, task_id: str) -> dict[str, dict[str, Any]]:
    return {b["scope"]: b for b in budgets.for_task(ab.db, task_id)}


def test_budget_show_counts_the_runtime_of_a_run_under_way_and_its_close_counts_it_once(ab, board):
    ab.add_profile("w", command="true")
    t = board.create("a long one", assignee="w")["id"]
    budgets.set_budget(ab.db, "task", t, budgets.Limits.build(max_runtime="20s"))
    budgets.set_budget(ab.db, "board", "default", budgets.Limits.build(max_runtime="1h", per="day"))
    run = board.claim(t)["run_id"]
    wait_for(lambda: _shown(ab, t)["board"]["spent"]["runtime"] >= 1.0, 60,
             what="the runtime of the run under way counted")
    shown = _shown(ab, t)  # read after the board's: the task's is as far along
    assert shown["task"]["spent"]["runtime"] >= 1.0
    line = shown["task"]["lines"]["runtime"]["text"]
    assert line.endswith(" / 20s") and not line.startswith("0s"), line
    assert not shown["task"]["exhausted"]

    board.complete(t, run_id=run, summary="done")
    (closed,) = board.runs(t)
    ran = float(closed["ended_at"]) - float(closed["started_at"])
    shown = _shown(ab, t)  # the closed run's runtime, once: nothing is under way any more
    assert shown["task"]["spent"]["runtime"] == pytest.approx(ran, abs=1.0)
    assert shown["board"]["spent"]["runtime"] == pytest.approx(ran, abs=1.0)
    assert shown["task"]["spent"]["runs"] == 1


def test_a_worker_past_its_boards_runtime_limit_is_told_to_stop_and_the_next_run_is_refused(
        ab, board, dispatcher):
    ab.add_profile("forever", command=HEARTBEATS)
    ab.add_profile("w", command="true")
    first = board.create("first", assignee="forever")["id"]
    budgets.set_budget(ab.db, "board", "default", budgets.Limits.build(max_runtime=2))
    dispatcher(budget_stop_grace=600.0)  # told to stop, not stopped yet
    wait_for(lambda: budgets.show(ab.db, scope="board", ref="default")[0]["exhausted"], 60,
             what="the run under way spends the board's runtime")
    # a pass marks the limit spent, as a run's close would: its event, and the stop answer
    wait_for(lambda: events(board, kind="budget_exhausted"), 60, what="the limit marked spent")
    (spent,) = events(board, kind="budget_exhausted")
    assert spent["payload"]["metric"] == "runtime" and spent["payload"]["limit"] == 2.0
    run = _task(board, first)["current_run_id"]
    beat = board.heartbeat(first, run_id=run)
    assert beat.get("stop") is True
    assert beat["stop_reason"].startswith("the board default budget is spent: runtime "), beat
    assert beat["stop_reason"].endswith(" of 2s; stop now")
    second = board.create("second", assignee="w")["id"]
    wait_for(lambda: _task(board, second)["status"] == "blocked", 60, what="the gate refuses the next run")
    task = _task(board, second)
    assert task["block_kind"] == "budget", task
    assert task["block_reason"].startswith("the board default budget is spent: runtime "), task["block_reason"]
    assert "agentboard budget set --board default --max-runtime" in task["block_reason"]
    assert board.runs(second) == []
    assert _task(board, first)["status"] == "running"  # its grace is not over


def test_a_worker_that_outruns_its_tasks_runtime_budget_is_stopped_and_its_task_blocked_saying_so(
        ab, board, dispatcher):
    ab.add_profile("forever", command=HEARTBEATS)
    t = board.create("never ends", assignee="forever")["id"]
    budgets.set_budget(ab.db, "task", t, budgets.Limits.build(max_runtime=2))
    # the default dispatch_interval (60 s): the pass comes when the run passes the limit
    dispatcher(budget_stop_grace=1.0)
    wait_for(lambda: _task(board, t)["status"] == "blocked", 120, what="the dispatcher stops the worker")
    task = _task(board, t)
    assert task["block_kind"] == "budget", task
    assert task["block_reason"].startswith(f"the task {t} budget is spent: runtime "), task["block_reason"]
    assert task["block_reason"].endswith(" of 2s; stopped"), task["block_reason"]
    (run,) = board.runs(t)
    assert run["outcome"] == "blocked" and "runtime" in run["error"]
    assert float(run["ended_at"]) - float(run["started_at"]) >= 2.0
    (shown,) = budgets.for_task(ab.db, t)
    assert shown["exhausted"] and shown["spent"]["runs"] == 1 and shown["spent"]["runtime"] >= 2.0
    assert [e["payload"]["metric"] for e in events(board, kind="budget_exhausted")] == ["runtime"]
