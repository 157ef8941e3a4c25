"""What every route module shares: the app's state, board scoping, JSON responses."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from ...config import Settings
from ...domain import model
from ...domain.errors import NotFound
from ...store.engine import Database
from ..auth import Principal
from ..errors import Json, responses

__all__ = ["AppState", "Json", "read_board", "responses", "state", "write_board"]


@dataclass
class AppState:
    db: Database
    settings: Settings
    dispatcher: Any = None
    api_url: str | None = None
    hub: Any = None
    _boards: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def require_board(self, slug: str) -> None:
        """404 for a board that does not exist (known boards are remembered)."""
        if slug in self._boards:
            return
        rows = self.db.read(lambda tx: tx.all("SELECT slug FROM boards"))
        with self._lock:
            self._boards = {r["slug"] for r in rows}
        if slug not in self._boards:
            raise NotFound(f"no board {slug!r}; list boards with GET /api/boards")

    def forget_board(self, slug: str) -> None:
        with self._lock:
            self._boards.discard(slug)


def state(request: Request) -> AppState:
    return request.app.state.ab  # type: ignore[no-any-return]


def _slug(who: Principal, board: str | None) -> str:
    return model.board_slug(board) if board else who.default_board


def read_board(request: Request, who: Principal, board: str | None) -> str:
    """The board a read acts on, after checking the caller may see it and it exists."""
    slug = _slug(who, board)
    who.check_read(slug)
    state(request).require_board(slug)
    return slug


def write_board(request: Request, who: Principal, board: str | None, task_id: str | None = None) -> str:
    """The board a task write acts on, after checking role, board and (for run tokens) task."""
    slug = _slug(who, board)
    who.check_write(slug, task_id)
    state(request).require_board(slug)
    return slug
