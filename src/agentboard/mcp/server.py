"""``agentboard mcp``: the board's tools for MCP-capable agents, on stdio.

The server is scoped by the worker's environment, set by the dispatcher (and repeated in the
workspace's ``.mcp.json``): ``AGENTBOARD_TASK``, ``AGENTBOARD_RUN_ID``, ``AGENTBOARD_BOARD``,
``AGENTBOARD_PROFILE`` and ``AGENTBOARD_HOME`` / ``AGENTBOARD_DATABASE_URL``.

Lifecycle tools (complete, block, heartbeat, request_review) act on the worker's own task and
pass its run id, so a reclaimed worker's late call is refused. A tool given a task id finds the
task on whichever board holds it, and refuses (``forbidden``) one outside the worker's board. Orchestrator tools (list, create,
link, unblock) exist only for profiles marked ``orchestrator``. Every tool returns structured
JSON; errors are tool errors carrying ``{"error": code, "message": ...}`` — the one place
where domain errors are mapped for MCP.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

from .. import config
from ..domain.errors import AgentboardError, Forbidden, InvalidInput
from ..kernel import attachments, comments, links, lookups, profiles, queries, runs, tasks
from ..protocol import review
from ..protocol.context import render
from ..store.engine import Database

INSTRUCTIONS = (
    "Tools of an agentboard task board. You are a worker on one task: read it with kanban_show, "
    "report progress with kanban_heartbeat, and finish exactly once with kanban_complete (a summary of "
    "what you did) or kanban_block (a reason: what you need). Problems outside your task: kanban_propose."
)


@dataclass
class Scope:
    """Who the server acts for, read from the worker's environment."""

    board: str
    task_id: str | None
    run_id: int | None
    profile: str | None
    workspace: Path | None
    orchestrator: bool = False

    @property
    def actor(self) -> str:
        return self.profile or "worker"


def scope_from_env(db: Database) -> Scope:
    raw_run = config.env("AGENTBOARD_RUN_ID")
    try:
        run_id = int(raw_run) if raw_run else None
    except ValueError:
        raise InvalidInput(f"AGENTBOARD_RUN_ID={raw_run!r} is not a run id") from None
    profile = config.env("AGENTBOARD_PROFILE")
    orchestrator = False
    if profile:
        try:
            orchestrator = bool(profiles.get(db, profile).get("orchestrator"))
        except AgentboardError:
            orchestrator = False
    ws = config.env("AGENTBOARD_WORKSPACE")
    return Scope(
        board=config.env("AGENTBOARD_BOARD") or "default",
        task_id=config.env("AGENTBOARD_TASK"),
        run_id=run_id,
        profile=profile,
        workspace=Path(ws) if ws else None,
        orchestrator=orchestrator,
    )


def _ok(value: Any) -> CallToolResult:
    payload = value if isinstance(value, dict) else {"items": value}
    text = json.dumps(payload, default=str, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=json.loads(text))


def _err(code: str, message: str) -> CallToolResult:
    payload = {"error": code, "message": message}
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(payload))],
                          structured_content=payload, is_error=True)


def _guard(fn: Callable[[], Any]) -> CallToolResult:
    """Run a tool body; map domain errors to structured tool errors (the only MCP error mapping)."""
    try:
        return _ok(fn())
    except AgentboardError as exc:
        return _err(exc.code, exc.message)


def _task_summary(task: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "title", "status", "assignee", "run_id", "block_kind", "block_reason", "pending_verification")
    return {k: task.get(k) for k in keys if k in task}


