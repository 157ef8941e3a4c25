"""Tasks: list, create, detail, edit (status changes map to kernel verbs), bulk, comments,
review, reclaim, specify/decompose, the worker log and attachments.

A route given a task id acts on the task wherever it lives (see :mod:`.common`); only the list
and create routes are scoped by ``?board=``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import FileResponse, Response

from ...domain import model, states, task_fields
from ...domain.errors import AgentboardError, Forbidden, InvalidInput, NotFound, Unavailable
from ...kernel import attachments, comments, host_access, offers, queries, run_limits, runs, tasks
from ...store.engine import Database
from ..answers import (
    FILE_RESPONSE,
    AttachmentRow,
    BulkAnswer,
    CommentRow,
    CreatedTask,
    ExistingTask,
    LlmBulkAnswer,
    LlmOutcome,
    TaskCard,
    TaskDetailView,
    TaskDiff,
    TaskRow,
    WorkerLog,
)
from ..auth import Principal, current
from ..models import (
    Body,
    BulkRequest,
    CommentCreate,
    ReasonBody,
    ReviewRequest,
    TaskCreate,
    TaskPatch,
)
from .common import Json, actor_of, read_board, responses, state, write_board

router = APIRouter(prefix="/api", tags=["tasks"])

TaskId = PathParam(min_length=1, max_length=64, description="task id (t_…)")
BoardQ = Query(default=None, max_length=64, description="board slug (default: the token's board or 'default')")
TaskBoardQ = Query(default=None, max_length=64,
                   description="optional: the task's board (a task id finds its own board; another board is a 400)")
#: the most tasks one bulk specify / decompose request handles
LLM_BULK_MAX = 50
BulkBoardQ = Query(default=None, max_length=64,
                   description="optional: the board every id must be on (each id finds its own board)")


@router.get("/tasks", response_model=list[TaskCard], responses=responses(400, 404))
def list_tasks(
    request: Request,
    board: str | None = BoardQ,
    status: str | None = Query(default=None, max_length=200, description="comma-separated statuses"),
    assignee: str | None = Query(default=None, max_length=200),
    tenant: str | None = Query(default=None, max_length=200),
    goal: str | None = Query(default=None, max_length=64),
    search: str | None = Query(default=None, max_length=500),
    include_archived: bool = False,
    limit: int = Query(default=200, ge=0, le=5000),
    offset: int = Query(default=0, ge=0),
    supervision: bool = Query(default=False, description="include the supervisor's own tasks"),
    who: Principal = Depends(current),
) -> Response:
    slug = read_board(request, who, board)
    return Json(queries.list_tasks(
        state(request).db, slug, status=status, assignee=assignee, tenant=tenant, goal=goal,
        search=search, include_archived=include_archived, limit=limit, offset=offset, supervision=supervision))


@router.post("/tasks", response_model=CreatedTask | ExistingTask, status_code=201,
             responses=responses(400, 404, 409, 429))
def create_task(request: Request, data: TaskCreate, board: str | None = BoardQ,
                who: Principal = Depends(current)) -> Response:
    if who.is_run and not who.orchestrator and data.triage:
        # any worker may propose work; it lands in triage for a person or the supervisor
        slug = read_board(request, who, board)
    else:
        slug = write_board(request, who, board)
    fields = data.new_task_fields()
    # commands and workspace paths on the host: an admin decision (403 before anything is written)
    host_access.authorize(who.host, verify=fields.get("verify"), workspace=fields.get("workspace"),
                          branch=fields.get("branch"))
    if not (who.is_run and who.run_id is not None and who.task_id):
        task = tasks.create(state(request).db, slug, data.title, actor=who.name, **fields)
    elif data.triage or not who.orchestrator:
        # a worker's proposal: recorded on its own task, within what one run may propose
        task = run_limits.propose(state(request).db, slug, data.title, task_id=who.task_id, run_id=who.run_id,
                                  actor=who.name, **fields)
    else:
        # an orchestrator's create: within what one run may create, and how deep delegation goes
        task = run_limits.delegate(state(request).db, slug, data.title, task_id=who.task_id, run_id=who.run_id,
                                   actor=who.name, **fields)
    return Json(task, status_code=201)


@router.get("/tasks/{task_id}", response_model=TaskDetailView, responses=responses(400, 404))
def task_detail(request: Request, task_id: str = TaskId, board: str | None = TaskBoardQ,
                events: int = Query(default=20, ge=0, le=1000),
                who: Principal = Depends(current)) -> Response:
    from ...dispatch.diffs import with_git

    slug = read_board(request, who, board, task_id)
    db = state(request).db
    detail = with_git(queries.task_detail(db, slug, task_id, events=events), db)
    return Json({**detail, "moves": offers.allowed_moves(db, slug, task_id)})  # what the dashboard offers


@router.get("/tasks/{task_id}/diff", response_model=TaskDiff, responses=responses(400, 404))
def task_diff(request: Request, task_id: str = TaskId, board: str | None = TaskBoardQ,
              page: int = Query(default=1, ge=1, le=100_000),
              per_page: int = Query(default=20, ge=1, le=200),
              path: str | None = Query(default=None, max_length=4096, description="only this file"),
              who: Principal = Depends(current)) -> Response:
    """The diff of the task's work (the one its reviewer reads), split per file and paged."""
    from ...dispatch.diffs import task_diff as diff_of

    slug = read_board(request, who, board, task_id)
    return Json(diff_of(state(request).db, slug, task_id, page=page, per_page=per_page, path=path))


