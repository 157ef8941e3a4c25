"""What a worker does through its run token: heartbeat, complete, block, request review, the
reads of its task (the worker context, runs, events) and who the token is.

The worker verbs (``agentboard heartbeat|complete|block|…`` inside a worker) and the MCP tools
call these routes instead of the kernel: a worker never gets the home or the database. Each route
is one call of the kernel function the CLI and the MCP server call. A run token acting on its own
task always acts as its run (the run id comes from the token), so a late call of a closed run is
refused by the token itself; a person may pass ``run_id`` like the CLI does. A run token reports
(complete, heartbeat, request review) only on its own task, an orchestrator's included; an
orchestrator may block another task of its board, as a person would.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import Field
from starlette.responses import Response

from ...dispatch import finish
from ...dispatch.diffs import with_git
from ...domain.errors import Forbidden, InvalidInput
from ...kernel import queries, runs, tasks
from ...kernel.runs.completion import report_refused
from ...protocol.context import build_worker_context
from ..answers import EventRow, Heartbeat, Me, RunRow, TaskContext, TaskRow
from ..auth import Principal, current
from ..models import Body
from .common import Json, actor_of, read_board, responses, state, write_board

router = APIRouter(prefix="/api", tags=["worker"])

TaskId = PathParam(min_length=1, max_length=64, description="task id (t_…)")
TaskBoardQ = Query(default=None, max_length=64,
                   description="optional: the task's board (a task id finds its own board; another board is a 400)")
RunId = Field(default=None, ge=1, le=2**62,
              description="the run reporting (a run token's own run is taken from the token)")
BlockKind = Literal["needs_input", "gave_up", "rejected", "budget", "dependency", "manual"]


class HeartbeatBody(Body):
    note: str | None = Field(default=None, max_length=100_000)
    ttl: int | None = Field(default=None, ge=1, le=10**8, description="extend the claim by this many seconds")
    run_id: int | None = RunId


class CompleteBody(Body):
    summary: str | None = Field(default=None, max_length=1_000_000)
    metadata: dict[str, Any] | None = None
    result: str | None = Field(default=None, max_length=100_000)
    usage: dict[str, Any] | None = None
    run_id: int | None = RunId
    review: bool = Field(default=False, description="when the task lands in review, run the reviewer now")


class BlockBody(Body):
    reason: str = Field(max_length=100_000)
    kind: BlockKind | None = Field(default=None, description="default: needs_input for a run's own task, else manual")
    run_id: int | None = RunId
    on: str | None = Field(default=None, max_length=64,
                           description="kind dependency: the task to wait for (the task waits in todo and resumes by itself)")


class ReviewHandOff(Body):
    summary: str | None = Field(default=None, max_length=1_000_000)
    run_id: int | None = RunId
    review: bool = Field(default=True, description="run the reviewer now")


def _own(who: Principal, task_id: str) -> bool:
    return who.is_run and who.task_id == task_id


def _run_id(who: Principal, task_id: str, given: int | None) -> int | None:
    """The run a call acts as: a run token's own run on its own task, none on another task (an
    orchestrator's block acts as a person's); a person's ``run_id`` as given."""
    if who.is_run:
        return who.run_id if _own(who, task_id) else None
    return given


#: the block kinds a run token may set: the others are the dispatcher's and a person's to say (a
#: budget's block is released by a raised budget, a rejection is a review's verdict)
RUN_BLOCK_KINDS = frozenset({"needs_input", "dependency", "manual"})


@contextmanager
def _refusal_kept(request: Request, who: Principal, slug: str, task_id: str, verb: str) -> Iterator[None]:
    """A run token's own report refused as bad input (a usage out of range, an unknown usage key,
    a summary too long...) is remembered on its run (``report_refused``), so an exit without a
    report says its report was refused and why, not that it never reported; then refused."""
    try:
        yield
    except InvalidInput as exc:
        if _own(who, task_id) and who.run_id is not None:
            try:
                report_refused(state(request).db, slug, task_id, int(who.run_id), verb, exc.message)
            except Exception:  # noqa: BLE001 - the refusal is what the worker must hear
                pass
        raise


def _reviewed(request: Request, slug: str, task_id: str, out: dict[str, Any], wanted: bool) -> dict[str, Any]:
    if wanted and out.get("status") == "review":
        st = state(request)
        out["review"] = finish.review_entered(st.db, st.settings, slug, task_id).get("action")
    return out


@router.get("/me", response_model=Me, responses=responses())
def me(who: Principal = Depends(current)) -> Response:
    """Who the token is: name, role, boards, and for a run token its run, task and whether its
    profile is an orchestrator (what the MCP server offers)."""
    return Json(who.describe())


