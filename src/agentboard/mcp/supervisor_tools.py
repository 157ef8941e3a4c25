"""The supervisor's MCP tools: offered only to the run of a supervision task (its run token
says so at ``/api/me``), each one call of a ``/api/supervisor/...`` route with that token — the
same routes the CLI's ``agentboard supervisor ...`` verbs call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

from ..remote import WorkerClient

Guard = Callable[[Callable[[], Any]], CallToolResult]


def add_supervisor_tools(server: MCPServer, api: WorkerClient, guard: Guard) -> None:
    """Register the supervisor's tools on ``server``; ``guard`` maps domain errors to tool errors."""

    def post(path: str, body: dict[str, Any] | None = None, params: dict[str, Any] | None = None) -> CallToolResult:
        return guard(lambda: api.call("POST", f"/api/supervisor{path}", json=body or {}, params=params))

    def get(path: str) -> CallToolResult:
        return guard(lambda: api.call("GET", f"/api/supervisor{path}"))

    @server.tool(description="(supervisor) The board's open work that needs judgement: blocked tasks, "
                             "triage (proposals), active and verifying goals, counts.")
    def supervisor_board() -> CallToolResult:
        return guard(lambda: api.call("GET", "/api/supervisor/board"))

    @server.tool(description="(supervisor) A task with its surroundings (comments, runs, reviews, events).")
    def supervisor_task(task_id: str) -> CallToolResult:
        return get(f"/tasks/{task_id}")

    @server.tool(description="(supervisor) A task's attempts, oldest first.")
    def supervisor_runs(task_id: str) -> CallToolResult:
        return guard(lambda: {"runs": api.call("GET", f"/api/supervisor/tasks/{task_id}/runs")})

    @server.tool(description="(supervisor) A goal with its acceptance criteria and tasks.")
    def supervisor_goal(goal_id: str) -> CallToolResult:
        return get(f"/goals/{goal_id}")

    @server.tool(description="(supervisor) Comment on a task: leave your reasoning summary here.")
    def supervisor_comment(task_id: str, body: str) -> CallToolResult:
        return post(f"/tasks/{task_id}/comment", {"body": body})

    @server.tool(description="(supervisor) Change a task's priority (-1000..1000).")
    def supervisor_priority(task_id: str, priority: int) -> CallToolResult:
        return post(f"/tasks/{task_id}/priority", {"priority": priority})

    @server.tool(description="(supervisor) Propose a task; it lands in triage (you may release your own).")
    def supervisor_propose(title: str, body: str | None = None, goal: str | None = None,
                           assignee: str | None = None, priority: int = 0) -> CallToolResult:
        data = {"title": title, "body": body, "goal": goal, "assignee": assignee, "priority": priority}
        return post("/proposals", {k: v for k, v in data.items() if v is not None})

    @server.tool(description="(supervisor) Release a proposal from triage (your own or a replan proposal); "
                             "it meets every gate like any task.")
    def supervisor_release(task_id: str) -> CallToolResult:
        return post(f"/tasks/{task_id}/release")

    @server.tool(description="(supervisor) Discard (archive) a proposal (your own or a replan proposal).")
    def supervisor_discard(task_id: str) -> CallToolResult:
        return post(f"/tasks/{task_id}/discard")

    @server.tool(description="(supervisor) Unblock a task.")
    def supervisor_unblock(task_id: str) -> CallToolResult:
        return post(f"/tasks/{task_id}/unblock")

    @server.tool(description="(supervisor) Give a task to another profile (null unassigns).")
    def supervisor_assign(task_id: str, assignee: str | None = None) -> CallToolResult:
        return post(f"/tasks/{task_id}/assign", {"assignee": assignee})

    @server.tool(description="(supervisor) Reclaim a stuck run: the task returns to the queue.")
    def supervisor_reclaim(task_id: str, reason: str | None = None) -> CallToolResult:
        return post(f"/tasks/{task_id}/reclaim", {"reason": reason})

    @server.tool(description="(supervisor) Escalate to a person: the task is blocked (needs_input), "
                             "addressed to `to` (default: the board's escalate_to).")
    def supervisor_escalate(task_id: str, reason: str, to: str | None = None) -> CallToolResult:
        return post(f"/tasks/{task_id}/escalate", {"reason": reason, "to": to})

    @server.tool(description="(supervisor) Mark the wakes you handled, with a note: what you did and why.")
    def supervisor_handled(wakes: list[int], note: str | None = None) -> CallToolResult:
        return guard(lambda: {"wakes": api.call("POST", "/api/supervisor/wakes/handled",
                                                json={"wakes": wakes, "note": note})})

    @server.tool(description="(supervisor) A verifying goal's verdict: passed with evidence (the goal is "
                             "done), or failed (it opens again, with a proposal for the missing work).")
    def supervisor_verdict(goal_id: str, passed: bool, evidence: str, propose: bool = True) -> CallToolResult:
        return post(f"/goals/{goal_id}/verdict", {"passed": passed, "evidence": evidence, "propose": propose})


__all__ = ["add_supervisor_tools"]
