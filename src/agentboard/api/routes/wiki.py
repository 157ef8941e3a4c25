"""The board's wiki: published pages handed to workers, and drafts waiting to be published."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from starlette.responses import Response

from ...kernel import wiki
from ..answers import WikiPage
from ..auth import Principal, current
from ..models import WikiCreate, WikiPatch
from .common import Json, read_board, responses, state, write_board

router = APIRouter(prefix="/api", tags=["wiki"])
BoardQ = Query(default=None, max_length=64, description="board slug")
Slug = PathParam(min_length=1, max_length=128, description="page slug")


@router.get("/wiki", response_model=list[WikiPage], responses=responses(400, 404))
def list_pages(request: Request, board: str | None = BoardQ,
               status: Literal["published", "draft"] | None = None,
               who: Principal = Depends(current)) -> Response:
    slug = read_board(request, who, board)
    return Json(wiki.list_pages(state(request).db, slug, status=status))


@router.get("/wiki/{page}", response_model=WikiPage, responses=responses(400, 404))
def get_page(request: Request, page: str = Slug, board: str | None = BoardQ,
             who: Principal = Depends(current)) -> Response:
    slug = read_board(request, who, board)
    return Json(wiki.get(state(request).db, slug, page))


@router.post("/wiki", response_model=WikiPage, status_code=201, responses=responses(400, 404, 409))
def add_page(request: Request, data: WikiCreate, board: str | None = BoardQ,
             who: Principal = Depends(current)) -> Response:
    slug = write_board(request, who, board)
    out = wiki.add(state(request).db, slug, data.slug, title=data.title, body=data.body,
                   publish=data.publish, author=who.name, actor=who.name)
    return Json(out, status_code=201)


@router.patch("/wiki/{page}", response_model=WikiPage, responses=responses(400, 404, 409))
def publish_page(request: Request, data: WikiPatch, page: str = Slug, board: str | None = BoardQ,
                 who: Principal = Depends(current)) -> Response:
    """Publish a draft (``action: "publish"``, the default) or discard it."""
    slug = write_board(request, who, board)
    db = state(request).db
    if data.action == "discard":
        return Json(wiki.discard(db, slug, page, actor=who.name))
    return Json(wiki.publish(db, slug, page, actor=who.name))
