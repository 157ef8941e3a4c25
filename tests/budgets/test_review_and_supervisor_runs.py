"""Review runs, LLM review calls and the supervisor's (orchestrator's) own tasks count like any
run, and a budget stops them like any run."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from dispatch.conftest import events, wait_for

from agentboard.kernel import budgets

RESULT_OK = "sh -c " + shlex.quote("echo '{\"success\": true, \"summary\": \"did it\"}' > .board/result.json")


def _task(board: Any, task_id: str) -> dict[str, Any]:
    t = board.show(task_id)
    return t.get("task", t)


def _drive(ab: Any, done: Any) -> None:
    from agentboard.api.serve import WorkerAPI, run_tokens
    from agentboard.dispatch.dispatcher import Dispatcher

    ab.settings.spawn_grace = 0.5
    api = WorkerAPI(ab.settings, ab.db).start()
    d = Dispatcher(ab.db, ab.settings, api_url=api.url, token_factory=run_tokens(ab.db))
    try:
        deadline = time.monotonic() + 90
        while not done():
            assert time.monotonic() < deadline, "the dispatcher did not settle"
            d.run_pass()
            d.wait_idle(30)
            time.sleep(0.05)
    finally:
        d.stop()
        api.stop()


def test_a_spent_task_budget_holds_its_review_run_and_raising_it_lets_the_llm_review(
        fake_llm: Any, ab: Any) -> None:
    fake_llm.script({"text": '{"verdict": "approved", "score": 90, "summary": "Fine."}', "usage": {"cost": 0.25}})
    ab.add_profile("worker", command=RESULT_OK)
    board = ab.board()
    t = board.create("parse the dates", assignee="worker", review=True)
    budgets.set_budget(ab.db, "task", t["id"], budgets.Limits.build(max_runs=1))
    _drive(ab, lambda: _task(board, t["id"])["status"] == "review"
           and any(e["kind"] == "respawn_guarded" for e in events(board, t["id"])))
    held = [e for e in events(board, t["id"], "respawn_guarded")]
    assert "no review run: the task" in held[0]["payload"]["reason"] and "runs 1 run of 1 run" in held[0]["payload"]["reason"]
    assert len(fake_llm.requests) == 0 and len(board.runs(t["id"])) == 1
    budgets.set_budget(ab.db, "task", t["id"], budgets.Limits.build(max_runs=5))
    _drive(ab, lambda: _task(board, t["id"])["status"] == "done")
    assert len(fake_llm.requests) == 1
    spent = budgets.for_task(ab.db, t["id"])[0]["spent"]
    assert spent["runs"] == 2  # the worker's run and the review run
    review_run = [r for r in board.runs(t["id"]) if r["outcome"] == "reviewed"][0]
    # the review call's usage counts once: on its run
    assert spent["cost"] == 0.25 and spent["tokens"] == review_run["input_tokens"] + review_run["output_tokens"] > 0


@pytest.mark.parametrize("own", [True, False], ids=["supervision-budget", "shared-board-budget"])
def test_the_supervisors_own_running_task_is_stopped_by_the_budget_its_runs_count_against(
        ab: Any, dispatcher: Any, tmp_path: Path, own: bool) -> None:
    from agentboard.kernel import supervision

    looper = Path(__file__).with_name("looper.py")
    marker = tmp_path / "told"
    ab.add_profile("boss", command=f"{shlex.quote(sys.executable)} {shlex.quote(str(looper))} {shlex.quote(str(marker))}")
    board = ab.board()
    supervision.set_supervisor(ab.db, "default", "boss")
    supervision.set_budget_scope(ab.db, "default", own)
    stuck = board.create("stuck", assignee="boss")
    board.block(stuck["id"], "which database should this use?", kind="needs_input")
    d = dispatcher(budget_stop_grace=4.0, dispatch_interval=1.0)

    def working() -> list[dict[str, Any]]:
        return list(supervision.status(ab.db, "default")["working"])

    wait_for(lambda: any(w["status"] == "running" for w in working()), what="the supervisor runs on its wake")
    (job,) = working()
    # the supervisor's LLM calls are on its own task; its supervision budget counts them (or,
    # with the board's supervision_budget setting off, the board's budget)
    budgets.record_llm_usage(ab.db, "default", job["id"], {"use": "supervisor", "cost_usd": 0.2})
    budgets.set_budget(ab.db, "supervision" if own else "board", "default", budgets.Limits.build(max_cost=0.1))
    wait_for(lambda: marker.exists(), what="the supervisor's heartbeat answer says stop")
    wait_for(lambda: _task(board, job["id"])["status"] == "blocked", what="the supervisor's task is stopped")
    assert _task(board, job["id"])["block_kind"] == "budget"
    assert board.runs(job["id"])[0]["outcome"] == "blocked"
    # its own budget block wakes nobody; what woke it may fire again, but the budget holds
    # whatever the supervisor's wakes start, and no loop of new supervision tasks follows
    seen = d.passes
    wait_for(lambda: d.passes >= seen + 3, what="three more dispatcher passes")
    later = working()
    assert len(later) <= 2, later
    for w in later:
        assert (_task(board, w["id"])["status"], _task(board, w["id"])["block_kind"]) == ("blocked", "budget")
        assert all(r["outcome"] in ("blocked", None) for r in board.runs(w["id"]))