@router.post("/tasks/{task_id}/heartbeat", response_model=Heartbeat, responses=responses(400, 404, 409))
def heartbeat(request: Request, data: HeartbeatBody, task_id: str = TaskId, board: str | None = TaskBoardQ,
              who: Principal = Depends(current)) -> Response:
    """Record liveness for a running task and extend its claim."""
    slug = write_board(request, who, board, task_id)
    who.check_reporter("heartbeat", task_id)
    return Json(runs.heartbeat(state(request).db, slug, task_id, run_id=_run_id(who, task_id, data.run_id),
                               note=data.note, ttl=data.ttl, actor=actor_of(request, who, slug), messages=True))


@router.post("/tasks/{task_id}/complete", response_model=TaskRow, responses=responses(400, 404, 409))
def complete(request: Request, data: CompleteBody, task_id: str = TaskId, board: str | None = TaskBoardQ,
             who: Principal = Depends(current)) -> Response:
    """Finish a task: running → done (or review); held for verification when it has checks."""
    from ...dispatch import finish

    slug = write_board(request, who, board, task_id)
    who.check_reporter("complete", task_id)
    with _refusal_kept(request, who, slug, task_id, "complete"):
        out = finish.complete(state(request).db, slug, task_id, summary=data.summary, metadata=data.metadata,
                              result=data.result, usage=data.usage, run_id=_run_id(who, task_id, data.run_id),
                              actor=actor_of(request, who, slug), worker=_own(who, task_id))
    return Json(_reviewed(request, slug, task_id, out, data.review))


@router.post("/tasks/{task_id}/block", response_model=TaskRow, responses=responses(400, 404, 409))
def block(request: Request, data: BlockBody, task_id: str = TaskId, board: str | None = TaskBoardQ,
          who: Principal = Depends(current)) -> Response:
    """Block a task with a reason: it waits for a person or another agent."""
    slug = write_board(request, who, board, task_id)
    kind = data.kind or ("dependency" if data.on else "needs_input" if _own(who, task_id) else "manual")
    if who.is_run and kind not in RUN_BLOCK_KINDS:
        raise Forbidden(f"a run token cannot block a task as {kind!r}: use {', '.join(sorted(RUN_BLOCK_KINDS))}")
    with _refusal_kept(request, who, slug, task_id, "block"):
        return Json(tasks.block(state(request).db, slug, task_id, data.reason, kind=kind, on=data.on,
                                run_id=_run_id(who, task_id, data.run_id), actor=actor_of(request, who, slug)))


@router.post("/tasks/{task_id}/request-review", response_model=TaskRow, responses=responses(400, 404, 409))
def request_review(request: Request, data: ReviewHandOff, task_id: str = TaskId,
                   board: str | None = TaskBoardQ, who: Principal = Depends(current)) -> Response:
    """Hand a running task to review, with an optional summary."""
    slug = write_board(request, who, board, task_id)
    who.check_reporter("request review of", task_id)
    with _refusal_kept(request, who, slug, task_id, "request-review"):
        out = runs.request_review(state(request).db, slug, task_id, summary=data.summary,
                                  run_id=_run_id(who, task_id, data.run_id), actor=actor_of(request, who, slug))
    return Json(_reviewed(request, slug, task_id, out, data.review))


@router.get("/tasks/{task_id}/context", response_model=TaskContext, responses=responses(400, 404))
def context(request: Request, task_id: str = TaskId, board: str | None = TaskBoardQ,
            who: Principal = Depends(current)) -> Response:
    """The worker context markdown: ``{"task_id", "board", "markdown"}``."""
    slug = read_board(request, who, board, task_id)
    db = state(request).db
    text = build_worker_context(db, slug, task_id, enrich=lambda d: with_git(d, db)).rstrip("\n")
    return Json({"task_id": task_id, "board": slug, "markdown": text + "\n"})


@router.get("/tasks/{task_id}/runs", response_model=list[RunRow], tags=["runs"], responses=responses(400, 404))
def task_runs(request: Request, task_id: str = TaskId, board: str | None = TaskBoardQ,
              who: Principal = Depends(current)) -> Response:
    """A task's attempts, oldest first."""
    slug = read_board(request, who, board, task_id)
    return Json(queries.runs(state(request).db, slug, task_id))


@router.get("/tasks/{task_id}/events", response_model=list[EventRow], responses=responses(400, 404))
def task_events(request: Request, task_id: str = TaskId, board: str | None = TaskBoardQ,
                since: int = Query(default=0, ge=0, le=2**62, description="events after this id"),
                limit: int = Query(default=500, ge=1, le=5000),
                who: Principal = Depends(current)) -> Response:
    """A task's events after ``since``, oldest first."""
    slug = read_board(request, who, board, task_id)
    return Json(queries.events_after(state(request).db, slug, since, task_id=task_id, limit=limit))


__all__ = ["router"]
