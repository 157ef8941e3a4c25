"""Races (docs/races.md): a race's attempts side by side, and picking its winner.

``POST /api/tasks`` with ``race`` creates one (``routes/tasks.py``); the pick goes through
``dispatch.finish.pick``, the one function every surface calls.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field

from ...domain.errors import Forbidden
from ..auth import Principal, current
from ..models import Body
from .common import read_board, responses, state, write_board

router = APIRouter(prefix="/api", tags=["races"])

TaskId = PathParam(min_length=1, max_length=64, description="the race's task id (t_…)")
TaskBoardQ = Query(default=None, max_length=64,
                   description="optional: the task's board (a task id finds its own board; another board is a 400)")


class GitStat(BaseModel):
    """An attempt's branch against its base."""

    model_config = ConfigDict(extra="allow")
    branch: str | None = None
    base: str | None = None
    ahead: int | None = None
    behind: int | None = None
    files: int = 0
    insertions: int = 0
    deletions: int = 0
    exists: bool = False
    uncommitted: int = 0
    note: str | None = None


class AttemptOut(BaseModel):
    """One attempt of a race."""

    model_config = ConfigDict(extra="allow")
    n: int
    profile: str
    model: str | None = None
    branch: str | None = None
    state: str
    outcome: str | None = None
    verification: str | None = None
    picked: bool = False
    started_at: float | None = None
    finished_at: float | None = None
    duration: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    summary: str | None = None
    error: str | None = None
    runs: int = 0
    run_id: int | None = None
    attempt_task_id: str | None = None
    task_status: str | None = None
    git: GitStat | None = None
    can_pick: bool = False


class RaceOut(BaseModel):
    """A race: its task's fields, its attempts and what may be picked now."""

    model_config = ConfigDict(extra="allow")
    id: str
    board: str
    title: str
    status: str
    #: None: the task is no race (it has no attempts)
    race_until: str | None
    badge: str
    can_pick: list[int]
    attempts: list[AttemptOut]


class PickRequest(Body):
    # strict: a boolean (or a string) is no attempt number, never read as 1
    n: int = Field(ge=1, le=1000, strict=True, description="the attempt that wins")


class PickOut(BaseModel):
    """The race after the pick."""

    model_config = ConfigDict(extra="allow")
    id: str
    status: str
    picked: int
    branch_name: str | None = None
    integration: str | None = None
    #: when the race became done (None while it waits in review with its pick)
    completed_at: float | None = None


@router.get("/tasks/{task_id}/attempts", response_model=RaceOut, responses=responses(400, 404))
def attempts(request: Request, task_id: str = TaskId, board: str | None = TaskBoardQ,
                   who: Principal = Depends(current)) -> Any:
    """A race's attempts side by side: outcome, verification, diff stat, duration, tokens, cost."""
    from ...dispatch import races

    slug = read_board(request, who, board, task_id)
    return races.view(state(request).db, slug, task_id)


@router.post("/tasks/{task_id}/pick", response_model=PickOut, responses=responses(400, 403, 404, 409))
def pick(request: Request, data: PickRequest, task_id: str = TaskId, board: str | None = TaskBoardQ,
               who: Principal = Depends(current)) -> Any:
    """Pick attempt ``n`` as the race's winner: its branch becomes the task's and is integrated."""
    from ...dispatch import finish

    slug = write_board(request, who, board, task_id)
    if who.is_run and not who.orchestrator:
        raise Forbidden("a worker cannot pick the winner of a race")
    return finish.pick(state(request).db, slug, task_id, data.n, actor=who.name)