def _validate_patch(data: TaskPatch, who: Principal) -> dict[str, Any]:
    """Check every field before changing anything, so bad input leaves the task as it was."""
    sent = data.model_fields_set
    edits: dict[str, Any] = {}
    if "verify" in sent:
        if data.verify is None:
            raise InvalidInput("verify cannot be null: send [] to remove the task's checks")
        if who.is_run:
            raise Forbidden("a run token cannot change what verifies a task: a person decides that")
        host_access.authorize(who.host, verify=data.verify)
        edits["verify"] = [v for v in data.verify if v.strip()]
    if data.title is not None:
        edits["title"] = model.title(data.title)
    if data.body is not None:
        edits["body"] = model.body(data.body)
    if data.priority is not None:
        edits["priority"] = task_fields.check("priority", data.priority)  # POST's limits and message
    for key in ("result", "tenant", "goal_id"):
        value = getattr(data, key)
        if value is not None:
            edits[key] = value
    if "model" in sent:
        edits["model"] = model.model_name(data.model) or ""  # "" clears it
    if "max_runtime" in sent:  # create's limits and message; null or "" clears the limit (as `edit`)
        edits["max_runtime_seconds"] = task_fields.check("max_runtime", data.max_runtime) if data.max_runtime else ""
    if data.max_retries is not None:
        edits["max_retries"] = task_fields.check("max_retries", data.max_retries)
    if data.branch is not None:  # `edit --branch`: checked as on create, refused once the task has started
        edits["branch_name"] = data.branch
    if "assignee" in sent and data.assignee:
        model.profile_name(data.assignee)
    if "status" in sent and data.status is None:
        raise InvalidInput("status cannot be null")
    return edits


@router.patch("/tasks/{task_id}", response_model=TaskRow, responses=responses(400, 404, 409))
def patch_task(request: Request, data: TaskPatch, task_id: str = TaskId, board: str | None = BoardQ,
               who: Principal = Depends(current)) -> Response:
    """Edit fields, reassign and change the status in one transaction: a refused step (say a
    409 on the status) leaves the task as it was. A person's edit: a run token changes its task
    only through the worker verbs (complete, block, heartbeat, request review), so it gets a 403.
    Done passes the review and verification gates and integrates (``dispatch.finish``)."""
    if who.is_run:
        raise Forbidden(_RUN_TOKEN_EDIT)
    slug = write_board(request, who, board, task_id)
    edits = _validate_patch(data, who)
    sent = data.model_fields_set
    if not (edits or "assignee" in sent or data.status is not None):
        raise InvalidInput("nothing to change: send status, assignee, priority, title, body, result, tenant, "
                           "goal_id, verify, model, max_runtime, max_retries or branch")
    from ...dispatch import finish

    return Json(finish.update(state(request).db, slug, task_id, fields=edits, assign="assignee" in sent,
                              assignee=data.assignee or None, status=data.status, reason=data.reason,
                              actor=who.name, expected=data.expected_status))


#: why a run token's PATCH is refused
_RUN_TOKEN_EDIT = ("a run token cannot edit a task or change its status: a worker finishes with complete, "
                   "block or request-review (agentboard complete / kanban_complete) and its verification "
                   "and review decide the rest")
