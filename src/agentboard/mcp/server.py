"""``agentboard mcp``: the board's tools for MCP-capable agents, on stdio.

The server is scoped by the worker's environment, set by the dispatcher (and repeated in the
workspace's ``.mcp.json``): ``AGENTBOARD_TASK``, ``AGENTBOARD_RUN_ID``, ``AGENTBOARD_BOARD``,
``AGENTBOARD_PROFILE``, and ``AGENTBOARD_API_URL`` with the run token ``AGENTBOARD_TOKEN``.
Inside a worker (:func:`agentboard.remote.worker_mode`) every tool is one call of the API with the
run token (:class:`RemoteOps`), which confines it to its task and board; started by a person on a
home (``AGENTBOARD_HOME`` / ``AGENTBOARD_DATABASE_URL``, no token) the tools call the kernel
(:class:`LocalOps`).

Lifecycle tools (complete, block, heartbeat, request_review) act on the worker's own task and
pass its run id, so a reclaimed worker's late call is refused. A tool given a task id finds the
task on whichever board holds it, and refuses (``forbidden``) one outside the worker's board. Orchestrator tools (list, create,
link, unblock, specify, decompose) exist only for profiles marked ``orchestrator``. Every tool returns structured
JSON; errors are tool errors carrying ``{"error": code, "message": ...}`` — the one place
where domain errors are mapped for MCP.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Protocol

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field, ValidationError

from .. import config
from ..domain import model, task_fields
from ..domain.errors import AgentboardError, Forbidden, InvalidInput, Unavailable, one_line
from ..domain.worker_env import WorkerEnv
from ..kernel import (
    attachments,
    comments,
    links,
    lookups,
    profiles,
    queries,
    run_limits,
    runs,
    tasks,
)
from ..kernel.rows import TaskDetailWithGit
from ..protocol import review
from ..protocol.context import render
from ..remote import SCOPE_RETRY_FOR, UnreachableClient, WorkerClient, worker_mode
from ..store.engine import Database
from .instructions import INSTRUCTIONS


@dataclass
class Scope:
    """Who the server acts for, read from the worker's environment."""

    board: str
    task_id: str | None
    run_id: int | None
    profile: str | None
    workspace: Path | None
    orchestrator: bool = False
    #: the supervisor's profile, for a supervision task's run (its board-wide tools)
    supervisor: str | None = None
    #: a reviewer's run (``kanban_review`` answers the review run)
    review_run: bool = False

    @property
    def actor(self) -> str:
        return self.profile or "worker"


