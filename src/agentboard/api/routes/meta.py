"""What the dashboard needs to know about the domain, stated once (``domain.states``): the
statuses in lifecycle order, the moves by hand each status allows and the verb each runs, the
goal statuses and the block kinds."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from starlette.responses import Response

from ...domain import states
from ..answers import MetaView
from ..auth import Principal, current
from .common import Json, responses

router = APIRouter(prefix="/api", tags=["system"])


@router.get("/meta", response_model=MetaView, responses=responses())
def meta(who: Principal = Depends(current)) -> Response:
    """The status lists and the transition table's moves by hand (``{status: {target: verb}}``);
    a task's own ``moves`` (``GET /api/tasks/{id}``) also leave out what it cannot do yet."""
    return Json({
        "statuses": list(states.STATUSES),
        "hand_targets": list(states.HAND_TARGETS),
        "moves": {s: states.hand_moves(s) for s in states.STATUSES},
        # every verb and the statuses it may start from (creation left out)
        "verbs": {v: [s for s in states.STATUSES if s in moves] for v, moves in states.TRANSITIONS.items()},
        "goal_statuses": list(states.GOAL_STATUSES),
        "hand_create_statuses": list(states.HAND_CREATE_STATUSES),
        "wake_statuses": list(states.WAKE_STATUSES),
        "verdicts": list(states.VERDICTS),
        "block_kinds": list(states.BLOCK_KINDS),
        "person_block_kinds": sorted(states.PERSON_KINDS),
    })


__all__ = ["router"]
