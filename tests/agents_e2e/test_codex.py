"""Codex takes real turns under the dispatcher against the scripted model server."""

from __future__ import annotations

import json
import time

from .conftest import Board, Model, branch_files, wait_for

WORK = [
    {"calls": [{"write": {"path": "hello.txt", "content": "hello from codex"}}]},
    {"calls": [{"shell": "wc -c < hello.txt > size.txt"}]},
    {"calls": [{"mcp": "kanban_heartbeat", "args": {"note": "wrote hello.txt"}}]},
    {"calls": [{"mcp": "kanban_complete", "args": {"summary": "codex added hello.txt and its size"}}]},
    {"text": "Done."},
]


def _runs(board: Board, task_id: str) -> list[dict]:
    return [r for r in board.runs(task_id) if not r.get("synthetic")]


def _diff_with(board: Board, task_id: str, paths: set[str]) -> dict | None:
    """The task's diff once it lists ``paths``, else None."""
    diff = board.json("diff", task_id)
    return diff if paths <= {f["path"] for f in diff["files"]} else None


def test_a_codex_worker_under_the_dispatcher_process_writes_runs_heartbeats_and_completes_through_mcp(
        board: Board, model: Model) -> None:
    model.script(*WORK, usage={"input_tokens": 900, "output_tokens": 25})
    profile = board.codex(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])

    board.start("dispatcher", "--interval", "1")
    task = wait_for(lambda: (t := board.task(tid))["status"] in ("done", "blocked") and t,
                    what="the task to finish")
    assert task["status"] == "done", task
    assert "codex added hello.txt and its size" in str(task)
    # the change is on the task's branch: Codex cannot commit from its sandbox, and the task is done
    # once its worker has exited and what it left is committed there
    diff = wait_for(lambda: _diff_with(board, tid, {"hello.txt", "size.txt"}), timeout=60,
                    what="the worker's files in the task's diff")
    assert "uncommitted changes" not in diff["how"], diff["how"]
    assert {"hello.txt", "size.txt"} <= set(branch_files(board.repo, task["branch_name"]))
    worktree = board.repo / ".worktrees" / tid
    assert (worktree / "size.txt").read_text().strip() == str(len("hello from codex\n"))
    run = wait_for(lambda: (r := _runs(board, tid)[0]).get("exit_code") is not None and r,
                   what="the worker's exit to be recorded")
    assert len(_runs(board, tid)) == 1
    assert run["outcome"] == "completed" and run["exit_code"] == 0
    assert run["input_tokens"] == 5 * 900 and run["output_tokens"] == 5 * 25
    beats = board("watch", "--kinds", "heartbeat", "--since", "0", "--once", "--json").stdout
    assert "wrote hello.txt" in beats, board.worker_said(tid, "kanban_heartbeat")


def test_a_one_shot_pass_records_the_exit_and_usage_of_a_codex_worker_that_completed_through_mcp(
        board: Board, model: Model) -> None:
    model.script(WORK[0], WORK[3], WORK[4])
    profile = board.codex(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])

    board("dispatch", "--wait")

    assert board.task(tid)["status"] == "done"
    (run,) = _runs(board, tid)
    assert run["exit_code"] == 0 and run["input_tokens"] == 3 * 1200


def test_a_plain_dispatch_returns_while_its_codex_worker_runs_and_the_worker_still_reports(
        board: Board, model: Model) -> None:
    model.script({"hang": WORK[3]}, WORK[4])
    profile = board.codex(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])

    out = board("dispatch")  # the model has not answered yet: the worker is waiting for it

    assert f"spawned {tid}" in out.stdout
    assert board.task(tid)["status"] == "running"
    model.release()  # the model answers: kanban_complete, through the API the pass left serving
    wait_for(lambda: board.task(tid)["status"] == "done", what="the task to be done")
    run = wait_for(lambda: (r := _runs(board, tid)[0]).get("exit_code") is not None and r,
                   what="the background pass to record the worker's exit")
    assert run["exit_code"] == 0 and run["input_tokens"] == 2 * 1200


