"""The supervisor: its status, wakes, log and panel, and the tools it acts with.

The tools (``/api/supervisor/...`` writes) take the run token of the board's supervision task —
a board-wide scope limited to exactly these routes — or a person's member/admin token (the
dashboard's one-click release/discard). Each route is one call of the kernel function the CLI
verb and the MCP tool call. What the supervisor does is recorded with actor
``supervisor:<profile>``, so its own actions never wake it again.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import Field
from starlette.responses import Response

from ...domain import states
from ...domain.errors import InvalidInput
from ...kernel import comments, goals, queries, runs, supervision, tasks
from ..answers import (
    CommentRow,
    CreatedTask,
    GoalDetail,
    GoalVerdict,
    RunRow,
    SupervisorLogEntry,
    SupervisorOverview,
    SupervisorPanel,
    SupervisorSet,
    SupervisorStatus,
    TaskDetail,
    TaskRow,
    WakeRow,
)
from ..auth import Principal, current
from ..models import Body
from .common import Json, actor_of, read_board, responses, state

router = APIRouter(prefix="/api/supervisor", tags=["supervisor"])
BoardQ = Query(default=None, max_length=64, description="board slug (a supervisor's token: its own board)")
TaskId = PathParam(min_length=1, max_length=64, description="task id (t_…)")
GoalId = PathParam(min_length=1, max_length=64, description="goal id (g_…)")
#: the wake statuses are the domain's (``states.WAKE_STATUSES``); another value is a 422
WakeStatusQ = Query(default=None, pattern=f"^({'|'.join(states.WAKE_STATUSES)})$",
                    description="one of " + ", ".join(states.WAKE_STATUSES))


class EnableBody(Body):
    profile: str = Field(min_length=1, max_length=64, description="the profile that supervises the board")


class TextBody(Body):
    body: str = Field(min_length=1, max_length=64 * 1024)


class PriorityBody(Body):
    priority: int = Field(ge=-1000, le=1000)


class ProposeBody(Body):
    title: str = Field(min_length=1, max_length=500)
    body: str | None = Field(default=None, max_length=256 * 1024)
    goal: str | None = Field(default=None, max_length=64)
    assignee: str | None = Field(default=None, max_length=64)
    priority: int = Field(default=0, ge=-1000, le=1000)


class AssignBody(Body):
    assignee: str | None = Field(default=None, max_length=64, description="a profile; null unassigns")


class ReasonBody(Body):
    reason: str | None = Field(default=None, max_length=64 * 1024)


class EscalateBody(Body):
    reason: str = Field(min_length=1, max_length=64 * 1024)
    to: str | None = Field(default=None, max_length=64, description="the person (default: the board's escalate_to)")


class HandledBody(Body):
    wakes: list[int] = Field(min_length=1, max_length=1000)
    note: str | None = Field(default=None, max_length=64 * 1024, description="what was done and why")


class VerdictBody(Body):
    passed: bool
    evidence: str = Field(min_length=1, max_length=64 * 1024)
    propose: bool = Field(default=True, description="on a failed check, propose the missing work in triage")


def _board(request: Request, who: Principal, board: str | None) -> str:
    slug = read_board(request, who, board)
    who.check_supervisor_tool(slug)
    return slug


def _task(request: Request, who: Principal, task_id: str) -> str:
    slug = read_board(request, who, None, task_id)
    who.check_supervisor_tool(slug)
    return slug


def _person_writer(request: Request, who: Principal, board: str | None) -> str:
    slug = read_board(request, who, board)
    who.check_write(slug)
    return slug


# -- status, wakes, log, panel (reads) -------------------------------------------------------------


@router.get("", response_model=SupervisorStatus, responses=responses(400, 404))
def status(request: Request, board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    """The board's supervisor: profile, wake counts by status, open supervision tasks."""
    return Json(supervision.status(state(request).db, read_board(request, who, board)))


