"""Requests that change several things at once, each as one transaction.

A surface whose request maps to more than one verb (``PATCH /api/goals/{id}`` with new fields
and a cancellation, ``PATCH /api/boards/{slug}`` with new fields and ``archived``) calls one
function here: every value is checked first, then the verbs' transaction bodies run in one
``db.write``, so a refused step leaves nothing of the request behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..domain import model
from ..store.engine import Database, Row, Tx
from . import boards, goals
from .rows import BoardRow


def patch_goal(
    db: Database, board: str, goal_id: str, *, cancel: bool = False, actor: str | None = None,
    **fields: Any,
) -> Row:
    """Edit a goal's fields and, with ``cancel``, cancel it: both or neither."""
    changes = goals.goal_changes(**fields)

    def _w(tx: Tx) -> Row:
        row = goals.update_in(tx, board, goal_id, changes, actor)
        return goals.cancel_in(tx, board, goal_id, actor) if cancel else row

    return goals.goal_out(db.write(_w))


def patch_board(
    db: Database, slug: str, *, archived: bool | None = None, home: Path | None = None,
    actor: str | None = None, **fields: Any,
) -> BoardRow:
    """Change a board's display fields or settings and, with ``archived``, archive (True) or
    restore (False) it: all or nothing. The board's folders move once the change is committed."""
    slug = model.board_slug(slug)
    changes = boards.board_changes(**fields)
    dest = boards.archive_dir(home, slug) if archived is True else None

    def _w(tx: Tx) -> Row | None:
        boards.update_in(tx, slug, changes, actor)  # also: 404 for an unknown board
        if archived is True:
            boards.archive_in(tx, slug, dest, actor)
        elif archived is False:
            return boards.restore_in(tx, slug, actor)
        return None

    restored = db.write(_w)
    if archived is True:
        boards.move_archived(home, slug, dest)
    elif restored is not None:
        boards.move_restored(home, slug, restored)
    return boards.get(db, slug)


__all__ = ["patch_board", "patch_goal"]