#: the bulk actions a run token may take (an orchestrator's unblock; ``kanban_unblock``)
_RUN_BULK = frozenset({"unblock"})


_BULK_NEEDS = {"status": "status", "assign": "assignee", "priority": "priority", "block": "reason"}


@router.post("/tasks/bulk", response_model=BulkAnswer, responses=responses(400, 404))
def bulk(request: Request, data: BulkRequest, board: str | None = BulkBoardQ,
         who: Principal = Depends(current)) -> Response:
    """Apply one action to several tasks, each on its own board and in its own transaction:
    each id reports its own result, and a refused id leaves the others applied."""
    if who.is_run and data.action not in _RUN_BULK:
        raise Forbidden(f"a run token cannot {data.action} tasks in bulk: a worker finishes with complete, block or "
                        "request-review, and proposes other work with `agentboard create --triage`")
    if board:
        read_board(request, who, board)
    if not who.is_run:
        who.check_writer()  # a run token is checked per id: it may touch its own task
    db = state(request).db
    need = _BULK_NEEDS.get(data.action)
    if need and getattr(data, need) in (None, ""):
        raise InvalidInput(f"action {data.action!r} needs {need!r}")
    if data.action == "assign" and data.assignee and data.assignee.lower() not in ("none", "-"):
        model.profile_name(data.assignee)
    if data.action == "priority":
        task_fields.check("priority", data.priority)
    actor = who.name
    from ...dispatch import finish

    seen = data.expected_statuses or {}

    def verb(db_: Database, _board: str, task_id: str) -> dict[str, Any]:
        board_ = write_board(request, who, board, task_id)
        expected = seen.get(task_id)
        if data.action == "status":
            return finish.set_status(db_, board_, task_id, str(data.status), reason=data.reason, actor=actor,
                                     expected=expected)
        if data.action == "archive":
            if expected is not None:  # the archive the person confirmed, only from the status they saw
                return tasks.set_status(db_, board_, task_id, states.ARCHIVED, actor=actor, expected=expected)
            return tasks.archive(db_, board_, task_id, actor=actor)
        if data.action == "restore":
            return tasks.restore(db_, board_, task_id, actor=actor)
        if data.action == "assign":
            return tasks.assign(db_, board_, task_id, data.assignee, actor=actor)
        if data.action == "priority":
            return tasks.edit(db_, board_, task_id, priority=data.priority, actor=actor)
        if data.action == "block":
            return tasks.block(db_, board_, task_id, str(data.reason), actor=actor)
        if data.action == "unblock":
            return tasks.unblock(db_, board_, task_id, actor=actor)
        return runs.reclaim(db_, board_, task_id, reason=data.reason, actor=actor)

    ids = list(dict.fromkeys(i.strip() for i in data.ids if i.strip()))
    if not ids:
        raise InvalidInput("ids is empty")
    results = tasks.bulk(verb, db, board or "", ids)
    ok = sum(1 for r in results if r["ok"])
    return Json({"results": results, "ok": ok, "failed": len(results) - ok})


@router.post("/tasks/{task_id}/comments", response_model=CommentRow, status_code=201,
             responses=responses(400, 404, 429))
def add_comment(request: Request, data: CommentCreate, task_id: str = TaskId,
                board: str | None = TaskBoardQ, who: Principal = Depends(current)) -> Response:
    slug = write_board(request, who, board, task_id)
    out = comments.comment(state(request).db, slug, task_id, data.body, author=actor_of(request, who, slug),
                           mentions=data.mentions, run_id=who.run_id if who.is_run else None)
    return Json(out, status_code=201)


@router.post("/tasks/{task_id}/review", response_model=TaskRow, responses=responses(400, 404, 409))
def review(request: Request, data: ReviewRequest, task_id: str = TaskId,
           board: str | None = TaskBoardQ, who: Principal = Depends(current)) -> Response:
    slug = write_board(request, who, board, task_id)
    if who.is_run:  # the reviewer agent gives its verdict through its review run (kanban_review)
        raise Forbidden("a run token cannot record a review verdict: a person reviews, or the board's reviewer")
    from ...dispatch import finish

    out = finish.review(state(request).db, slug, task_id, data.verdict, data.text, reviewer=who.name,
                        score=data.score, findings=data.findings, actor=who.name)
    return Json(out)