@router.post("/enable", response_model=SupervisorSet, responses=responses(400, 403, 404))
def enable(request: Request, data: EnableBody, board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    """Name the board's supervisor profile (``supervisor = NAME`` in the board's settings): an
    admin's call, as any change of the board's settings is (``PATCH /api/boards/{slug}``)."""
    slug = read_board(request, who, board)
    who.check_admin(slug)
    return Json(supervision.set_supervisor(state(request).db, slug, data.profile, actor=actor_of(request, who, slug)))


@router.post("/disable", response_model=SupervisorSet, responses=responses(400, 403, 404))
def disable(request: Request, board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    """Stop supervising the board; its pending wakes close as moot (an admin's call)."""
    slug = read_board(request, who, board)
    who.check_admin(slug)
    return Json(supervision.set_supervisor(state(request).db, slug, None, actor=actor_of(request, who, slug)))


@router.get("/wakes", response_model=list[WakeRow], responses=responses(400, 404))
def wakes(request: Request, board: str | None = BoardQ, status: str | None = WakeStatusQ,
          limit: int = Query(default=200, ge=1, le=5000), who: Principal = Depends(current)) -> Response:
    """The board's wakes, newest first."""
    return Json(supervision.wakes(state(request).db, read_board(request, who, board), status=status, limit=limit))


@router.get("/log", response_model=list[SupervisorLogEntry], responses=responses(400, 404))
def log(request: Request, board: str | None = BoardQ, limit: int = Query(default=200, ge=1, le=5000),
        who: Principal = Depends(current)) -> Response:
    """What the supervisor did and why (its actions and the wakes' lifecycle), newest first."""
    return Json(supervision.log(state(request).db, read_board(request, who, board), limit=limit))


@router.get("/panel", response_model=SupervisorPanel, responses=responses(400, 404))
def panel(request: Request, board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    """The dashboard panel: status, wakes, proposals awaiting release, escalations."""
    return Json(supervision.panel(state(request).db, read_board(request, who, board)))


@router.get("/board", response_model=SupervisorOverview, responses=responses(400, 403, 404))
def overview(request: Request, board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    """Tool: the board's open work that needs judgement (blocked, triage, active goals)."""
    return Json(supervision.overview(state(request).db, _board(request, who, board)))


@router.get("/tasks/{task_id}", response_model=TaskDetail, responses=responses(400, 403, 404))
def task(request: Request, task_id: str = TaskId, who: Principal = Depends(current)) -> Response:
    """Tool: a task with its surroundings (parents, comments, runs, reviews, events)."""
    slug = _task(request, who, task_id)
    return Json(queries.task_detail(state(request).db, slug, task_id))


@router.get("/tasks/{task_id}/runs", response_model=list[RunRow], responses=responses(400, 403, 404))
def task_runs(request: Request, task_id: str = TaskId, who: Principal = Depends(current)) -> Response:
    """Tool: a task's attempts, oldest first."""
    slug = _task(request, who, task_id)
    return Json(queries.runs(state(request).db, slug, task_id))


@router.get("/goals/{goal_id}", response_model=GoalDetail, responses=responses(400, 403, 404))
def goal(request: Request, goal_id: str = GoalId, board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    """Tool: a goal with its acceptance criteria and tasks."""
    slug = _board(request, who, board)
    return Json(goals.show(state(request).db, slug, goal_id))


# -- the tools (writes) ------------------------------------------------------------------------------


def _actor(request: Request, who: Principal, slug: str) -> str:
    return actor_of(request, who, slug)


@router.post("/tasks/{task_id}/comment", response_model=CommentRow, status_code=201, responses=responses(400, 403, 404))
def comment(request: Request, data: TextBody, task_id: str = TaskId, who: Principal = Depends(current)) -> Response:
    """Tool: comment on a task (the supervisor's reasoning summary goes here)."""
    slug = _task(request, who, task_id)
    return Json(comments.comment(state(request).db, slug, task_id, data.body, author=_actor(request, who, slug),
                                 mentions=False), status_code=201)


@router.post("/tasks/{task_id}/priority", response_model=TaskRow, responses=responses(400, 403, 404, 409))
def reprioritize(request: Request, data: PriorityBody, task_id: str = TaskId, who: Principal = Depends(current)) -> Response:
    """Tool: change a task's priority."""
    slug = _task(request, who, task_id)
    return Json(tasks.edit(state(request).db, slug, task_id, priority=data.priority, actor=_actor(request, who, slug)))


@router.post("/proposals", response_model=CreatedTask, status_code=201, responses=responses(400, 403, 404))
def propose(request: Request, data: ProposeBody, board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    """Tool: propose a task (it lands in triage; the supervisor may release its own)."""
    slug = _board(request, who, board)
    out = tasks.create(state(request).db, slug, data.title, body=data.body, goal=data.goal, assignee=data.assignee,
                       priority=data.priority, triage=True, actor=_actor(request, who, slug))
    return Json(out, status_code=201)


@router.post("/tasks/{task_id}/release", response_model=TaskRow, responses=responses(400, 403, 404, 409))
def release(request: Request, task_id: str = TaskId, who: Principal = Depends(current)) -> Response:
    """Tool: release a proposal from triage (the supervisor: its own and the replan proposals)."""
    slug = _task(request, who, task_id)
    return Json(supervision.release_proposal(state(request).db, slug, task_id, actor=_actor(request, who, slug)))


@router.post("/tasks/{task_id}/discard", response_model=TaskRow, responses=responses(400, 403, 404, 409))
def discard(request: Request, task_id: str = TaskId, who: Principal = Depends(current)) -> Response:
    """Tool: archive a proposal (the supervisor: its own and the replan proposals)."""
    slug = _task(request, who, task_id)
    return Json(supervision.discard_proposal(state(request).db, slug, task_id, actor=_actor(request, who, slug)))


@router.post("/tasks/{task_id}/unblock", response_model=TaskRow, responses=responses(400, 403, 404, 409))
def unblock(request: Request, task_id: str = TaskId, who: Principal = Depends(current)) -> Response:
    """Tool: unblock a task (it returns to ready or todo)."""
    slug = _task(request, who, task_id)
    return Json(tasks.unblock(state(request).db, slug, task_id, actor=_actor(request, who, slug)))


@router.post("/tasks/{task_id}/assign", response_model=TaskRow, responses=responses(400, 403, 404, 409))
def reassign(request: Request, data: AssignBody, task_id: str = TaskId, who: Principal = Depends(current)) -> Response:
    """Tool: give a task to another profile (a running task: reclaim it first)."""
    slug = _task(request, who, task_id)
    return Json(tasks.assign(state(request).db, slug, task_id, data.assignee, actor=_actor(request, who, slug)))


@router.post("/tasks/{task_id}/reclaim", response_model=TaskRow, responses=responses(400, 403, 404, 409))
def reclaim(request: Request, data: ReasonBody, task_id: str = TaskId, who: Principal = Depends(current)) -> Response:
    """Tool: reclaim a stuck run (the task returns to the queue)."""
    slug = _task(request, who, task_id)
    if task_id == who.task_id:
        raise InvalidInput("the supervisor cannot reclaim its own task; complete it instead")
    return Json(runs.reclaim(state(request).db, slug, task_id, reason=data.reason, actor=_actor(request, who, slug)))


@router.post("/tasks/{task_id}/escalate", response_model=TaskRow, responses=responses(400, 403, 404, 409))
def escalate(request: Request, data: EscalateBody, task_id: str = TaskId, who: Principal = Depends(current)) -> Response:
    """Tool: hand a task to a person (blocked, kind ``needs_input``, addressed to ``to``)."""
    slug = _task(request, who, task_id)
    return Json(supervision.escalate(state(request).db, slug, task_id, data.reason, to=data.to,
                                     actor=_actor(request, who, slug)))


@router.post("/wakes/handled", response_model=list[WakeRow], responses=responses(400, 403, 404, 409))
def handled(request: Request, data: HandledBody, board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    """Tool: mark wakes handled, with the reasoning summary."""
    slug = _board(request, who, board)
    return Json(supervision.handle(state(request).db, slug, data.wakes, note=data.note, actor=_actor(request, who, slug)))


@router.post("/goals/{goal_id}/verdict", response_model=GoalVerdict, responses=responses(400, 403, 404, 409))
def verdict(request: Request, data: VerdictBody, goal_id: str = GoalId, board: str | None = BoardQ,
            who: Principal = Depends(current)) -> Response:
    """Tool: a verifying goal's verdict — done with its evidence, or open again with a proposal."""
    slug = _board(request, who, board)
    out: dict[str, Any] = supervision.goal_verdict(state(request).db, slug, goal_id, passed=data.passed,
                                                   evidence=data.evidence, propose=data.propose,
                                                   actor=_actor(request, who, slug))
    return Json(out)


__all__ = ["router"]
