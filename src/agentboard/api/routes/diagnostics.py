"""Diagnostics (what is wrong and the fix), and the overrides they suggest: promote, unguard."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict
from starlette.responses import Response

from ...kernel import diagnostics, lookups, overrides
from ..answers import Finding, TaskRow
from ..auth import Principal, current
from .common import Json, actor_of, read_board, responses, state, write_board

router = APIRouter(prefix="/api", tags=["diagnostics"])


@router.get("/diagnostics", response_model=list[Finding], responses=responses(400, 404))
def get_diagnostics(request: Request, board: str | None = Query(default=None, max_length=64),
                    task: str | None = Query(default=None, max_length=64),
                    tasks_only: bool = Query(default=False, description="only findings about a task (the cards' badges)"),
                    who: Principal = Depends(current)) -> Response:
    """Findings on a board (or about one task), worst first, each with its fix command and, when
    the fix has a route, the ``action`` (method, path, body) that applies it."""
    st = state(request)
    if task:
        slugs = [read_board(request, who, board, task)]
    elif board:
        slugs = [read_board(request, who, board)]
    else:
        slugs = [s for s in lookups.board_slugs(st.db) if who.sees(s)]
    return Json(diagnostics.diagnose(st.db, slugs, task_id=task, host=st.settings.host_id, tasks_only=tasks_only))


class PromoteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    force: bool = False


@router.post("/tasks/{task_id}/promote", response_model=TaskRow, responses=responses(400, 404, 409))
def promote(request: Request, task_id: str, data: PromoteBody | None = None, board: str | None = None,
            who: Principal = Depends(current)) -> Response:
    """todo → ready; ``force`` also over unfinished parents (recorded as an override)."""
    slug = write_board(request, who, board, task_id)
    who.check_person("promote", task_id)
    return Json(overrides.promote(state(request).db, slug, task_id, force=bool(data and data.force),
                                  actor=actor_of(request, who, slug)))


@router.post("/tasks/{task_id}/unguard", response_model=TaskRow, responses=responses(400, 404, 409))
def unguard(request: Request, task_id: str, board: str | None = None, who: Principal = Depends(current)) -> Response:
    """Lift the respawn guard holding the task back."""
    slug = write_board(request, who, board, task_id)
    who.check_person("unguard", task_id)
    return Json(overrides.unguard(state(request).db, slug, task_id, actor=actor_of(request, who, slug)))