def build_server(db: Database, scope: Scope, settings: config.Settings) -> MCPServer:
    """An MCP server whose tools act for ``scope``."""
    server = MCPServer(name="agentboard", instructions=INSTRUCTIONS)
    board = scope.board

    def own_task() -> str:
        if not scope.task_id:
            raise InvalidInput("no task: AGENTBOARD_TASK is not set (this server was not started for a worker)")
        return scope.task_id

    def board_of(task_id: str) -> str:
        """The worker's board, once ``task_id`` is found on it (task ids are global)."""
        found = lookups.task_board(db, task_id)
        if found != board:
            raise Forbidden(f"task {task_id} is on board {found!r}; this worker acts on board {board!r}")
        return found

    @server.tool(description="Show a task (default: your own): task, parents, children, comments, "
                             "recent events, runs and worker_context (the markdown you should read first).")
    def kanban_show(task_id: str | None = None) -> CallToolResult:
        def body() -> Any:
            tid = task_id or own_task()
            detail = queries.task_detail(db, board_of(tid) if task_id else board, tid, events=30)
            detail["worker_context"] = render(detail)
            return detail
        return _guard(body)

    @server.tool(description="Finish your task with a summary of what you did (the hand-off the next "
                             "worker and people read), optional metadata (JSON object), a one-line result "
                             "and usage {input_tokens, output_tokens, cost_usd}.")
    def kanban_complete(summary: str | None = None, metadata: dict[str, Any] | None = None,
                        result: str | None = None, usage: dict[str, Any] | None = None) -> CallToolResult:
        def body() -> Any:
            tid = own_task()
            if not (summary or "").strip() and not (result or "").strip():
                raise InvalidInput("summary is empty: say what was done (or give a result line)")
            out = runs.complete(db, board, tid, summary=summary, metadata=metadata, result=result,
                                usage=usage, run_id=scope.run_id, actor=scope.actor)
            res = _task_summary(out)
            if out.get("status") == "review":
                res["review"] = review.on_review_entered(db, settings, board, tid).get("action")
            if out.get("pending_verification"):
                res["message"] = ("success recorded; the verify commands run when you exit, "
                                  "then the task completes or comes back to you")
            return res
        return _guard(body)

    @server.tool(description="Block your task because you need input; reason says what you need.")
    def kanban_block(reason: str) -> CallToolResult:
        def body() -> Any:
            tid = own_task()
            if not (reason or "").strip():
                raise InvalidInput("reason is empty: say what you need")
            return _task_summary(tasks.block(db, board, tid, reason, kind="needs_input",
                                             run_id=scope.run_id, actor=scope.actor))
        return _guard(body)

    @server.tool(description="Tell the board you are alive during long work (extends your claim).")
    def kanban_heartbeat(note: str | None = None) -> CallToolResult:
        return _guard(lambda: runs.heartbeat(db, board, own_task(), run_id=scope.run_id, note=note,
                                             actor=scope.actor))

    @server.tool(description="Append a comment to a task's thread (any task of your board).")
    def kanban_comment(task_id: str, body: str) -> CallToolResult:
        return _guard(lambda: comments.comment(db, board_of(task_id), task_id, body, author=scope.actor))

    @server.tool(description="Hand your task to review, with an optional summary.")
    def kanban_request_review(summary: str | None = None) -> CallToolResult:
        def body() -> Any:
            out = _task_summary(runs.request_review(db, board, own_task(), summary=summary,
                                                    run_id=scope.run_id, actor=scope.actor))
            out["review"] = review.on_review_entered(db, settings, board, own_task()).get("action")
            return out
        return _guard(body)

    @server.tool(description="Attach a file from your workspace to your task.")
    def kanban_attach(path: str, name: str | None = None) -> CallToolResult:
        def body() -> Any:
            tid = own_task()
            root = (scope.workspace or Path.cwd()).resolve()
            src = (root / path).resolve()
            if src != root and root not in src.parents:
                raise InvalidInput(f"{path}: only files inside the workspace ({root}) can be attached")
            return attachments.attach(db, board, tid, src, home=settings.home, name=name,
                                      max_bytes=settings.attachment_max_bytes, actor=scope.actor)
        return _guard(body)

    @server.tool(description="Propose a new task for a problem outside your task's scope; it lands in "
                             "triage (a person releases it), linked to your task's goal.")
    def kanban_propose(title: str, body: str | None = None, assignee: str | None = None) -> CallToolResult:
        def run() -> Any:
            goal = None
            origin = ""
            if scope.task_id:
                cur = queries.task_detail(db, board, scope.task_id, events=0)
                goal = cur.get("goal_id")
                origin = f"\n\n_Proposed by {scope.actor} while working on {scope.task_id}._"
            out = tasks.create(db, board, title, body=(body or "") + origin, assignee=assignee,
                               goal=goal, triage=True, actor=scope.actor)
            return _task_summary(out) | {"goal_id": out.get("goal_id")}
        return _guard(run)

    if scope.orchestrator:
        @server.tool(description="(orchestrators) List tasks with filters: status (comma list), "
                                 "assignee, goal, search, limit.")
        def kanban_list(status: str | None = None, assignee: str | None = None, goal: str | None = None,
                        search: str | None = None, limit: int = 100) -> CallToolResult:
            return _guard(lambda: {"tasks": queries.list_tasks(db, board, status=status, assignee=assignee,
                                                               goal=goal, search=search, limit=limit)})

        @server.tool(description="(orchestrators) Create a task with an assignee, optional parents, "
                                 "skills, goal, body and priority.")
        def kanban_create(title: str, assignee: str, body: str | None = None,
                          parents: list[str] | None = None, skills: list[str] | None = None,
                          goal: str | None = None, priority: int = 0) -> CallToolResult:
            return _guard(lambda: tasks.create(db, board, title, body=body, assignee=assignee,
                                               parents=parents or [], skills=skills or [], goal=goal,
                                               priority=priority, actor=scope.actor))

        @server.tool(description="(orchestrators) Add a dependency: child waits for parent.")
        def kanban_link(parent_id: str, child_id: str) -> CallToolResult:
            return _guard(lambda: links.link(db, board_of(child_id), parent_id, child_id, actor=scope.actor))

        @server.tool(description="(orchestrators) Move a blocked task back to ready.")
        def kanban_unblock(task_id: str) -> CallToolResult:
            return _guard(lambda: _task_summary(tasks.unblock(db, board_of(task_id), task_id, actor=scope.actor)))

    return server


def serve() -> None:
    """Open the worker's database and serve the tools on stdio until the client disconnects."""
    from ..client import open_home

    settings = config.load()
    db = open_home(settings)
    scope = scope_from_env(db)
    build_server(db, scope, settings).run("stdio")


__all__ = ["Scope", "build_server", "scope_from_env", "serve"]
