"""Goals: named outcomes grouping tasks, with progress, blocked tasks and cost so far."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from starlette.responses import Response

from ...domain import states
from ...domain.errors import InvalidInput
from ...kernel import compound, goals, host_access
from ..answers import GoalDetail, GoalRow
from ..auth import Principal, current
from ..models import GoalCreate, GoalPatch
from .common import Json, goal_slug, read_board, responses, state, write_board

router = APIRouter(prefix="/api", tags=["goals"])
BoardQ = Query(default=None, max_length=64, description="board slug")
#: the goal statuses are the domain's (``states.GOAL_STATUSES``); another value is a 422
GoalStatusQ = Query(default=None, pattern=f"^({'|'.join(states.GOAL_STATUSES)})$",
                    description=f"one of: {', '.join(states.GOAL_STATUSES)}",
                    json_schema_extra={"enum": list(states.GOAL_STATUSES)})
GoalId = PathParam(min_length=1, max_length=64, description="goal id (g_…); it finds its own board")


@router.get("/goals", response_model=list[GoalRow], responses=responses(400, 404))
def list_goals(request: Request, board: str | None = BoardQ,
               status: str | None = GoalStatusQ, who: Principal = Depends(current)) -> Response:
    slug = read_board(request, who, board)
    return Json(goals.list_goals(state(request).db, slug, status=status))


@router.post("/goals", response_model=GoalRow, status_code=201, responses=responses(400, 404))
def create_goal(request: Request, data: GoalCreate, board: str | None = BoardQ,
                who: Principal = Depends(current)) -> Response:
    slug = write_board(request, who, board)
    host_access.authorize(who.host, verify=data.verify)
    out = goals.create(state(request).db, slug, data.title, body=data.body, acceptance=data.acceptance,
                       priority=data.priority, verify=data.verify, actor=who.name)
    return Json(out, status_code=201)


@router.get("/goals/{goal_id}", response_model=GoalDetail, responses=responses(400, 404))
def show_goal(request: Request, goal_id: str = GoalId, board: str | None = BoardQ,
              who: Principal = Depends(current)) -> Response:
    slug = goal_slug(request, who, board, goal_id)
    return Json(goals.show(state(request).db, slug, goal_id))


@router.patch("/goals/{goal_id}", response_model=GoalRow, responses=responses(400, 404, 409))
def patch_goal(request: Request, data: GoalPatch, goal_id: str = GoalId, board: str | None = BoardQ,
               who: Principal = Depends(current)) -> Response:
    """Edit a goal; ``status: "cancelled"`` cancels it (all in one transaction)."""
    slug = goal_slug(request, who, board, goal_id, write=True)
    if data.verify:
        host_access.authorize(who.host, verify=data.verify)  # raw commands: an admin's, as on create
    fields = data.model_dump(exclude_none=True, exclude={"status"})
    if not fields and data.status is None:
        raise InvalidInput("nothing to change: send title, body, acceptance, priority, verify or status "
                           "(a goal's limits: PUT /api/budgets/goal/{id})")
    return Json(compound.patch_goal(state(request).db, slug, goal_id, cancel=data.status == "cancelled",
                                    actor=who.name, **fields))
