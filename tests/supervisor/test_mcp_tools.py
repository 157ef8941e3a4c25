"""The supervisor's tools through `agentboard mcp` over stdio, with its run token."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from agentboard.api.serve import WorkerAPI, run_tokens
from agentboard.kernel import runs, supervision

from .conftest import ACTOR, supervise


def _session(env: dict[str, str], calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[Any]]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentboard", "mcp"], env=env)

    async def main() -> tuple[list[str], list[Any]]:
        async with Client(params, read_timeout_seconds=60) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            return tools, [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


def _data(result: Any) -> dict[str, Any]:
    return result.structured_content or json.loads(result.content[0].text)


def _env(api: WorkerAPI, ab: Any, task_id: str, profile: str) -> dict[str, str]:
    run_id = runs.claim(ab.db, "default", task_id)["run_id"]
    return {"AGENTBOARD_BOARD": "default", "AGENTBOARD_PROFILE": profile, "AGENTBOARD_TASK": task_id,
            "AGENTBOARD_RUN_ID": str(run_id), "AGENTBOARD_API_URL": api.url,
            "AGENTBOARD_TOKEN": run_tokens(ab.db)("default", task_id, run_id)}


def test_the_supervisor_acts_through_its_mcp_tools_and_a_worker_has_none(ab: Any, board: Any) -> None:
    supervise(ab, board)
    ab.add_profile("w", command="true")
    t = board.create("stuck on a decision", assignee="w")["id"]
    board.block(t, "which queue?", actor="alice")
    (sup,) = supervision.take_due(ab.db, board.slug)["tasks"]
    worker_task = board.create("plain work", assignee="w")["id"]
    api = WorkerAPI(ab.settings, ab.db).start()
    try:
        tools, results = _session(_env(api, ab, sup["id"], "sup"), [
            ("supervisor_board", {}),
            ("supervisor_comment", {"task_id": t, "body": "blocked on a choice; asking a person"}),
            ("supervisor_priority", {"task_id": t, "priority": 5}),
            ("supervisor_escalate", {"task_id": t, "reason": "pick the queue", "to": "alice"}),
            ("supervisor_handled", {"wakes": sup["wakes"], "note": "escalated to alice"}),
        ])
        assert {"supervisor_board", "supervisor_release", "supervisor_verdict", "supervisor_handled"} <= set(tools)
        assert _data(results[0])["blocked"][0]["id"] == t
        assert not any(r.is_error for r in results), [_data(r) for r in results if r.is_error]
        assert _data(results[3])["block_to"] == "alice"
        worker_tools, _ = _session(_env(api, ab, worker_task, "w"), [])
    finally:
        api.stop()
    assert not [n for n in worker_tools if n.startswith("supervisor_")]
    shown = board.show(t)
    assert shown["priority"] == 5 and shown["comments"][0]["author"] == ACTOR
    assert [w["status"] for w in supervision.wakes(ab.db, board.slug)] == ["handled"]
