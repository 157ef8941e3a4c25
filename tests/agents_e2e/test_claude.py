"""Claude Code takes real turns under the dispatcher against the scripted model server."""

from __future__ import annotations

import time
from typing import Any

from .conftest import Board, Model, branch_files, wait_for

WORK = [
    {"calls": [{"write": {"path": "{cwd}/hello.txt", "content": "hello from the agent"}},
               {"shell": "git add hello.txt && git commit -qm 'add hello.txt' && git log --oneline | wc -l > commits.txt"}]},
    {"calls": [{"mcp": "kanban_heartbeat", "args": {"note": "wrote hello.txt"}}]},
    {"calls": [{"mcp": "kanban_complete", "args": {"summary": "added hello.txt and counted the commits"}}]},
    {"text": "Done: hello.txt is committed."},
]


def _task(board: Board, profile: str, title: str = "add hello.txt") -> str:
    out = board.json("create", title, "--assignee", profile)
    return str(out["id"])


def _one_run(board: Board, task_id: str) -> dict[str, Any]:
    runs = [r for r in board.runs(task_id) if not r.get("synthetic")]
    assert len(runs) == 1, runs
    return runs[0]


def test_a_claude_worker_writes_commits_heartbeats_and_completes_through_mcp_in_one_pass(
        board: Board, model: Model) -> None:
    model.script(*WORK, usage={"input_tokens": 1500, "output_tokens": 40})
    profile = board.claude(model)
    tid = _task(board, profile)

    board("dispatch", "--wait")

    task = board.task(tid)
    assert task["status"] == "done", task
    assert "added hello.txt" in (task.get("result") or task.get("summary") or str(task))
    assert "hello.txt" in branch_files(board.repo, task["branch_name"])
    assert "hello.txt" not in branch_files(board.repo, "main")
    run = _one_run(board, tid)
    assert run["outcome"] == "completed" and run["exit_code"] == 0
    assert run["input_tokens"] == 4 * 1500 and run["output_tokens"] == 4 * 40  # every turn's usage
    assert run["cost_usd"] and run["cost_usd"] > 0  # Claude Code reports its cost
    beats = board("watch", "--kinds", "heartbeat", "--since", "0", "--once", "--json").stdout
    assert tid in beats and "wrote hello.txt" in beats, board.worker_said(tid, "kanban_heartbeat")


def test_a_claude_worker_under_the_dispatcher_process_reaches_review_with_its_summary(
        board: Board, model: Model) -> None:
    model.script(WORK[0], {"calls": [{"mcp": "kanban_complete", "args": {"summary": "hello.txt for review"}}]},
                 {"text": "over to review"})
    profile = board.claude(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile, "--review")["id"])

    board.start("dispatcher", "--interval", "1")
    task = wait_for(lambda: (t := board.task(tid))["status"] in ("review", "done", "blocked") and t,
                    what="the task to leave running")
    assert task["status"] == "review", task
    run = wait_for(lambda: (r := _one_run(board, tid)).get("exit_code") is not None and r,
                   what="the worker's exit to be recorded")
    assert run["exit_code"] == 0 and run["input_tokens"]
    assert "hello.txt" in branch_files(board.repo, task["branch_name"])


def test_a_rate_limited_claude_worker_blocks_its_task_until_the_reset_time(board: Board, model: Model) -> None:
    model.script({"status": 429, "reset_in": 7200})
    profile = board.claude(model)
    tid = _task(board, profile)
    before = time.time()

    board("dispatch", "--wait")

    task = board.task(tid)
    assert task["status"] == "blocked" and task["block_kind"] == "rate_limited", task
    assert "the reset time it gave" in task["block_reason"]
    assert before + 7100 < float(task["cooldown_until"]) < time.time() + 7300, task


def test_a_claude_worker_without_a_valid_key_waits_for_a_person_with_the_login_command(
        board: Board, model: Model) -> None:
    model.script({"status": 401})
    profile = board.claude(model)
    tid = _task(board, profile)

    board("dispatch", "--wait")

    task = board.task(tid)
    assert task["status"] == "blocked", task
    assert "could not sign in" in str(task) and "/login" in str(task)


def test_a_claude_worker_whose_model_fails_is_a_crash(board: Board, model: Model) -> None:
    model.script({"status": 500})
    profile = board.claude(model)
    tid = _task(board, profile)

    board("dispatch", "--wait")

    runs = [r for r in board.runs(tid) if not r.get("synthetic")]
    assert runs and runs[0]["outcome"] == "crashed", runs
    assert "Claude Code: API Error: 500" in runs[0]["error"], runs  # what the CLI said, in the reason


def test_a_claude_worker_that_never_reports_is_nudged_once_then_a_protocol_violation(
        board: Board, model: Model) -> None:
    model.script({"text": "I looked around."}, {"text": "Still nothing to say."},
                 usage={"input_tokens": 1200, "output_tokens": 30})
    profile = board.claude(model)
    tid = _task(board, profile)

    board("dispatch", "--wait")

    runs = [r for r in board.runs(tid) if not r.get("synthetic")]
    assert runs[-1]["outcome"] == "protocol_violation", runs
    turns = model.requests()
    assert len(turns) == 2  # the first start and the nudge
    # both processes of the run spent: the run counts the two together
    assert (runs[-1]["input_tokens"], runs[-1]["output_tokens"]) == (2 * 1200, 2 * 30)
    # the reason quotes what the agent said last, not the tail of its JSON stream
    assert runs[-1]["error"].endswith("; its last message: Still nothing to say."), runs[-1]["error"]
    log = board("log", tid).stdout
    assert f"=== run {runs[-1]['id']} of {tid}: reminded to report ===" in log
    assert "kanban_complete" in str(turns[1]["body"]["messages"])  # the reminder names the tools


def test_a_tool_the_read_permission_denies_is_shown_to_the_model_and_in_the_log(
        board: Board, model: Model) -> None:
    model.script({"calls": [{"shell": "touch forbidden.txt"}]},
                 {"calls": [{"mcp": "kanban_block", "args": {"reason": "I may not run touch here"}}]},
                 {"text": "blocked"})
    profile = board.claude(model, "reader", "--permission", "read")
    tid = _task(board, profile)

    board("dispatch", "--wait")

    task = board.task(tid)
    assert task["status"] == "blocked" and "may not run touch" in str(task), task
    refusal = model.requests()[1]["body"]["messages"][-1]["content"][0]
    assert refusal["is_error"] and "blocked" in refusal["content"], refusal  # the model was told
    shown = board("watch", "--kinds", "tools_denied", "--since", "0", "--once", "--json").stdout
    assert "Bash(touch forbidden.txt)" in shown  # and so is a person
    assert "forbidden.txt" not in board("diff", tid).stdout
