"""A reviewer's agent CLI that its service turns away: a rate limit (429) or a refused key (401).

The worker is a script profile that reports at once through ``.board/result.json`` (the fastest
worker there is); the board's reviewer (the profile named ``reviewer``) is the real CLI against
the scripted model server, under the real dispatcher process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .conftest import Board, Model, wait_for


def _reviewed_task(board: Board, tmp_path: Path, *more: str) -> str:
    """A task whose worker completes at once and hands it to review; its id."""
    script = tmp_path / "worker.py"
    script.write_text("import json, os\nos.makedirs('.board', exist_ok=True)\n"
                      "open('work.txt', 'w').write('the work')\n"
                      "json.dump({'success': True, 'summary': 'wrote work.txt'}, open('.board/result.json', 'w'))\n")
    board.setup("profiles", "add", "scripted", "--adapter", "command", "--command", f"{sys.executable} {script}")
    return str(board.json("create", "write work.txt", "--assignee", "scripted", "--review", *more)["id"])


def _review_runs(board: Board, task_id: str) -> list[dict[str, Any]]:
    return [r for r in board.runs(task_id) if (r.get("metadata") or {}).get("review_run")]


def _events(board: Board, kind: str) -> list[dict[str, Any]]:
    out = board("watch", "--kinds", kind, "--since", "0", "--once", "--json").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_a_rate_limited_claude_reviewer_costs_no_failure_and_reviews_again_after_the_reset(
        board: Board, model: Model, tmp_path: Path) -> None:
    model.script({"status": 429, "reset_in": 15},
                 {"calls": [{"mcp": "kanban_review", "args": {"verdict": "approved", "score": 90,
                                                               "summary": "work.txt is what was asked"}}]},
                 {"text": "reviewed"})
    board.claude(model, "reviewer")
    # one failed review would hand the task to a person: the rate limit must not be one
    tid = _reviewed_task(board, tmp_path, "--max-retries", "1")

    board.start("dispatcher", "--interval", "1")

    first = wait_for(lambda: (rs := _review_runs(board, tid)) and rs[0].get("outcome") and rs[0],
                     timeout=120, what="the first review run to end")
    assert first["outcome"] == "rate_limited", first
    # what Claude Code said, parsed from its output: never its raw stream-JSON
    assert first["error"].startswith("Claude Code hit a rate limit or quota: "), first["error"]
    assert "the review starts again at" in first["error"] and "{" not in first["error"], first["error"]
    task = wait_for(lambda: (t := board.task(tid))["status"] != "review" and t, timeout=120,
                    what="the review after the reset")
    assert task["status"] == "done", task
    assert not _events(board, "review_unavailable")
    first, second = _review_runs(board, tid)
    assert second["outcome"] == "reviewed", second
    # not tried again into the same limit: only once it had reset
    assert second["started_at"] >= first["ended_at"] + 10, (first, second)


def test_a_codex_reviewer_whose_key_is_refused_hands_the_review_to_a_person_saying_which_key_to_set(
        board: Board, model: Model, tmp_path: Path) -> None:
    model.script({"status": 401})
    board.codex(model, "reviewer")
    tid = _reviewed_task(board, tmp_path)

    board.start("dispatcher", "--interval", "1")

    (unavailable,) = wait_for(lambda: _events(board, "review_unavailable"), timeout=120,
                              what="the review to be handed to a person")
    reason = unavailable["payload"]["reason"]
    assert reason.startswith("the reviewer profile 'reviewer' could not sign in: set SCRIPTED_API_KEY in the "
                             "profile's env"), reason
    assert reason.endswith("; a person must review") and '{"' not in reason, reason
    (run,) = _review_runs(board, tid)  # not retried into the same refusal
    assert run["outcome"] == "crashed" and run["error"].startswith("Codex could not sign in. "), run
    assert board.task(tid)["status"] == "review"
