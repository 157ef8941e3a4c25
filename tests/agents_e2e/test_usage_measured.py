"""What a run records as spent is what the agent CLI reported in its own output, whatever the
agent writes in its report (`kanban_complete` usage) and whatever road its completion takes: a
model that says it spent nothing escapes no token or cost budget."""

from __future__ import annotations

from typing import Any

from .conftest import Board, Model

#: what the model says in its report: nothing spent
LIE = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0}
PER_TURN = {"input_tokens": 1500, "output_tokens": 40}


def _runs(board: Board, task_id: str) -> list[dict[str, Any]]:
    return [r for r in board.runs(task_id) if not r.get("synthetic")]


def test_a_claude_worker_reporting_zero_usage_on_a_merging_board_records_what_claude_code_measured(
        board: Board, model: Model) -> None:
    model.script(
        {"calls": [{"write": {"path": "{cwd}/hello.txt", "content": "hello"}}]},
        {"calls": [{"mcp": "kanban_complete", "args": {"summary": "wrote hello.txt", "usage": LIE}}]},
        {"text": "Done."}, usage=PER_TURN)
    board.setup("boards", "set", "proj", "--integrate", "merge")  # its completion is held until it exits
    profile = board.claude(model)
    tid = str(board.json("create", "write hello.txt", "--assignee", profile)["id"])

    board("dispatch", "--wait")

    task = board.task(tid)
    assert (task["status"], task["integration"]) == ("done", "merged"), task
    [run] = _runs(board, tid)
    assert (run["input_tokens"], run["output_tokens"]) == (3 * 1500, 3 * 40), run
    assert run["cost_usd"] and run["cost_usd"] > 0  # Claude Code's own cost, not the report's $0
    shown = board("runs", tid).stdout
    assert "4500" in shown.replace(",", ""), shown


def test_a_nudged_claude_worker_reporting_zero_usage_keeps_both_processes_spend(board: Board, model: Model) -> None:
    """Its first process stops without reporting and is reminded; the second reports usage 0 on a
    task whose report closes the run at once (no worktree: a board without a target): the run
    keeps what both processes of Claude Code measured."""
    model.script(
        {"text": "I looked around."},
        {"calls": [{"mcp": "kanban_complete", "args": {"summary": "looked around", "usage": LIE}}]},
        {"text": "Done."}, usage=PER_TURN)
    board.setup("boards", "create", "plain")
    profile = board.claude(model)
    tid = str(board.json("create", "look around", "--assignee", profile, "--board", "plain")["id"])

    board("dispatch", "--wait", "--board", "plain")

    task = board.task(tid)
    assert task["status"] == "done" and task["workspace_kind"] == "scratch", task
    [run] = _runs(board, tid)
    assert (run["input_tokens"], run["output_tokens"]) == (3 * 1500, 3 * 40), run
    assert run["cost_usd"] and run["cost_usd"] > 0


def test_a_gemini_worker_reporting_a_cost_keeps_the_cost_unknown_that_gemini_cli_reported(
        board: Board, model: Model) -> None:
    """Gemini CLI reports tokens and no cost: the run's cost stays unknown, not the report's $0,
    though the report closed the run before the CLI's numbers were read (no worktree)."""
    model.script(
        {"calls": [{"mcp": "kanban_complete", "args": {"summary": "looked around", "usage": LIE}}]},
        {"text": "Done."}, usage={"input_tokens": 800, "output_tokens": 20})
    board.setup("boards", "create", "plain")
    profile = board.gemini(model)
    tid = str(board.json("create", "look around", "--assignee", profile, "--board", "plain")["id"])

    board("dispatch", "--wait", "--board", "plain")

    assert board.task(tid)["status"] == "done"
    [run] = _runs(board, tid)
    assert run["input_tokens"] >= 2 * 800 and run["output_tokens"] >= 2 * 20, run
    assert run["cost_usd"] is None, run
