"""Notification subscriptions: what follows a task, goal, board or profile, and where it goes.

Targets are Apprise URLs; every answer shows them masked (``target``), never in full. Run tokens
may not subscribe (a worker's messages go through its task's events). A target named by anyone
but an unscoped administrator reaches public addresses only (and the hosts of the
``notify_allow_hosts`` setting), uses no plugin that reads local files, and its failures are
told in generic words (``notify.outbound``).
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import Field
from starlette.responses import Response

from ...domain.errors import Forbidden, NotFound
from ...kernel import notifications as kn
from ...kernel.host_access import Access
from ...notify import subscriptions
from ..answers import NotifyTest, SubscriptionRow
from ..auth import Principal, current
from ..models import Body
from .common import Json, read_board, responses, state, write_board

router = APIRouter(prefix="/api/notify", tags=["notifications"])
BoardQ = Query(default=None, max_length=64, description="board slug")
SubId = PathParam(ge=1, description="subscription id")


class SubscriptionCreate(Body):
    target: str = Field(min_length=1, max_length=4000, description="an Apprise URL (json://, slack://, ...)")
    scope: Literal["task", "goal", "board", "profile"] = "board"
    subject: str = Field(default="", max_length=64,
                         description="the task id, goal id or profile name (empty for the board)")
    kinds: list[str] = Field(default_factory=list, max_length=100,
                             description="event kinds to deliver (empty: the defaults)")


class TargetTest(Body):
    target: str = Field(min_length=1, max_length=4000, description="an Apprise URL")


def _person(who: Principal) -> None:
    if who.is_run:
        raise Forbidden("a run token may not manage notifications")


def _trusted(who: Principal) -> bool:
    """Whether the caller may aim the server at any address (an unscoped administrator)."""
    return who.host == Access.ADMIN


def _own_board(request: Request, who: Principal, sub_id: int, board: str | None) -> str:
    """The board of subscription ``sub_id`` once the caller may change it (an id on a board the
    caller may not see is answered like an unknown id)."""
    _person(who)
    who.check_writer()
    row = kn.get(state(request).db, None, sub_id)
    if not who.sees(row["board"]) or (board and board != row["board"]):
        raise NotFound(f"no subscription {sub_id}")
    return write_board(request, who, row["board"])


@router.get("/subscriptions", response_model=list[SubscriptionRow], responses=responses(400, 403, 404))
def list_subscriptions(request: Request, board: str | None = BoardQ,
                       task: str | None = Query(default=None, max_length=64,
                                                description="only those that follow this task"),
                       who: Principal = Depends(current)) -> Response:
    """A board's subscriptions (or those following ``task``): targets masked, delivered count,
    parked state and last error."""
    slug = read_board(request, who, board, task)
    return Json(kn.list_subscriptions(state(request).db, slug, task_id=task))


@router.post("/subscriptions", response_model=SubscriptionRow, status_code=201, responses=responses(400, 403, 404))
def add_subscription(request: Request, data: SubscriptionCreate, board: str | None = BoardQ,
                     who: Principal = Depends(current)) -> Response:
    """Subscribe an Apprise URL to a task (and the tasks below it), a goal, a profile's tasks or
    the board; it receives events from now on."""
    _person(who)
    task_id = data.subject if data.scope == "task" else None
    slug = write_board(request, who, board, task_id)
    out = subscriptions.add(state(request).db, slug, data.scope, data.subject or slug, data.target,
                            kinds=data.kinds, actor=who.name, trusted=_trusted(who))
    return Json(out, status_code=201)


@router.delete("/subscriptions/{sub_id}", response_model=SubscriptionRow, responses=responses(403, 404))
def remove_subscription(request: Request, sub_id: int = SubId, board: str | None = BoardQ,
                        who: Principal = Depends(current)) -> Response:
    slug = _own_board(request, who, sub_id, board)
    return Json(kn.remove(state(request).db, slug, sub_id, actor=who.name))


@router.post("/subscriptions/{sub_id}/resume", response_model=SubscriptionRow, responses=responses(403, 404))
def resume_subscription(request: Request, sub_id: int = SubId, board: str | None = BoardQ,
                        who: Principal = Depends(current)) -> Response:
    """Deliver again to a parked target, from where it stopped."""
    slug = _own_board(request, who, sub_id, board)
    return Json(kn.resume(state(request).db, slug, sub_id, actor=who.name))


@router.post("/subscriptions/{sub_id}/test", response_model=NotifyTest, responses=responses(403, 404))
def test_subscription(request: Request, sub_id: int = SubId, board: str | None = BoardQ,
                      who: Principal = Depends(current)) -> Response:
    """Send a test message to the subscription's target: ``{"ok", "target", "error"}``; a parked
    subscription that receives it is resumed."""
    slug = _own_board(request, who, sub_id, board)
    return Json(subscriptions.test(state(request).db, slug, sub_id=sub_id, trusted=_trusted(who)))


@router.post("/test", response_model=NotifyTest, responses=responses(400, 403))
def test_target(request: Request, data: TargetTest, board: str | None = BoardQ,
                who: Principal = Depends(current)) -> Response:
    """Send a test message to an Apprise URL before subscribing it."""
    _person(who)
    write_board(request, who, board)
    return Json(subscriptions.test(state(request).db, None, target=data.target, trusted=_trusted(who)))
