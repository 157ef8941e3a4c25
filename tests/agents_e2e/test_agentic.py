"""The board's agentic features through a real agent CLI against the scripted model server: the
reviewer agent (a review run of a profile named `reviewer`) and `specify`/`decompose` with the LLM
transport set to an agent CLI command."""

from __future__ import annotations

import json

from .conftest import Board, Model, real_cli, wait_for

SPEC = {"title": "Add a dark mode to the settings page", "goal": "people can read the app at night",
        "approach": "a toggle that switches a CSS class", "acceptance_criteria": ["the choice survives a reload"],
        "out_of_scope": ["themes"]}


def test_a_reviewer_agent_approves_a_claude_workers_change_in_a_review_run(board: Board, model: Model) -> None:
    model.script(
        {"calls": [{"write": {"path": "{cwd}/hello.txt", "content": "hello"}}]},
        {"calls": [{"mcp": "kanban_complete", "args": {"summary": "wrote hello.txt"}}]},
        {"text": "over to review"},
        {"calls": [{"mcp": "kanban_review", "args": {"verdict": "approved", "score": 92,
                                                     "summary": "hello.txt is what was asked"}}]},
        {"text": "approved"})
    coder = board.claude(model, "coder")
    board.claude(model, "reviewer")
    tid = str(board.json("create", "add hello.txt", "--assignee", coder, "--review")["id"])

    board.start("dispatcher", "--interval", "1")

    task = wait_for(lambda: (t := board.task(tid))["status"] in ("done", "blocked", "ready") and t.get("runs") and t,
                    timeout=180, what="the review to be decided")
    assert task["status"] == "done", task
    reviewed = board("watch", "--since", "0", "--once", "--json").stdout
    assert "hello.txt is what was asked" in reviewed
    bodies = [r["body"] for r in model.requests()]
    assert "hello.txt" in json.dumps(bodies[3])  # the reviewer was shown the change it judged


def test_specify_with_claude_code_as_the_llm_command_rewrites_a_triage_idea(board: Board, model: Model) -> None:
    model.script({"text": "Here it is:\n```json\n" + json.dumps(SPEC) + "\n```"}, usage={"input_tokens": 640,
                                                                                             "output_tokens": 90})
    board.env.update({"AGENTBOARD_LLM_COMMAND": f"{real_cli('claude')} -p --output-format json",
                      "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-scripted"})
    tid = str(board.json("create", "dark mode pls", "--triage")["id"])

    out = board("specify", tid)

    assert "specified as 'Add a dark mode to the settings page'" in out.stdout
    task = board.task(tid)
    assert task["status"] != "triage" and "- [ ] the choice survives a reload" in task["body"]
    used = board("watch", "--kinds", "llm_used", "--since", "0", "--once", "--json").stdout
    assert '"use": "specifier"' in used.replace('":"', '": "') and "640" in used
    assert "dark mode pls" in json.dumps(model.requests()[0]["body"])


def test_decompose_with_codex_as_the_llm_command_makes_linked_tasks(board: Board, model: Model) -> None:
    plan = {"fanout": True, "tasks": [{"title": "Write the parser", "body": "parse the input"},
                      {"title": "Test the parser", "body": "cover the edge cases", "parents": [0]}]}
    model.script({"text": json.dumps(plan)})
    home = board.codex_home(model)
    board.env.update({"AGENTBOARD_LLM_COMMAND": f"{real_cli('codex')} exec --json --skip-git-repo-check -",
                      "CODEX_HOME": str(home), "SCRIPTED_API_KEY": "sk-scripted"})
    tid = str(board.json("create", "a parser for the config format", "--triage")["id"])

    out = board("decompose", tid)

    titles = [t["title"] for t in board.json("list")]
    assert "Write the parser" in titles and "Test the parser" in titles, (out.stdout, titles)


def test_a_claude_supervisor_wakes_on_a_blocked_task_and_escalates_it(board: Board, model: Model) -> None:
    board.claude(model, "supervisor")
    board("supervisor", "enable", "supervisor")
    tid = str(board.json("create", "ship the release")["id"])
    model.script(
        {"calls": [{"mcp": "supervisor_escalate", "args": {"task_id": tid, "reason": "only a person holds the key",
                                                           "to": "alice"}}]},
        {"calls": [{"mcp": "kanban_complete", "args": {"summary": "escalated the blocked release to alice"}}]},
        {"text": "done"})
    board("block", tid, "needs the signing key")

    board.start("dispatcher", "--interval", "1")

    seen = wait_for(lambda: "only a person holds the key" in (
        out := board("watch", "--since", "0", "--once", "--json").stdout) and out, timeout=180,
        what="the supervisor's escalation")
    assert tid in seen
    woke = model.requests()[0]["body"]
    assert tid in json.dumps(woke)  # the supervisor was told which task woke it
