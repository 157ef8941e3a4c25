"""What every route module shares: the app's state, board scoping, JSON responses.

A task id names one task in the whole installation: a route given a task id acts on the task's
own board (found with :func:`agentboard.kernel.lookups.task_board`), after the caller's token
is checked against that board. A task on a board the caller may not see is answered exactly
like an id no board holds (404 ``no task t_…``), so a token learns nothing of other boards. ``?board=`` only scopes board-wide routes; given with a task id
it must name the task's board (else 400).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from fastapi import Request

from ...config import Settings
from ...domain import model
from ...domain.errors import InvalidInput, NotFound
from ...kernel import lookups
from ...store.engine import Database
from ..auth import Principal
from ..errors import Json, responses

if TYPE_CHECKING:
    from ..ws import Hub

__all__ = [
    "actor_of",
    "AppState", "HostedDispatcher", "Json", "read_board", "responses", "state", "task_boards",
    "write_board",
]


class HostedDispatcher(Protocol):
    """What the app needs of the dispatcher it hosts: started and stopped with the app, and a
    pass on demand behind ``POST /api/dispatch``."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def run_pass(self, max_spawn: int | None = None, dry_run: bool = False) -> object: ...


@dataclass
class AppState:
    db: Database
    settings: Settings
    hub: Hub
    dispatcher: HostedDispatcher | None = None
    _boards: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def require_board(self, slug: str) -> None:
        """404 for a board that does not exist (known boards are remembered)."""
        if slug in self._boards:
            return
        slugs = lookups.board_slugs(self.db)
        with self._lock:
            self._boards = set(slugs)
        if slug not in self._boards:
            raise NotFound(f"no board {slug!r}; list boards with GET /api/boards")

    def forget_board(self, slug: str) -> None:
        with self._lock:
            self._boards.discard(slug)


def state(request: Request) -> AppState:
    return request.app.state.ab  # type: ignore[no-any-return]


def _slug(who: Principal, board: str | None) -> str:
    return model.board_slug(board) if board else who.default_board


def _seen(who: Principal, task_id: str, slug: str, board: str | None) -> str:
    """``slug``, the board of ``task_id``, once the caller may see it and ``?board=`` agrees."""
    if not who.sees(slug):
        # the same answer as for an id no board holds: the caller learns nothing of other boards
        raise NotFound(f"no task {task_id}")
    if board and model.board_slug(board) != slug:
        raise InvalidInput(
            f"task {task_id} is on board {slug!r}, not {model.board_slug(board)!r}; "
            "leave out ?board= (a task id finds its own board)")
    return slug


def _task_slug(request: Request, who: Principal, board: str | None, task_id: str) -> str:
    return _seen(who, task_id, lookups.task_board(state(request).db, task_id), board)


def goal_slug(request: Request, who: Principal, board: str | None, goal_id: str, *, write: bool = False) -> str:
    """The board of goal ``goal_id`` (a goal id finds its own board, as a task id does), once the
    caller may read it (``write``: change it) and ``?board=`` agrees."""
    try:
        slug = lookups.goal_board(state(request).db, goal_id)
    except NotFound:
        raise NotFound(f"no goal {goal_id}") from None
    if not who.sees(slug):
        raise NotFound(f"no goal {goal_id}")
    if board and model.board_slug(board) != slug:
        raise InvalidInput(f"goal {goal_id} is on board {slug!r}, not {model.board_slug(board)!r}; "
                           "leave out ?board= (a goal id finds its own board)")
    if write:
        who.check_write(slug)
    else:
        who.check_read(slug)
    return slug


def read_board(request: Request, who: Principal, board: str | None, task_id: str | None = None) -> str:
    """The board a read acts on, after checking the caller may see it and it exists.

    With ``task_id``: the task's own board, wherever it lives.
    """
    if task_id is not None:
        return _task_slug(request, who, board, task_id)
    slug = _slug(who, board)
    who.check_read(slug)
    state(request).require_board(slug)
    return slug


def write_board(request: Request, who: Principal, board: str | None, task_id: str | None = None) -> str:
    """The board a write acts on, after checking role, board and (for run tokens) task.

    With ``task_id``: the task's own board, wherever it lives.
    """
    if task_id is not None:
        who.check_writer(task_id)
        return _task_slug(request, who, board, task_id)
    slug = _slug(who, board)
    who.check_write(slug)
    state(request).require_board(slug)
    return slug


def task_boards(request: Request, who: Principal, board: str | None, *task_ids: str) -> list[str]:
    """The boards of several tasks (one read) a write touches together (a link), each checked
    like :func:`write_board` does; a run token needs to be an orchestrator's."""
    who.check_writer()
    found = lookups.task_boards(state(request).db, list(task_ids))
    return [_seen(who, tid, found[tid], board) for tid in task_ids]


def actor_of(request: Request, who: Principal, slug: str) -> str:
    """Who the event log names for a request: a run token's profile (as a worker's own CLI and
    MCP calls are named), else the token's name."""
    if who.supervisor:
        return f"supervisor:{who.supervisor}"
    if who.is_run and who.run_id is not None:
        from ...kernel import queries

        return str(queries.get_run(state(request).db, slug, who.run_id).get("profile") or "worker")
    return who.name