@router.post("/tasks/{task_id}/reclaim", response_model=TaskRow, responses=responses(400, 404, 409))
def reclaim(request: Request, data: ReasonBody | None = None, task_id: str = TaskId,
            board: str | None = TaskBoardQ, who: Principal = Depends(current)) -> Response:
    slug = write_board(request, who, board, task_id)
    who.check_person("reclaim", task_id)
    reason = data.reason if data else None
    return Json(runs.reclaim(state(request).db, slug, task_id, reason=reason, actor=who.name))


def _llm_action(request: Request, who: Principal, board: str | None, task_id: str, kind: str) -> Response:
    """Run the LLM helper ``kind`` on a triage task: ``{ok: true, task, children?}``, or
    ``{ok: false, reason}`` when no LLM is available (nothing is asked) or its answer was not
    usable (the task stays in triage with a comment quoting it)."""
    try:
        return Json(_llm_outcome(request, who, board, task_id, kind))
    except Unavailable as exc:
        return Json({"ok": False, "task_id": task_id, "reason": exc.message})


def _llm_outcome(request: Request, who: Principal, board: str | None, task_id: str, kind: str) -> dict[str, Any]:
    slug = write_board(request, who, board, task_id)
    st = state(request)
    if kind == "specify":
        from ...agents.specify import specify as run
    else:
        from ...agents.decompose import decompose as run
    return run(st.db, slug, task_id, settings=st.settings, actor=who.name).to_dict()


class LlmBulk(Body):
    """Several triage tasks for one LLM helper: the ids given, or (``all``) every triage task of
    the board (of one ``tenant`` when given)."""

    ids: list[str] = Field(default_factory=list, max_length=LLM_BULK_MAX)
    all: bool = False
    tenant: str | None = Field(default=None, max_length=200)


@router.post("/tasks/specify", response_model=LlmBulkAnswer, responses=responses(400, 404))
@router.post("/tasks/decompose", response_model=LlmBulkAnswer, responses=responses(400, 404))
def llm_bulk(request: Request, data: LlmBulk, board: str | None = BulkBoardQ,
             who: Principal = Depends(current)) -> Response:
    """Specify or decompose several triage tasks, one LLM call (and one transaction) each: each
    id reports its own outcome. Without an LLM: ``{ok: false, reason}`` and nothing is asked."""
    kind = request.url.path.rstrip("/").rsplit("/", 1)[-1]
    st = state(request)
    if data.all or board:
        write_board(request, who, board)
    who.check_writer()  # before anything is said about the LLM; each id is checked on its board too
    from ...agents import specify as spec

    use = spec.USE if kind == "specify" else "decomposer"
    try:
        spec.require(st.settings, use)
    except Unavailable as exc:
        return Json({"ok": False, "reason": exc.message, "results": []})
    if data.all:
        slug = write_board(request, who, board)
        rows = queries.list_tasks(st.db, slug, status="triage", tenant=data.tenant, limit=LLM_BULK_MAX)
        ids = [r["id"] for r in rows]
    else:
        ids = list(dict.fromkeys(i.strip() for i in data.ids if i.strip()))
        if not ids:
            raise InvalidInput("give ids, or all: true for every triage task of the board")
    results: list[dict[str, Any]] = []
    for task_id in ids:
        try:
            results.append(_llm_outcome(request, who, board, task_id, kind))
        except AgentboardError as exc:
            results.append({"ok": False, "task_id": task_id, "reason": exc.message,
                            "error": {"code": exc.code, "message": exc.message}})
    ok = sum(1 for r in results if r["ok"])
    return Json({"ok": ok == len(results), "results": results, "done": ok, "failed": len(results) - ok})


@router.post("/tasks/{task_id}/specify", response_model=LlmOutcome, responses=responses(400, 404, 409))
def specify(request: Request, task_id: str = TaskId, board: str | None = TaskBoardQ,
            who: Principal = Depends(current)) -> Response:
    """Rewrite a triage one-liner with the LLM (Goal / Approach / Acceptance criteria / Out of
    scope) and release it; ``{ok: false, reason}`` when there is no LLM or its answer is unusable."""
    return _llm_action(request, who, board, task_id, "specify")


