"""Codex takes real turns under the dispatcher against the scripted model server."""

from __future__ import annotations

import time

from .conftest import Board, Model, wait_for

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
    # the change is in the task's worktree, on its branch (read while the worker may still be
    # finishing its turn: the diff is of a live worktree)
    diff = wait_for(lambda: _diff_with(board, tid, {"hello.txt", "size.txt"}), timeout=60,
                    what="the worker's files in the task's diff")
    assert "uncommitted changes" in diff["how"]
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
