"""Budgets: read them with their spend, set and clear them (an administrator of the board)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from ...domain.errors import InvalidInput
from ...kernel import budgets, lookups
from ..answers import BudgetCleared, BudgetRow
from ..auth import Principal, current
from .common import Json, read_board, responses, state

router = APIRouter(prefix="/api", tags=["budgets"])
Scope = Literal["task", "goal", "board", "profile", "supervision"]
Ref = PathParam(min_length=1, max_length=64,
                description="the task id, goal id, board slug (board, supervision) or profile name")


class BudgetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_runs: int | None = Field(default=None, ge=0)
    #: seconds, or a duration such as ``2h``
    max_runtime: int | str | None = None
    max_tokens: int | None = Field(default=None, ge=0)
    max_cost: float | None = Field(default=None, ge=0)
    per: Literal["day", "month", "none"] | None = None
    expected_cost: float | None = Field(default=None, ge=0)


def _scope_board(request: Request, who: Principal, scope: str, ref: str) -> str | None:
    """The board a scope belongs to (None: a profile), checked to be visible to the caller."""
    db = state(request).db
    if scope == "task":
        return read_board(request, who, None, ref)
    if scope == "goal":
        slug = lookups.goal_board(db, ref)
        who.check_read(slug)
        return slug
    if scope in ("board", "supervision"):
        return read_board(request, who, ref)
    return None


@router.get("/budgets", response_model=list[BudgetRow], responses=responses(400, 404))
def list_budgets(request: Request, board: str | None = Query(default=None, max_length=64),
                 scope: Scope | None = None, ref: str | None = Query(default=None, max_length=64),
                 who: Principal = Depends(current)) -> Response:
    """A board's budgets (its own, its goals' and tasks', every profile's) with their spend; or,
    with ``scope`` and ``ref``, the budgets that scope counts against (a task: its own, its goal's,
    its board's and its profile's)."""
    db = state(request).db
    if scope is not None:
        if not ref:
            raise InvalidInput("give ref= with scope= (a task id, goal id, board slug or profile name)")
        _scope_board(request, who, scope, ref)
        if scope == "task":
            return Json(budgets.for_task(db, ref))
        return Json(budgets.show(db, scope=scope, ref=ref))
    slug = read_board(request, who, board)
    return Json(budgets.show(db, board=slug))


@router.put("/budgets/{scope}/{ref}", response_model=BudgetRow, responses=responses(400, 403, 404))
def set_budget(request: Request, data: BudgetBody, scope: Scope, ref: str = Ref,
               who: Principal = Depends(current)) -> Response:
    """Set or change a budget (limits left out keep their value); tasks it now lets through are released."""
    who.check_admin(_scope_board(request, who, scope, ref))
    limits = budgets.Limits.build(**data.model_dump())
    return Json(budgets.set_budget(state(request).db, scope, ref, limits, actor=who.name))


@router.delete("/budgets/{scope}/{ref}", response_model=BudgetCleared, responses=responses(400, 403, 404))
def clear_budget(request: Request, scope: Scope, ref: str = Ref, who: Principal = Depends(current)) -> Response:
    """Remove a budget; the tasks it blocked are released."""
    who.check_admin(_scope_board(request, who, scope, ref))
    return Json(budgets.clear_budget(state(request).db, scope, ref, actor=who.name))
