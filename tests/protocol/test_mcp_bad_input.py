"""Bad input over MCP (`agentboard mcp` on stdio, the official client): arguments that do not match
a tool's schema, terminal controls, NUL characters and numbers the database cannot store all come
back as the documented tool error ``{"error": "invalid_input", "message": ...}`` (one line), and
nothing is written."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from agentboard.kernel import queries


def _calls(ab: Any, task_id: str, run_id: int, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")},
           "AGENTBOARD_HOME": str(ab.settings.home), "AGENTBOARD_BOARD": "default", "AGENTBOARD_TASK": task_id,
           "AGENTBOARD_RUN_ID": str(run_id), "AGENTBOARD_PROFILE": "orch"}
    if ab.settings.database_url:
        env["AGENTBOARD_DATABASE_URL"] = ab.settings.database_url
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentboard", "mcp"], env=env)

    async def main() -> list[Any]:
        async with Client(params, read_timeout_seconds=60) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


def _error(result: Any) -> dict[str, Any]:
    assert result.is_error, result.content
    data = result.structured_content or json.loads(result.content[0].text)
    assert set(data) == {"error", "message"}, data
    assert "\n" not in data["message"] and "pydantic" not in data["message"], data
    return data


def test_bad_tool_arguments_and_unstorable_values_are_invalid_input_and_write_nothing(ab: Any, board: Any) -> None:
    ab.add_profile("orch", command="true", orchestrator=True)
    t = board.create("t", assignee="orch")
    run = board.claim(t["id"])
    before = queries.last_event_id(ab.db)
    results = _calls(ab, t["id"], run["run_id"], [
        ("kanban_create", {"title": "x", "assignee": "orch", "priority": "abc"}),
        ("kanban_comment", {"task_id": t["id"], "body": 5}),
        ("kanban_complete", {"summary": "s", "metadata": "{bad"}),
        ("kanban_comment", {"task_id": t["id"], "body": "a\u0000b"}),
        ("kanban_create", {"title": "x", "assignee": "orch", "body": "a\u0000b"}),
        ("kanban_block", {"reason": "why\u001b[2J\u001b]0;t\u0007"}),
        ("kanban_heartbeat", {"note": "x\u001b[1A"}),
        ("kanban_complete", {"summary": "s", "usage": {"input_tokens": 10**23}}),
    ])
    for result, needle in zip(results, [
        "priority", "body", "metadata", "comment contains a NUL", "body contains a NUL", "invalid reason",
        "invalid note", "usage.input_tokens",
    ], strict=True):
        data = _error(result)
        assert data["error"] == "invalid_input", data
        assert needle in data["message"], (needle, data)
    assert queries.last_event_id(ab.db) == before
    assert board.show(t["id"])["status"] == "running"