@router.post("/tasks/{task_id}/decompose", response_model=LlmOutcome, responses=responses(400, 404, 409))
def decompose(request: Request, task_id: str = TaskId, board: str | None = TaskBoardQ,
              who: Principal = Depends(current)) -> Response:
    """Split a triage task into 2-6 linked tasks with the LLM (or specify it when the LLM says
    it is one piece of work); ``{ok: false, reason}`` when there is no LLM or its answer is unusable."""
    return _llm_action(request, who, board, task_id, "decompose")


@router.get("/tasks/{task_id}/log", response_model=WorkerLog, responses=responses(400, 404))
def worker_log(request: Request, task_id: str = TaskId, board: str | None = TaskBoardQ,
               run_id: int | None = Query(default=None, ge=1),
               tail: int = Query(default=64 * 1024, ge=1, le=4 * 1024 * 1024),
               who: Principal = Depends(current)) -> Response:
    """The tail of the worker's log (the latest run with a log, or ``run_id``)."""
    slug = read_board(request, who, board, task_id)
    all_runs = queries.runs(state(request).db, slug, task_id)
    chosen = None
    for run in reversed(all_runs):
        if run_id is not None and run["id"] != run_id:
            continue
        if run_id is not None or run.get("log_path"):
            chosen = run
            break
    if run_id is not None and chosen is None:
        raise NotFound(f"no run {run_id} of task {task_id}")
    out: dict[str, Any] = {"task_id": task_id, "run_id": chosen["id"] if chosen else None,
                           "path": None, "size": 0, "truncated": False, "text": ""}
    path = chosen.get("log_path") if chosen else None
    if path:
        out["path"] = path
        p = Path(path)
        if p.is_file():
            size = p.stat().st_size
            with open(p, "rb") as fh:
                if size > tail:
                    fh.seek(size - tail)
                data = fh.read(tail)
            out.update(size=size, truncated=size > tail, text=data.decode("utf-8", errors="replace"))
    return Json(out)


@router.get("/tasks/{task_id}/attachments", response_model=list[AttachmentRow], responses=responses(400, 404))
def list_attachments(request: Request, task_id: str = TaskId, board: str | None = TaskBoardQ,
                     who: Principal = Depends(current)) -> Response:
    slug = read_board(request, who, board, task_id)
    return Json(attachments.list_attachments(state(request).db, slug, task_id))


@router.post(
    "/tasks/{task_id}/attachments", status_code=201, response_model=AttachmentRow, responses=responses(400, 404, 409),
    openapi_extra={"requestBody": {"required": True, "content": {
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}},
)
async def upload_attachment(request: Request, task_id: str = TaskId, board: str | None = TaskBoardQ,
                            name: str = Query(min_length=1, max_length=255, description="file name"),
                            who: Principal = Depends(current)) -> Response:
    """Attach the raw request body as a file named ``name``."""
    if "/" in name or "\\" in name or "\x00" in name:
        raise InvalidInput(f"invalid attachment name {name!r}: give a plain file name, not a path")
    slug = await run_in_threadpool(write_board, request, who, board, task_id)
    data = await request.body()
    st = state(request)
    out = await run_in_threadpool(
        lambda: attachments.attach(st.db, slug, task_id, name, home=st.settings.home, name=name,
                                   data=data, max_bytes=st.settings.attachment_max_bytes,
                                   actor=who.name))
    return Json(out, status_code=201)


@router.get("/tasks/{task_id}/attachments/{attachment_id}", responses={**responses(400, 404), **FILE_RESPONSE},
            response_class=FileResponse)
def download_attachment(request: Request, task_id: str = TaskId,
                        attachment_id: int = PathParam(ge=1, le=2**62), board: str | None = TaskBoardQ,
                        who: Principal = Depends(current)) -> Response:
    """The attached file itself (always as a download, never rendered inline)."""
    slug = read_board(request, who, board, task_id)
    st = state(request)
    for att in attachments.list_attachments(st.db, slug, task_id):
        if att["id"] == attachment_id:
            folder = attachments.attachments_dir(st.settings.home, slug, task_id).resolve()
            path = Path(att["path"]).resolve()
            if path.parent != folder or not path.is_file():
                raise NotFound(f"the file of attachment {attachment_id} is missing")
            return FileResponse(os.fspath(path), filename=att["name"], media_type="application/octet-stream",
                                headers={"X-Content-Type-Options": "nosniff"})
    raise NotFound(f"no attachment {attachment_id} on task {task_id}")


__all__ = ["router"]
