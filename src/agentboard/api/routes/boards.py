"""Boards: list (the caller's), create, edit/archive/restore, remove."""

from __future__ import annotations

import threading
from pathlib import Path

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from starlette.responses import Response

from ...dispatch.targets import validate_target
from ...domain import model, settings_schema
from ...kernel import boards, compound, fanout, host_access, queries
from ..answers import BoardRow, BoardView, DeletedBoard
from ..auth import Principal, current
from ..errors import dumps
from ..models import BoardCreate, BoardPatch
from .common import Json, read_board, responses, state

router = APIRouter(prefix="/api", tags=["boards"])

Slug = PathParam(min_length=1, max_length=64, description="board slug")
BoardQ = Query(default=None, max_length=64, description="board slug")


@router.get("/boards", response_model=list[BoardRow], responses=responses())
def list_boards(request: Request, include_archived: bool = False,
                who: Principal = Depends(current)) -> Response:
    db = state(request).db
    rows = boards.list_boards(db, include_archived=include_archived)
    # the board `agentboard boards switch` made current: the dashboard opens on it
    try:
        cli_current = (db.settings.home / "current_board").read_text().strip()
    except (OSError, TypeError):
        cli_current = ""
    return Json([{**b, "current": b["slug"] == (cli_current or "default")} for b in rows if who.sees(b["slug"])])


@router.post("/boards", response_model=BoardRow, status_code=201, responses=responses(400, 409))
def create_board(request: Request, data: BoardCreate, who: Principal = Depends(current)) -> Response:
    who.check_admin()
    st = state(request)
    slug = model.board_slug(data.slug)
    settings = settings_schema.board_settings(data.settings or {})
    workdir, mode = None, None
    if data.workdir is not None and data.workdir.strip():
        # the same target-directory check as `agentboard boards create --workdir`
        mode = "linked-existing" if Path(data.workdir.strip()).expanduser().exists() else "linked-new"
        workdir = validate_target(st.db, data.workdir, mode, slug, home=st.settings.home, create=data.create)
    out = boards.create(st.db, slug, name=data.name, description=data.description, icon=data.icon,
                        color=data.color, workdir=workdir, workdir_mode=mode, settings=settings,
                        actor=who.name, create_dir=data.create)
    return Json(out, status_code=201)


@router.get("/boards/{slug}", response_model=BoardRow, responses=responses(400, 404))
def get_board(request: Request, slug: str = Slug, who: Principal = Depends(current)) -> Response:
    slug = model.board_slug(slug)
    who.check_read(slug)
    return Json(boards.get(state(request).db, slug))


@router.patch("/boards/{slug}", response_model=BoardRow, responses=responses(400, 404, 409))
def patch_board(request: Request, data: BoardPatch, slug: str = Slug,
                who: Principal = Depends(current)) -> Response:
    """Change the display fields or settings; ``archived: true|false`` archives or restores
    (all in one transaction)."""
    slug = model.board_slug(slug)
    who.check_admin(slug)
    st = state(request)
    if data.settings is not None and host_access.host_settings_changed(
            boards.get(st.db, slug)["settings"], data.settings):
        who.check_admin()  # named checks and paths run on the host: an unscoped admin's decision
    if data.settings is not None:
        from ...dispatch import branches

        branches.check_settings(boards.get(st.db, slug), data.settings)
    fields = data.model_dump(exclude_none=True, exclude={"archived"})
    return Json(compound.patch_board(st.db, slug, archived=data.archived, home=st.settings.home,
                                     actor=who.name, **fields))


@router.delete("/boards/{slug}", response_model=DeletedBoard | BoardRow, responses=responses(400, 404, 409))
def remove_board(request: Request, slug: str = Slug,
                 purge: bool = Query(default=False, description="delete for good instead of archiving"),
                 who: Principal = Depends(current)) -> Response:
    """Archive a board (recoverable), or with ``purge=true`` delete it and its tasks for good."""
    slug = model.board_slug(slug)
    who.check_admin(slug)
    st = state(request)
    if purge:
        from ...dispatch.gc import after_board_delete

        out = boards.delete(st.db, slug, home=st.settings.home, actor=who.name)
        out.update(after_board_delete(st.db, st.settings.home, out))  # its tasks' worktrees and branches
        st.forget_board(slug)
    else:
        out = boards.archive(st.db, slug, home=st.settings.home, actor=who.name)
    return Json(out)


@router.get("/board", response_model=BoardView, responses=responses(400, 404))
def board_view(
    request: Request, board: str | None = BoardQ,
    tenant: str | None = Query(default=None, max_length=200),
    assignee: str | None = Query(default=None, max_length=200),
    goal: str | None = Query(default=None, max_length=64),
    search: str | None = Query(default=None, max_length=500),
    include_archived: bool = False, lanes: bool = False,
    per_column: int = Query(default=100, ge=1, le=1000),
    supervision: bool = Query(default=False, description="include the supervisor's own tasks"),
    who: Principal = Depends(current),
) -> Response:
    """Columns by status with counts and the first ``per_column`` cards of each; the supervisor's
    own tasks only with ``supervision`` (``hidden_supervision`` counts those left out)."""
    slug = read_board(request, who, board)
    db = state(request).db
    # every change to a board appends an event, so the newest event id versions the view: a
    # dashboard fleet polling or reloading on a burst is answered from the rendered bytes
    key = (db.url, slug, tenant, assignee, goal, search, include_archived, lanes, per_column, supervision)
    top = queries.last_event_id(db)
    hit = _VIEW_CACHE.get(key)
    if hit is not None and hit[0] == top:
        return Response(hit[1], media_type="application/json")
    body = dumps(fanout.mark_backoff(db, slug, queries.board_view(
        db, slug, tenant=tenant, assignee=assignee, goal=goal, search=search,
        include_archived=include_archived, per_column=per_column, lanes=lanes, supervision=supervision)))
    with _VIEW_LOCK:
        if len(_VIEW_CACHE) >= 64:
            _VIEW_CACHE.pop(next(iter(_VIEW_CACHE)))
        _VIEW_CACHE[key] = (top, body)
    return Response(body, media_type="application/json")


_VIEW_CACHE: dict[tuple[object, ...], tuple[int, bytes]] = {}
_VIEW_LOCK = threading.Lock()
