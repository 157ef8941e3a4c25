"""Messages to a running worker: the comments on its task since it last looked.

A run's inbox holds the comments written on its task after the run started, except the worker's
own (authored by the run's profile). ``task_runs.inbox_seen`` is the last comment id the worker
was given: the heartbeat verb, the ``kanban_inbox`` MCP tool and ``POST
/api/tasks/{id}/inbox`` return what came after it and move it forward. The dispatcher also
appends new comments to ``.board/inbox.md`` for agents that only read files
(:func:`unread_for_files`, with a cursor kept next to that file).
"""

from __future__ import annotations

from typing import Any

from ..domain.errors import Conflict
from ..store.engine import Database, Row, Tx, in_list
from .common import get_task

#: the most messages one call returns (the rest come with the next call)
LIMIT = 50


def _run(tx: Tx, task: Row, run_id: int | None) -> Row | None:
    rid = run_id if run_id is not None else task.get("current_run_id")
    if rid is None:
        return None
    return tx.one("SELECT id, task_id, profile, started_at, inbox_seen, status FROM task_runs WHERE id = :r",
                  {"r": rid})


def _messages(tx: Tx, task_id: str, run: Row, after: int | None) -> list[Row]:
    params: dict[str, Any] = {"t": task_id, "after": int(after or 0), "since": float(run["started_at"]),
                              "me": run.get("profile") or "", "n": LIMIT}
    return tx.all(
        "SELECT id, author, body, kind, created_at FROM task_comments WHERE task_id = :t AND id > :after "
        "AND created_at >= :since AND author != :me ORDER BY id LIMIT :n", params)


def take_in(tx: Tx, board: str, task_id: str, run_id: int | None) -> list[Row]:
    """The worker's new messages, inside the caller's transaction; its cursor moves past them."""
    task = get_task(tx, board, task_id)
    run = _run(tx, task, run_id)
    if run is None or run["status"] != "open":
        return []
    rows = _messages(tx, task_id, run, run.get("inbox_seen"))
    if rows:
        tx.execute("UPDATE task_runs SET inbox_seen = :c WHERE id = :r", {"c": rows[-1]["id"], "r": run["id"]})
    return rows


def take(db: Database, board: str, task_id: str, *, run_id: int | None = None) -> Row:
    """New messages for the worker of ``task_id`` (its run ``run_id``): ``{"messages": [...],
    "more": bool}``. A task that is not running has no inbox (``Conflict``)."""

    def _w(tx: Tx) -> Row:
        task = get_task(tx, board, task_id)
        run = _run(tx, task, run_id)
        if run is None or run["status"] != "open" or task["status"] != "running":
            raise Conflict(f"task {task_id} is {task['status']}: only a running task's worker has an inbox")
        rows = take_in(tx, board, task_id, run["id"])
        return {"task_id": task_id, "run_id": run["id"], "messages": rows, "more": len(rows) == LIMIT}

    return db.write(_w)


def unread_for_files(db: Database, cursors: dict[int, int]) -> dict[int, list[Row]]:
    """For each open run id → the last comment id already written to its ``.board/inbox.md``:
    the comments after it (same rules as :func:`take`), in one read."""
    if not cursors:
        return {}

    def _r(tx: Tx) -> dict[int, list[Row]]:
        params: dict[str, Any] = {}
        # with each run, the newest comment it may be shown: most have none past their cursor,
        # and then this one statement is the whole read
        runs = tx.all(
            "SELECT r.id, r.task_id, r.profile, r.started_at, r.status, (SELECT MAX(c.id) FROM task_comments c "
            "WHERE c.task_id = r.task_id AND c.created_at >= r.started_at AND c.author != COALESCE(r.profile, '')) "
            "AS newest FROM task_runs r WHERE r.id IN " + in_list("r", cursors, params), params)
        out: dict[int, list[Row]] = {}
        for run in runs:
            if run["status"] != "open" or run["newest"] is None or int(run["newest"]) <= cursors.get(int(run["id"]), 0):
                continue
            rows = _messages(tx, run["task_id"], run, cursors.get(int(run["id"]), 0))
            if rows:
                out[int(run["id"])] = rows
        return out

    return db.read(_r)


def newest_comments(db: Database, task_ids: list[str]) -> dict[str, int]:
    """The newest comment id of each of ``task_ids`` that has comments, in one read through the
    comments' (task, id) index."""
    if not task_ids:
        return {}

    def _r(tx: Tx) -> dict[str, int]:
        params: dict[str, Any] = {}
        return {r["task_id"]: int(r["newest"]) for r in tx.all(
            "SELECT task_id, MAX(id) AS newest FROM task_comments WHERE task_id IN "
            + in_list("t", sorted(set(task_ids)), params) + " GROUP BY task_id", params)}

    return db.read(_r)


__all__ = ["LIMIT", "newest_comments", "take", "take_in", "unread_for_files"]
