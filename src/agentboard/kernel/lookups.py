"""Small lookups the surfaces need before they know which board a request acts on.

A task id names one task in the whole installation, so a verb given a task id finds the task's
board here first; the caller's board scope is then checked against that board.
"""

from __future__ import annotations

from ..domain.errors import NotFound
from ..store.engine import Database, Tx


def task_board_in(tx: Tx, task_id: str) -> str:
    """The board that holds ``task_id`` (inside a transaction). NotFound if no board does."""
    slug = tx.scalar("SELECT board FROM tasks WHERE id = :id", {"id": task_id})
    if slug is None:
        if not task_id or not str(task_id).startswith("t_"):
            raise NotFound(f"no task {task_id!r} (task ids look like t_1a2b3c4d)")
        raise NotFound(f"no task {task_id}")
    return str(slug)


def task_board(db: Database, task_id: str) -> str:
    """The board that holds ``task_id``. NotFound if no board does."""
    return db.read(task_board_in, task_id)


def task_boards(db: Database, task_ids: list[str]) -> dict[str, str]:
    """The board of each of ``task_ids`` in one read; NotFound names the first unknown id."""

    def _r(tx: Tx) -> dict[str, str]:
        return {tid: task_board_in(tx, tid) for tid in dict.fromkeys(task_ids)}

    return db.read(_r)


def task_status(db: Database, task_id: str) -> str:
    """The status of ``task_id``, wherever it lives. NotFound if no board holds it."""

    def _r(tx: Tx) -> str:
        status = tx.scalar("SELECT status FROM tasks WHERE id = :id", {"id": task_id})
        if status is None:
            task_board_in(tx, task_id)  # raises the explanatory NotFound
        return str(status)

    return db.read(_r)


def goal_board(db: Database, goal_id: str) -> str:
    """The board of a goal (``NotFound`` when there is no such goal)."""
    def _r(tx: Tx) -> str:
        slug = tx.scalar("SELECT board FROM goals WHERE id = :g", {"g": goal_id})
        if slug is None:
            raise NotFound(f"no goal {goal_id}")
        return str(slug)
    return db.read(_r)


def board_slugs(db: Database) -> list[str]:
    """Every board's slug, archived ones included."""
    return [str(r["slug"]) for r in db.read(lambda tx: tx.all("SELECT slug FROM boards ORDER BY slug"))]


def boards_with_events_after(db: Database, cursor: int) -> dict[str, int]:
    """Each board with events after the cursor ``cursor`` (an event id, as
    :func:`agentboard.kernel.queries.events_after` takes it), mapped to the id of its last such
    event, in the log's order: the last value is the newest cursor."""
    from .queries import boards_after

    return boards_after(db, cursor)


__all__ = [
    "board_slugs", "boards_with_events_after", "task_board", "task_board_in", "task_boards",
    "task_status",
]
