"""Dependencies between tasks, and runs (attempts)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from starlette.responses import Response

from ...kernel import links, queries
from ..answers import LinkRow, RunRow
from ..auth import Principal, current
from ..models import LinkCreate
from .common import Json, read_board, responses, state, task_boards

router = APIRouter(prefix="/api", tags=["links"])
BoardQ = Query(default=None, max_length=64, description="board slug")
TaskBoardQ = Query(default=None, max_length=64,
                   description="optional: the tasks' board (task ids find their own board; another board is a 400)")


@router.post("/links", response_model=LinkRow, status_code=201, responses=responses(400, 404, 409))
def add_link(request: Request, data: LinkCreate, board: str | None = TaskBoardQ,
             who: Principal = Depends(current)) -> Response:
    """Make ``parent_id`` a dependency of ``child_id`` (cycles and links across boards are
    refused). Both tasks are found on their own boards; ``?board=`` must name theirs if given."""
    _, slug = task_boards(request, who, board, data.parent_id, data.child_id)
    return Json(links.link(state(request).db, slug, data.parent_id, data.child_id, actor=who.name),
                status_code=201)


@router.delete("/links", response_model=LinkRow, responses=responses(400, 404))
def remove_link(request: Request, parent_id: str = Query(min_length=1, max_length=64),
                child_id: str = Query(min_length=1, max_length=64), board: str | None = TaskBoardQ,
                who: Principal = Depends(current)) -> Response:
    _, slug = task_boards(request, who, board, parent_id, child_id)
    return Json(links.unlink(state(request).db, slug, parent_id, child_id, actor=who.name))


@router.get("/runs/{run_id}", response_model=RunRow, tags=["runs"], responses=responses(400, 404))
def get_run(request: Request, run_id: int = PathParam(ge=1, le=2**62), board: str | None = BoardQ,
            who: Principal = Depends(current)) -> Response:
    slug = read_board(request, who, board)
    return Json(queries.get_run(state(request).db, slug, run_id))
