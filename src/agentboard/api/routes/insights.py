"""Insights: per profile, per model or per board day, read from the rollups (``docs/insights.md``)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from ...kernel import insights
from ..auth import Principal, current
from .common import read_board, responses, state

router = APIRouter(prefix="/api", tags=["insights"])


#: how the empty key reads: per profile, nobody's (tasks a person closed without a run); per
#: model, no model (the runs of profiles that name none, and those tasks); ``stats --by`` and the
#: dashboard show the same words
EMPTY_KEY = {"profile": "(by hand)", "model": "(no model)"}


class GroupInsight(BaseModel):
    """One profile's or model's numbers. ``key`` is empty for nobody (per profile: tasks a
    person closed without a run) or no model (per model); ``label`` is how it reads."""

    key: str
    label: str
    runs: int
    tasks_done: int
    first_attempts: int
    first_attempt_success_rate: float | None
    verifications: int
    verification_pass_rate: float | None
    reviews: int
    review_approval_rate: float | None
    races_entered: int
    races_won: int
    duration_p50_s: float | None
    duration_p90_s: float | None
    input_tokens: int
    output_tokens: int
    cost_usd: float
    tokens_per_done_task: float | None
    cost_per_done_task: float | None
    failures: dict[str, int]


class DayInsight(BaseModel):
    day: str
    tasks_done: int
    started: int
    work_in_progress: int
    runs: int
    cost_usd: float


class CycleBucket(BaseModel):
    lo_s: float
    hi_s: float | None
    tasks: int


class BoardTimeline(BaseModel):
    tasks_done: int
    runs: int
    cost_usd: float
    cycle_time_p50_s: float | None
    cycle_time_p90_s: float | None
    cycle_time_histogram: list[CycleBucket]
    days: list[DayInsight]


class InsightsOut(BaseModel):
    """``groups`` for ``by=profile`` and ``by=model``; ``timeline`` for ``by=board``."""

    board: str
    by: Literal["profile", "model", "board"]
    since_days: int | None
    first_day: str | None
    last_day: str
    groups: list[GroupInsight]
    timeline: BoardTimeline | None


@router.get("/insights", response_model=InsightsOut, responses=responses(400, 404))
def read_insights(
    request: Request,
    board: str | None = Query(default=None, max_length=64, description="board slug"),
    by: Literal["profile", "model", "board"] = "profile",
    since: str | None = Query(default=None, max_length=16,
                              description="the last days only: 7d, 2w, 30d (whole UTC days); default all time"),
    who: Principal = Depends(current),
) -> InsightsOut:
    """Which profiles and models get tasks done and at what cost (``by=profile|model``), or how
    the board flows day by day (``by=board``), computed from the runs recorded."""
    slug = read_board(request, who, board)
    data = insights.read(state(request).db, slug, insights.Query.build(by, since))
    for group in data["groups"]:
        group["label"] = group["key"] or EMPTY_KEY[by]
    return InsightsOut.model_validate(data)
