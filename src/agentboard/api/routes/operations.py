"""Operator routes: purge a task (admin), remove an attachment, task-graph templates, schedules."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ...kernel import attachments, host_access, inbox, purge, schedules, templates
from ..answers import (
    InboxAnswer,
    PurgedTask,
    RemovedAttachment,
    ScheduleRow,
    TemplateCreated,
    TemplateDetail,
    TemplateSummary,
)
from ..auth import Principal, current
from ..models import Body
from .common import Json, actor_of, read_board, responses, state, write_board

router = APIRouter(prefix="/api", tags=["operations"])

TaskId = PathParam(min_length=1, max_length=64, description="task id (t_…)")
TaskBoardQ = Query(default=None, max_length=64,
                   description="optional: the task's board (a task id finds its own board; another board is a 400)")


@router.delete("/tasks/{task_id}", response_model=PurgedTask, responses=responses(400, 403, 404, 409))
async def purge_task(request: Request, task_id: str = TaskId, board: str | None = TaskBoardQ,
                     force: bool = Query(default=False, description="also a running task (its worker on this "
                                         "host is stopped) or one with unfinished children"),
                     who: Principal = Depends(current)) -> Response:
    """Remove the task and every row about it for real (admin); an audit event ``purged`` stays
    on the board. A running task or one with unfinished children is a 409 unless ``force``.
    Then what it left on disk goes (``dispatch.gc.after_purge``): its worker logs, workspace,
    clean worktree and merged ``ab/`` branch; ``kept`` says what stayed, why, and how to remove it."""
    from ...dispatch.gc import after_purge
    from ...dispatch.liveness import stop_if_local

    slug = await run_in_threadpool(write_board, request, who, board, task_id)
    who.check_admin(slug)
    st = state(request)
    out = await run_in_threadpool(
        lambda: purge.purge(st.db, slug, task_id, force=force, actor=who.name, home=st.settings.home))
    out["worker_stopped"] = await run_in_threadpool(stop_if_local, out.get("worker"), st.settings.host_id)
    out.update(await run_in_threadpool(after_purge, st.db, st.settings.home, out))
    return Json(out)


@router.delete("/tasks/{task_id}/attachments/{attachment_id}", response_model=RemovedAttachment, responses=responses(400, 404))
def remove_attachment(request: Request, task_id: str = TaskId,
                      attachment_id: int = PathParam(ge=1, le=2**62), board: str | None = TaskBoardQ,
                      who: Principal = Depends(current)) -> Response:
    """Remove one attachment: its record and its file (event ``detached``)."""
    slug = write_board(request, who, board, task_id)
    st = state(request)
    return Json(attachments.remove_attachment(st.db, slug, task_id, attachment_id, home=st.settings.home,
                                              actor=actor_of(request, who, slug)))


# -- templates ----------------------------------------------------------------------------------

BoardQ = Query(default=None, max_length=64, description="board slug (default: the token's board or 'default')")


class TemplateRun(Body):
    """The placeholders' values of one template run."""

    set: dict[str, str] = Field(default_factory=dict, max_length=100)


@router.get("/templates", response_model=list[TemplateSummary], responses=responses(400, 404))
def list_templates(request: Request, board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    """The task-graph templates the board can use (home's and the board target's)."""
    slug = read_board(request, who, board)
    st = state(request)
    return Json(templates.list_templates(st.settings.home, templates.board_target(st.db, slug)))


@router.get("/templates/{name}", response_model=TemplateDetail, responses=responses(400, 404))
def show_template(request: Request, name: str = PathParam(min_length=1, max_length=64),
                  board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    slug = read_board(request, who, board)
    st = state(request)
    return Json(templates.find(st.settings.home, templates.board_target(st.db, slug), name).as_dict())


@router.post("/templates/{name}/run", response_model=TemplateCreated, status_code=201, responses=responses(400, 403, 404, 409))
def run_template(request: Request, data: TemplateRun | None = None,
                 name: str = PathParam(min_length=1, max_length=64), board: str | None = BoardQ,
                 who: Principal = Depends(current)) -> Response:
    """Create the template's tasks, linked as it says, in one transaction. A blank value counts as
    not given (a form's empty field): the placeholder's default applies, and one without a default
    is refused as the CLI refuses it (400 ``needs a value for …``), with nothing created."""
    slug = write_board(request, who, board)
    st = state(request)
    verify, workspaces = templates.commands(st.db, slug, name, home=st.settings.home)
    host_access.authorize(who.host, verify=verify)
    for ws in workspaces:
        host_access.authorize(who.host, workspace=ws)
    given = {k: v for k, v in (data.set if data else {}).items() if v.strip()}
    out = templates.run(st.db, slug, name, given, home=st.settings.home, actor=actor_of(request, who, slug))
    return Json(out, status_code=201)


# -- schedules ----------------------------------------------------------------------------------


class ScheduleCreate(Body):
    """A recurring task: a cron expression (UTC) and a template (with its values) or a task to clone."""

    cron: str = Field(min_length=1, max_length=200)
    template: str | None = Field(default=None, max_length=64)
    set: dict[str, str] = Field(default_factory=dict, max_length=100)
    clone: str | None = Field(default=None, max_length=64)
    missed: str = Field(default="skip", max_length=8)


@router.get("/schedules", response_model=list[ScheduleRow], responses=responses(400, 404))
def list_schedules(request: Request, board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    slug = read_board(request, who, board)
    return Json(schedules.list_schedules(state(request).db, slug))


@router.post("/schedules", response_model=ScheduleRow, status_code=201, responses=responses(400, 403, 404))
def add_schedule(request: Request, data: ScheduleCreate, board: str | None = BoardQ,
                 who: Principal = Depends(current)) -> Response:
    """Add a schedule; the dispatcher fires it once per occurrence."""
    slug = write_board(request, who, board)
    if who.is_run:
        from ...domain.errors import Forbidden

        raise Forbidden("a worker cannot add schedules; a person decides what recurs")
    st = state(request)
    if data.template:
        verify, workspaces = templates.commands(st.db, slug, data.template, home=st.settings.home)
        host_access.authorize(who.host, verify=verify)
        for ws in workspaces:
            host_access.authorize(who.host, workspace=ws)
    out = schedules.add(st.db, slug, data.cron, template=data.template, values=data.set, clone=data.clone,
                        missed=data.missed, actor=who.name, home=st.settings.home)
    return Json(out, status_code=201)


@router.delete("/schedules/{schedule_id}", response_model=ScheduleRow, responses=responses(400, 404))
def remove_schedule(request: Request, schedule_id: int = PathParam(ge=1, le=2**62), board: str | None = BoardQ,
                    who: Principal = Depends(current)) -> Response:
    slug = write_board(request, who, board)
    return Json(schedules.remove(state(request).db, slug, schedule_id, actor=who.name))


# -- a running worker's inbox ----------------------------------------------------------------------


class InboxBody(Body):
    run_id: int | None = Field(default=None, ge=1, le=2**62, description="the run (default: the task's current run)")


@router.post("/tasks/{task_id}/inbox", response_model=InboxAnswer, responses=responses(400, 404, 409))
def take_inbox(request: Request, data: InboxBody | None = None, task_id: str = TaskId,
               board: str | None = TaskBoardQ, who: Principal = Depends(current)) -> Response:
    """The comments written on a running task since its worker last looked; the worker's cursor
    moves past them (POST: reading them marks them read)."""
    slug = write_board(request, who, board, task_id)
    run_id = who.run_id if who.is_run else (data.run_id if data else None)
    return Json(inbox.take(state(request).db, slug, task_id, run_id=run_id))
