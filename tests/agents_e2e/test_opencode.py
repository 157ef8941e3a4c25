"""opencode takes real turns under the dispatcher against the scripted model server (Chat Completions)."""

from __future__ import annotations

from typing import Any

from .conftest import Board, Model, branch_files

WORK = [
    {"calls": [{"write": {"path": "{cwd}/hello.txt", "content": "hello from opencode"}}]},
    {"calls": [{"shell": "git add hello.txt && git commit -qm 'add hello.txt'"},
               {"shell": "wc -c < hello.txt > size.txt"}]},
    {"calls": [{"mcp": "kanban_heartbeat", "args": {"note": "wrote hello.txt"}}]},
    {"calls": [{"mcp": "kanban_complete", "args": {"summary": "opencode added hello.txt and its size"}}]},
    {"text": "Done."},
]


def _runs(board: Board, task_id: str) -> list[dict[str, Any]]:
    return [r for r in board.runs(task_id) if not r.get("synthetic")]


def test_an_opencode_worker_writes_commits_heartbeats_and_completes_through_mcp_in_one_pass(
        board: Board, model: Model) -> None:
    model.script(*WORK, usage={"input_tokens": 700, "output_tokens": 15})
    profile = board.opencode(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])

    board("dispatch", "--wait")

    task = board.task(tid)
    assert task["status"] == "done", task
    assert "opencode added hello.txt and its size" in str(task)
    assert "hello.txt" in branch_files(board.repo, task["branch_name"])
    assert "hello.txt" not in branch_files(board.repo, "main")
    worktree = board.repo / ".worktrees" / tid
    assert (worktree / "size.txt").read_text().strip() == str(len("hello from opencode"))
    (run,) = _runs(board, tid)
    assert run["outcome"] == "completed" and run["exit_code"] == 0
    assert run["input_tokens"] == 5 * 700 and run["output_tokens"] == 5 * 15
    beats = board("watch", "--kinds", "heartbeat", "--since", "0", "--once", "--json").stdout
    assert tid in beats and "wrote hello.txt" in beats, board.worker_said(tid, "kanban_heartbeat")


def test_an_opencode_worker_whose_provider_refuses_its_key_waits_for_a_person_told_to_fix_that_providers_api_key(
        board: Board, model: Model) -> None:
    model.script({"status": 401})
    profile = board.opencode(model)
    tid = str(board.json("create", "add hello.txt", "--assignee", profile)["id"])

    board("dispatch", "--wait")

    task = board.task(tid)
    assert task["status"] == "blocked" and task["block_kind"] == "needs_input", task
    reason = task["block_reason"]
    assert reason.startswith("opencode could not sign in. "), reason
    # the key this profile uses, as `profiles check` names it; not another provider's variable
    assert "the apiKey of provider 'scripted' in $OPENCODE_CONFIG_CONTENT" in reason, reason
    assert "ANTHROPIC_API_KEY" not in reason, reason


def test_an_opencode_worker_stopped_at_its_max_runtime_counts_what_it_spent_by_then(
        board: Board, model: Model) -> None:
    """A runaway run is what budgets are for: the steps it finished before it was stopped are
    on its run."""
    model.script({"calls": [{"shell": "echo a > a.txt"}]}, {"calls": [{"shell": "sleep 120"}]},
                 {"calls": [{"mcp": "kanban_complete", "args": {"summary": "never"}}]},
                 usage={"input_tokens": 700, "output_tokens": 20})
    profile = board.opencode(model)
    tid = str(board.json("create", "run away", "--assignee", profile, "--max-runtime", "30s",
                         "--max-retries", "1")["id"])

    board("dispatch", "--wait")

    (run, *_) = _runs(board, tid)
    assert run["outcome"] == "timed_out", run
    assert run["input_tokens"] is not None and run["input_tokens"] >= 700, run
    assert run["output_tokens"] >= 20, run


def test_an_opencode_worker_sitting_out_a_long_rate_limit_is_stopped_and_its_task_blocked_until_the_reset(
        board: Board, model: Model) -> None:
    """opencode retries a 429 by sleeping until the reset the service gave, its task showing
    running all the while: the dispatcher stops it and blocks the task ``rate_limited`` until then."""
    import time

    model.script({"status": 429, "reset_in": 900})
    profile = board.opencode(model)
    tid = str(board.json("create", "hit the limit", "--assignee", profile)["id"])
    before = time.time()

    board("dispatch", "--wait")

    task = board.task(tid)
    assert (task["status"], task["block_kind"]) == ("blocked", "rate_limited"), task
    assert before + 850 < float(task["cooldown_until"]) < time.time() + 950, task
    assert "waiting for its reset" in task["block_reason"], task
    (run,) = [r for r in board.runs(tid) if not r.get("synthetic")]
    assert run["outcome"] == "rate_limited", run  # stopped, not slept through