def scope_from_env(db: Database | None = None, *, orchestrator: bool | None = None,
                   supervisor: str | None = None) -> Scope:
    """The scope of the worker's environment; whether it is an orchestrator comes from its
    profile on ``db``, or is given (what the API says of the run token)."""
    me = WorkerEnv.from_environ(strict=True)
    profile = me.profile
    if orchestrator is None:
        orchestrator = False
        if profile and db is not None:
            try:
                orchestrator = bool(profiles.get(db, profile).get("orchestrator"))
            except AgentboardError:
                orchestrator = False
    return Scope(
        board=me.board or "default",
        task_id=me.task,
        run_id=me.run_id,
        profile=profile,
        workspace=me.workspace,
        orchestrator=orchestrator,
        supervisor=supervisor,
        review_run=me.review_run,
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


def _arguments_message(tool: str, exc: ValidationError) -> str:
    """A tool's arguments that do not match its input schema, as one line: each wrong argument
    and why (at most five), never the pydantic banner or its link."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or "arguments"
        got = f" (got {one_line(repr(err['input']))[:60]})" if "input" in err and err.get("type") != "missing" else ""
        parts.append(f"{loc}: {one_line(err.get('msg', 'invalid'))}{got}")
    return f"invalid arguments for {tool}: " + "; ".join(parts)


class _Server(MCPServer):
    """The SDK's server, with arguments that fail a tool's input schema answered as every other
    refusal (:func:`_guard`): ``{"error": "invalid_input", "message": ...}``, not the SDK's
    multi-line pydantic text."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            return _err(InvalidInput.code, _arguments_message(name, exc.__cause__))


def _about(name: str) -> Any:
    """A create tool parameter's help and limits, from the one table of new-task fields (the
    limits are checked by the kernel, which answers the same ``invalid_input`` as every surface)."""
    return Field(description=task_fields.BY_NAME[name].describe())


def _task_summary(task: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "title", "status", "assignee", "run_id", "block_kind", "block_reason", "pending_verification",
            "warnings")
    return {k: task.get(k) for k in keys if k in task}


def _inside(scope: Scope, path: str) -> Path:
    """``path`` resolved inside the worker's workspace (else :class:`InvalidInput`)."""
    root = (scope.workspace or Path.cwd()).resolve()
    src = (root / path).resolve()
    if src != root and root not in src.parents:
        raise InvalidInput(f"{path}: only files inside the workspace ({root}) can be attached")
    return src


def _origin(scope: Scope) -> str:
    return f"\n\n_Proposed by {scope.actor} while working on {scope.task_id}._" if scope.task_id else ""


class Ops(Protocol):
    """What the tools do, on the board of ``scope``: each method is one kernel call
    (:class:`LocalOps`) or one API call (:class:`RemoteOps`)."""

    def show(self, task_id: str, own: bool) -> Mapping[str, Any]: ...

    def complete(self, task_id: str, summary: str | None, metadata: dict[str, Any] | None,
                 result: str | None, usage: dict[str, Any] | None) -> dict[str, Any]: ...

    def block(self, task_id: str, reason: str) -> dict[str, Any]: ...

    def heartbeat(self, task_id: str, note: str | None) -> dict[str, Any]: ...

    def inbox(self, task_id: str) -> dict[str, Any]: ...

    def comment(self, task_id: str, body: str) -> dict[str, Any]: ...

    def request_review(self, task_id: str, summary: str | None) -> dict[str, Any]: ...

    def attach(self, task_id: str, path: Path, name: str | None) -> dict[str, Any]: ...

    def goal_of(self, task_id: str) -> str | None: ...

    def propose(self, title: str, body: str, assignee: str | None, goal: str | None) -> dict[str, Any]: ...

    def list_tasks(self, status: str | None, assignee: str | None, goal: str | None, search: str | None,
                   limit: int) -> Sequence[Mapping[str, Any]]: ...

    def create(self, title: str, fields: dict[str, Any]) -> dict[str, Any]: ...

    def attempts(self, task_id: str) -> dict[str, Any]: ...

    def pick(self, task_id: str, n: int) -> dict[str, Any]: ...

    def link(self, parent_id: str, child_id: str) -> dict[str, Any]: ...

    def unblock(self, task_id: str) -> dict[str, Any]: ...

    def llm_helper(self, kind: str, task_id: str) -> dict[str, Any]: ...


class LocalOps:
    """The tools on a home's database (a person's ``agentboard mcp``)."""

    def __init__(self, db: Database, scope: Scope, settings: config.Settings) -> None:
        self.db, self.scope, self.settings, self.board = db, scope, settings, scope.board

    def board_of(self, task_id: str) -> str:
        """The worker's board, once ``task_id`` is found on it (task ids are global)."""
        found = lookups.task_board(self.db, task_id)
        if found != self.board:
            raise Forbidden(f"task {task_id} is on board {found!r}; this worker acts on board {self.board!r}")
        return found

    def show(self, task_id: str, own: bool) -> TaskDetailWithGit:
        from ..dispatch.diffs import with_git

        return with_git(queries.task_detail(self.db, self.board if own else self.board_of(task_id), task_id,
                                            events=30), self.db)

    def complete(self, task_id: str, summary: str | None, metadata: dict[str, Any] | None,
                 result: str | None, usage: dict[str, Any] | None) -> dict[str, Any]:
        from ..dispatch import finish

        out = finish.complete(self.db, self.board, task_id, summary=summary, metadata=metadata, result=result,
                              usage=usage, run_id=self.scope.run_id, actor=self.scope.actor)
        if out.get("status") == "review":
            out["review"] = finish.review_entered(self.db, self.settings, self.board, task_id).get("action")
        return out

    def block(self, task_id: str, reason: str) -> dict[str, Any]:
        return tasks.block(self.db, self.board, task_id, reason, kind="needs_input",
                           run_id=self.scope.run_id, actor=self.scope.actor)

    def heartbeat(self, task_id: str, note: str | None) -> dict[str, Any]:
        return runs.heartbeat(self.db, self.board, task_id, run_id=self.scope.run_id, note=note,
                              actor=self.scope.actor, messages=True)

    def inbox(self, task_id: str) -> dict[str, Any]:
        from ..kernel import inbox

        return inbox.take(self.db, self.board, task_id, run_id=self.scope.run_id)

    def comment(self, task_id: str, body: str) -> dict[str, Any]:
        sc = self.scope
        board = self.board_of(task_id)
        if sc.run_id is not None and sc.task_id and not sc.orchestrator and task_id != sc.task_id:
            raise Forbidden(f"a worker comments on its own task ({sc.task_id}), not {task_id}: an orchestrator's "
                            "run comments on any task of its board")  # as through the API
        return comments.comment(self.db, board, task_id, body, author=sc.actor, run_id=sc.run_id)

    def request_review(self, task_id: str, summary: str | None) -> dict[str, Any]:
        out = runs.request_review(self.db, self.board, task_id, summary=summary, run_id=self.scope.run_id,
                                  actor=self.scope.actor)
        from ..dispatch import finish

        out["review"] = finish.review_entered(self.db, self.settings, self.board, task_id).get("action")
        return out

    def attach(self, task_id: str, path: Path, name: str | None) -> dict[str, Any]:
        return attachments.attach(self.db, self.board, task_id, path, home=self.settings.home, name=name,
                                  max_bytes=self.settings.attachment_max_bytes, actor=self.scope.actor)

    def goal_of(self, task_id: str) -> str | None:
        return queries.task_detail(self.db, self.board, task_id, events=0).get("goal_id")

    def propose(self, title: str, body: str, assignee: str | None, goal: str | None) -> dict[str, Any]:
        sc = self.scope
        if sc.run_id is not None and sc.task_id and not sc.orchestrator:  # a worker's, as through the API
            return run_limits.propose(self.db, self.board, title, task_id=sc.task_id, run_id=sc.run_id,
                                      actor=sc.actor, body=body, assignee=assignee, goal=goal)
        return tasks.create(self.db, self.board, title, body=body, assignee=assignee, goal=goal, triage=True,
                            actor=sc.actor)

    def list_tasks(self, status: str | None, assignee: str | None, goal: str | None, search: str | None,
                   limit: int) -> Sequence[Mapping[str, Any]]:
        return queries.list_tasks(self.db, self.board, status=status, assignee=assignee, goal=goal,
                                  search=search, limit=limit)

    def create(self, title: str, fields: dict[str, Any]) -> dict[str, Any]:
        sc = self.scope
        if sc.run_id is not None and sc.task_id:  # an orchestrator run's, within its limits as through the API
            return run_limits.delegate(self.db, self.board, title, task_id=sc.task_id, run_id=sc.run_id,
                                       actor=sc.actor, **fields)
        return tasks.create(self.db, self.board, title, actor=sc.actor, **fields)

    def attempts(self, task_id: str) -> dict[str, Any]:
        from ..dispatch import races

        return races.view(self.db, self.board_of(task_id), task_id)

    def pick(self, task_id: str, n: int) -> dict[str, Any]:
        from ..dispatch import finish

        return finish.pick(self.db, self.board_of(task_id), task_id, n, actor=self.scope.actor)

    def link(self, parent_id: str, child_id: str) -> dict[str, Any]:
        return links.link(self.db, self.board_of(child_id), parent_id, child_id, actor=self.scope.actor)

    def unblock(self, task_id: str) -> dict[str, Any]:
        return tasks.unblock(self.db, self.board_of(task_id), task_id, actor=self.scope.actor)

    def llm_helper(self, kind: str, task_id: str) -> dict[str, Any]:
        from ..agents.decompose import decompose
        from ..agents.specify import specify

        run = specify if kind == "specify" else decompose
        return run(self.db, self.board_of(task_id), task_id, settings=self.settings, actor=self.scope.actor).to_dict()


class RemoteOps:
    """The tools through the API with the worker's run token (inside a worker)."""

    def __init__(self, api: WorkerClient, scope: Scope) -> None:
        self.api, self.scope, self.board = api, scope, scope.board

    def show(self, task_id: str, own: bool) -> dict[str, Any]:
        return self.api.task_detail(task_id, events=30)

    def complete(self, task_id: str, summary: str | None, metadata: dict[str, Any] | None,
                 result: str | None, usage: dict[str, Any] | None) -> dict[str, Any]:
        return self.api.complete(task_id, run_id=self.scope.run_id, summary=summary, metadata=metadata,
                                 result=result, usage=usage, review=True)

    def block(self, task_id: str, reason: str) -> dict[str, Any]:
        return self.api.block(task_id, reason, kind="needs_input", run_id=self.scope.run_id)

    def heartbeat(self, task_id: str, note: str | None) -> dict[str, Any]:
        return self.api.heartbeat(task_id, run_id=self.scope.run_id, note=note)

    def inbox(self, task_id: str) -> dict[str, Any]:
        return self.api.inbox(task_id, run_id=self.scope.run_id)

    def comment(self, task_id: str, body: str) -> dict[str, Any]:
        return self.api.comment(task_id, body)

    def request_review(self, task_id: str, summary: str | None) -> dict[str, Any]:
        return self.api.request_review(task_id, summary=summary, run_id=self.scope.run_id)

    def attach(self, task_id: str, path: Path, name: str | None) -> dict[str, Any]:
        return self.api.attach(task_id, path, name=name)

    def goal_of(self, task_id: str) -> str | None:
        return self.api.task_detail(task_id, events=0).get("goal_id")

    def propose(self, title: str, body: str, assignee: str | None, goal: str | None) -> dict[str, Any]:
        return self.api.create(self.board, {"title": title, "body": body, "assignee": assignee, "goal": goal,
                                            "triage": True})

    def list_tasks(self, status: str | None, assignee: str | None, goal: str | None, search: str | None,
                   limit: int) -> list[dict[str, Any]]:
        return self.api.list_tasks(self.board, status=status, assignee=assignee, goal=goal, search=search,
                                   limit=limit)

    def create(self, title: str, fields: dict[str, Any]) -> dict[str, Any]:
        return self.api.create(self.board, {"title": title, **fields})

    def attempts(self, task_id: str) -> dict[str, Any]:
        return self.api.call("GET", f"/api/tasks/{task_id}/attempts")  # type: ignore[no-any-return]

    def pick(self, task_id: str, n: int) -> dict[str, Any]:
        return self.api.call("POST", f"/api/tasks/{task_id}/pick", json={"n": n})  # type: ignore[no-any-return]

    def link(self, parent_id: str, child_id: str) -> dict[str, Any]:
        return self.api.link(parent_id, child_id)

    def unblock(self, task_id: str) -> dict[str, Any]:
        return self.api.unblock(task_id)

    def llm_helper(self, kind: str, task_id: str) -> dict[str, Any]:
        out = self.api.call("POST", f"/api/tasks/{task_id}/{kind}")
        if not out.get("ok") and str(out.get("reason") or "").startswith("unavailable"):
            raise Unavailable(str(out["reason"]))
        return out  # type: ignore[no-any-return]


def build_server(ops: Ops, scope: Scope) -> MCPServer:
    """An MCP server whose tools act for ``scope`` through ``ops``."""
    from .. import __version__

    server = _Server(name="agentboard", instructions=INSTRUCTIONS, version=__version__)

    def own_task() -> str:
        if not scope.task_id:
            raise InvalidInput("no task: AGENTBOARD_TASK is not set (this server was not started for a worker)")
        return scope.task_id

    @server.tool(description="Show a task (default: your own): task, parents, children, comments, "
                             "recent events, runs and worker_context (the markdown you should read first).")
    def kanban_show(task_id: str | None = None) -> CallToolResult:
        def body() -> Any:
            detail = ops.show(task_id or own_task(), own=not task_id)
            return {**detail, "worker_context": render(detail)}
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
            out = ops.complete(tid, summary, metadata, result, usage)
            res = _task_summary(out)
            if out.get("review"):
                res["review"] = out["review"]
            if out.get("pending_verification"):
                res["message"] = ("success recorded; the verify commands run when you exit, "
                                  "then the task completes or comes back to you")
            elif out.get("pending"):  # its branch's integration, or what you left uncommitted
                res["message"] = ("success recorded; it is applied when you exit (what you leave uncommitted "
                                  "in the worktree is committed on the task's branch then): end your turn now")
            return res
        return _guard(body)

    @server.tool(description="Block your task because you need input; reason says what you need.")
    def kanban_block(reason: str) -> CallToolResult:
        def body() -> Any:
            tid = own_task()  # an empty reason: the kernel's refusal, in the CLI's and REST's words
            model.plain(reason, "reason")  # no terminal controls: the CLI's and REST's rule
            return _task_summary(ops.block(tid, reason))
        return _guard(body)

    @server.tool(description="A reviewer's verdict on the task it reviews (a review run only): verdict "
                 "approved, changes_requested or rejected, a 0-100 score, a summary saying why, optional "
                 "findings [{file, severity, message}]. Applied when your review run ends.")
    def kanban_review(verdict: str, score: int, summary: str,
                      findings: list[dict[str, Any]] | None = None) -> CallToolResult:
        def body() -> Any:
            if not scope.review_run or scope.workspace is None:
                raise InvalidInput("kanban_review is for a review run; a worker finishes with kanban_complete")
            data: dict[str, Any] = {"verdict": verdict, "score": score, "summary": summary}
            if findings:
                data["findings"] = findings
            path = review.write_verdict(scope.workspace, data)
            return {"run_id": scope.run_id, "task_id": scope.task_id, "verdict": verdict, "written": str(path),
                    "note": "applied when your review run ends: exit now"}
        return _guard(body)

    @server.tool(description="Tell the board you are alive during long work (extends your claim); the "
                             "answer's `messages` are comments written on your task since you last looked.")
    def kanban_heartbeat(note: str | None = None) -> CallToolResult:
        return _guard(lambda: ops.heartbeat(own_task(), note))

    @server.tool(description="Read the messages people (or the supervisor) wrote on your task since you last "
                             "looked: comments after your run started. Check it between steps of long work.")
    def kanban_inbox() -> CallToolResult:
        return _guard(lambda: ops.inbox(own_task()))

    @server.tool(description="Append a comment to your task's thread (an orchestrator's run: to any task of its "
                             "board's).")
    def kanban_comment(task_id: str, body: str) -> CallToolResult:
        return _guard(lambda: ops.comment(task_id, body))

    @server.tool(description="Hand your task to review, with an optional summary.")
    def kanban_request_review(summary: str | None = None) -> CallToolResult:
        def body() -> Any:
            out = ops.request_review(own_task(), summary)
            return _task_summary(out) | {"review": out.get("review")}
        return _guard(body)

    @server.tool(description="Attach a file from your workspace to your task.")
    def kanban_attach(path: str, name: str | None = None) -> CallToolResult:
        return _guard(lambda: ops.attach(own_task(), _inside(scope, path), name))

    @server.tool(description="Propose a new task for a problem outside your task's scope; it lands in "
                             "triage (a person releases it), linked to your task's goal.")
    def kanban_propose(title: str, body: str | None = None, assignee: str | None = None) -> CallToolResult:
        def run() -> Any:
            goal = ops.goal_of(scope.task_id) if scope.task_id else None
            out = ops.propose(title, (body or "") + _origin(scope), assignee, goal)
            return _task_summary(out) | {"goal_id": out.get("goal_id")}
        return _guard(run)

    if scope.orchestrator:
        @server.tool(description="(orchestrators) List tasks with filters: status (comma list), "
                                 "assignee, goal, search, limit.")
        def kanban_list(status: str | None = None, assignee: str | None = None, goal: str | None = None,
                        search: str | None = None, limit: int = 100) -> CallToolResult:
            return _guard(lambda: {"tasks": ops.list_tasks(status, assignee, goal, search, limit)})

        @server.tool(description="(orchestrators) Create a task with an assignee, optional parents, "
                                 "skills, goal, body and priority; race makes it a race of one attempt per "
                                 "profile, each on its own branch (race_until: all or first-pass).")
        def kanban_create(title: Annotated[str, _about("title")], assignee: Annotated[str, _about("assignee")],
                          body: Annotated[str | None, _about("body")] = None,
                          parents: Annotated[list[str] | None, _about("parents")] = None,
                          skills: Annotated[list[str] | None, _about("skills")] = None,
                          goal: Annotated[str | None, _about("goal")] = None,
                          priority: Annotated[int, _about("priority")] = 0,
                          race: Annotated[list[str] | None, _about("race")] = None,
                          race_until: Annotated[str | None, _about("race_until")] = None) -> CallToolResult:
            given = {"assignee": assignee, "body": body, "parents": parents, "skills": skills, "goal": goal,
                     "priority": priority, "race": race, "race_until": race_until}
            return _guard(lambda: ops.create(title, {k: v for k, v in given.items() if v is not None}))

        @server.tool(description="(orchestrators) A race's attempts side by side: profile, model, outcome, "
                                 "verification, diff stat, duration, tokens, cost, summary; which may be picked.")
        def kanban_attempts(task_id: str) -> CallToolResult:
            return _guard(lambda: ops.attempts(task_id))

        @server.tool(description="(orchestrators) Pick attempt n as the winner of a race: its branch becomes "
                                 "the task's and is integrated as the board says.")
        def kanban_pick(task_id: str, n: int) -> CallToolResult:
            return _guard(lambda: ops.pick(task_id, n))

        @server.tool(description="(orchestrators) Add a dependency: child waits for parent.")
        def kanban_link(parent_id: str, child_id: str) -> CallToolResult:
            return _guard(lambda: ops.link(parent_id, child_id))

        @server.tool(description="(orchestrators) Move a blocked task back to ready.")
        def kanban_unblock(task_id: str) -> CallToolResult:
            return _guard(lambda: _task_summary(ops.unblock(task_id)))

        @server.tool(description="(orchestrators) Rewrite a triage task with the board's LLM (Goal, Approach, "
                                 "Acceptance criteria, Out of scope) and release it.")
        def kanban_specify(task_id: str) -> CallToolResult:
            return _guard(lambda: ops.llm_helper("specify", task_id))

        @server.tool(description="(orchestrators) Split a triage task with the board's LLM into 2-6 linked "
                                 "tasks for the roster's profiles (or specify it when it is one piece of work).")
        def kanban_decompose(task_id: str) -> CallToolResult:
            return _guard(lambda: ops.llm_helper("decompose", task_id))

    if scope.supervisor and isinstance(ops, RemoteOps):
        from .supervisor_tools import add_supervisor_tools

        add_supervisor_tools(server, ops.api, _guard)

    return server


def serve() -> None:
    """Serve the tools on stdio until the client disconnects: through the API with the run token
    inside a worker, else on the home's database."""
    if worker_mode():
        api: WorkerClient
        try:
            api = WorkerClient.from_env()
        except Unavailable as exc:  # no API: each tool says to report through .board/result.json
            me_env = WorkerEnv.from_environ()
            api = UnreachableClient(exc, run_id=me_env.run_id, task_id=me_env.task)
        try:  # (briefly: the session waits for the tools' list; a tool's own call waits longer)
            me = api.call("GET", "/api/me", retry_for=SCOPE_RETRY_FOR)
        except Unavailable as exc:  # the API is gone: the tools say so when called
            sys.stderr.write(f"agentboard mcp: {one_line(str(exc))}; listing a worker's tools\n")
            me = {}
        except AgentboardError:  # a closed run's token: the tools then say the run is stale
            me = {}
        scope = scope_from_env(orchestrator=bool(me.get("orchestrator")), supervisor=me.get("supervisor"))
        build_server(RemoteOps(api, scope), scope).run("stdio")
        return
    from ..client import open_home

    settings = config.load()
    db = open_home(settings)
    scope = scope_from_env(db)
    build_server(LocalOps(db, scope, settings), scope).run("stdio")


__all__ = ["LocalOps", "Ops", "RemoteOps", "Scope", "build_server", "scope_from_env", "serve"]