def test_a_rate_limited_codex_worker_blocks_its_task_until_the_reset_time(board: Board, model: Model) -> None:
    model.script({"status": 429, "reset_in": 5400})
    profile = board.codex(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])
    before = time.time()

    board("dispatch", "--wait")

    task = board.task(tid)
    assert task["status"] == "blocked" and task["block_kind"] == "rate_limited", task
    assert before + 5300 < float(task["cooldown_until"]) < time.time() + 5500, task


def test_a_codex_worker_is_offered_only_the_ways_to_report_that_work_from_its_sandbox(
        board: Board, model: Model) -> None:
    # Codex runs commands in a login shell without the dispatcher's `agentboard` on its PATH, in a
    # sandbox with no network (the board's API on loopback included): the shell verbs cannot work
    # there, so its prompt names the MCP tools and .board/result.json, and the file works
    result = json.dumps({"success": True, "summary": "reported through the result file"})
    model.script({"calls": [{"shell": f"echo '{result}' > .board/result.json"}]}, {"text": "Done."})
    profile = board.codex(model)
    tid = str(board.json("create", "report through the file", "--assignee", profile)["id"])

    board("dispatch", "--wait")

    prompt = json.dumps(model.requests()[0]["body"])
    assert "kanban_complete" in prompt and ".board/result.json" in prompt
    assert "agentboard complete" not in prompt and "agentboard heartbeat" not in prompt
    task = board.task(tid)
    assert task["status"] == "done", (task, board.worker_said(tid, "result.json"))
    assert "reported through the result file" in str(task)


def test_a_codex_worker_rate_limited_for_a_second_resumes_within_the_minute_not_tomorrow(
        board: Board, model: Model) -> None:
    # Codex prints the reset as "try again at 1:51 AM" (to the minute, rounded down): read in
    # that same minute, it is no longer the same time tomorrow
    model.script({"status": 429, "reset_in": 1}, WORK[0], WORK[3], WORK[4])
    profile = board.codex(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])

    board("dispatch", "--wait")

    task = board.task(tid)
    assert task["status"] == "blocked" and task["block_kind"] == "rate_limited", task
    assert "try again at" in task["block_reason"], task
    assert float(task["cooldown_until"]) <= time.time() + 61, task
    board.start("dispatcher", "--interval", "1")
    task = wait_for(lambda: (t := board.task(tid))["status"] == "done" and t, timeout=150,
                    what="the task to resume after the reset and finish")
    assert "codex added hello.txt" in str(task)


def test_a_codex_worker_without_a_valid_key_waits_for_a_person_with_the_login_command(
        board: Board, model: Model) -> None:
    model.script({"status": 401})
    profile = board.codex(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])

    board("dispatch", "--wait")

    task = board.task(tid)
    assert task["status"] == "blocked" and task["block_kind"] == "needs_input", task
    assert "codex login" in task["block_reason"]


def test_a_codex_worker_whose_stream_is_cut_is_a_crash(board: Board, model: Model) -> None:
    model.script({"text": "half an answer", "cut": True})
    profile = board.codex(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])

    board("dispatch", "--wait")

    (run, *_) = _runs(board, tid)
    assert run["outcome"] == "crashed", run
    assert board.task(tid)["status"] in ("ready", "blocked")


def test_a_codex_worker_that_never_reports_is_nudged_once_then_a_protocol_violation(
        board: Board, model: Model) -> None:
    model.script({"text": "I looked around."}, {"text": "Nothing more."},
                 usage={"input_tokens": 1200, "output_tokens": 30})
    profile = board.codex(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])

    board("dispatch", "--wait")

    runs = _runs(board, tid)
    assert runs[-1]["outcome"] == "protocol_violation", runs
    assert len(model.requests()) == 2
    assert (runs[-1]["input_tokens"], runs[-1]["output_tokens"]) == (2 * 1200, 2 * 30)  # the start and the nudge
