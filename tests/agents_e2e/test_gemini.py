"""Gemini CLI takes real turns under the dispatcher against the scripted model server."""

from __future__ import annotations

import time
from typing import Any

from .conftest import Board, Model, branch_files, real_cli, wait_for

WORK = [
    {"calls": [{"write": {"path": "{cwd}/hello.txt", "content": "hello from gemini"}}]},
    {"calls": [{"shell": "git add hello.txt && git commit -qm 'add hello.txt'"}, {"shell": "wc -c < hello.txt > size.txt"}]},
    {"calls": [{"mcp": "kanban_heartbeat", "args": {"note": "wrote hello.txt"}}]},
    {"calls": [{"mcp": "kanban_complete", "args": {"summary": "gemini added hello.txt and its size"}}]},
    {"text": "Done."},
]


def _runs(board: Board, task_id: str) -> list[dict[str, Any]]:
    return [r for r in board.runs(task_id) if not r.get("synthetic")]


def test_a_gemini_worker_writes_commits_heartbeats_and_completes_through_mcp_in_one_pass(
        board: Board, model: Model) -> None:
    model.script(*WORK, usage={"input_tokens": 800, "output_tokens": 20})
    profile = board.gemini(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])

    board("dispatch", "--wait")

    task = board.task(tid)
    assert task["status"] == "done", task
    assert "gemini added hello.txt and its size" in str(task)
    assert "hello.txt" in branch_files(board.repo, task["branch_name"])
    assert "hello.txt" not in branch_files(board.repo, "main")
    worktree = board.repo / ".worktrees" / tid
    assert (worktree / "size.txt").read_text().strip() == str(len("hello from gemini"))
    (run,) = _runs(board, tid)
    assert run["outcome"] == "completed" and run["exit_code"] == 0
    assert run["input_tokens"] and run["input_tokens"] >= 5 * 800 and run["output_tokens"] >= 5 * 20
    beats = board("watch", "--kinds", "heartbeat", "--since", "0", "--once", "--json").stdout
    assert tid in beats and "wrote hello.txt" in beats, board.worker_said(tid, "kanban_heartbeat")


def test_a_gemini_worker_under_the_dispatcher_process_reaches_review_with_its_summary(
        board: Board, model: Model) -> None:
    model.script(WORK[0], {"calls": [{"mcp": "kanban_complete", "args": {"summary": "hello.txt for review"}}]},
                 {"text": "over to review"})
    profile = board.gemini(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile, "--review")["id"])

    board.start("dispatcher", "--interval", "1")
    task = wait_for(lambda: (t := board.task(tid))["status"] in ("review", "done", "blocked") and t,
                    what="the task to leave running")
    assert task["status"] == "review" and "hello.txt for review" in str(task), task
    run = wait_for(lambda: (r := _runs(board, tid)[0]).get("exit_code") is not None and r,
                   what="the worker's exit to be recorded")
    assert run["exit_code"] == 0 and run["input_tokens"] and len(_runs(board, tid)) == 1
    assert (board.repo / ".worktrees" / tid / "hello.txt").read_text() == "hello from gemini"


def test_a_gemini_worker_without_a_valid_key_waits_for_a_person_with_the_login_command(
        board: Board, model: Model) -> None:
    model.script({"status": 401})
    profile = board.gemini(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])

    board("dispatch", "--wait")

    task = board.task(tid)
    assert task["status"] == "blocked" and task["block_kind"] == "needs_input", task
    assert "could not sign in" in str(task) and "GEMINI_API_KEY" in str(task), task


def test_a_rate_limited_gemini_worker_blocks_its_task_until_the_reset_time(board: Board, model: Model) -> None:
    model.script({"status": 429, "reset_in": 7200})
    profile = board.gemini(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])
    before = time.time()

    board("dispatch", "--wait")

    task = board.task(tid)
    assert task["status"] == "blocked" and task["block_kind"] == "rate_limited", task
    assert before + 7100 < float(task["cooldown_until"]) < time.time() + 7300, task


def test_a_gemini_profile_with_an_endpoint_and_no_key_waits_for_a_person_without_asking_the_model(
        board: Board, model: Model) -> None:
    board("profiles", "add", "nokey", "--adapter", "gemini", "--command", real_cli("gemini"),
          "--env", f"GOOGLE_GEMINI_BASE_URL={model.url}")
    tid = str(board.json("create", "add hello.txt", "--assignee", "nokey")["id"])

    board("dispatch", "--wait")

    task = board.task(tid)
    assert task["status"] == "blocked" and task["block_kind"] == "needs_input", task
    assert "GEMINI_API_KEY" in str(task), task
    assert model.requests(agentic=False) == []


def test_a_gemini_worker_whose_stream_is_cut_is_a_crash_saying_so_not_nudged(board: Board, model: Model) -> None:
    """Gemini CLI exits 0 after an error result: what it said decides, not its exit status."""
    model.script(*[{"cut": True}] * 8)
    profile = board.gemini(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])

    board("dispatch", "--wait")

    (run, *_) = _runs(board, tid)
    assert run["outcome"] == "crashed", run
    assert "ended its turn with an error" in run["error"] and "stream" in run["error"].lower(), run
    kinds = board("watch", "--since", "0", "--once", "--json").stdout
    assert '"nudged"' not in kinds
