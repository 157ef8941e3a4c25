"""Housekeeping that changes no task state: pruning old events."""

from __future__ import annotations

import time

from ..store.engine import Database, Tx


def prune_events(db: Database, *, retention_days: int | None = None, board: str | None = None) -> int:
    """Delete events older than the retention (default: the ``event_retention_days`` setting)
    whose task is done or archived (or gone)."""
    if retention_days is None:
        retention_days = db.settings.event_retention_days
    cutoff = time.time() - retention_days * 86400

    def _w(tx: Tx) -> int:
        sql = (
            "DELETE FROM task_events WHERE created_at < :c AND task_id IS NOT NULL AND "
            "task_id NOT IN (SELECT id FROM tasks WHERE status NOT IN ('done', 'archived')) "
            # the newest row stays: SQLite hands out max(id) + 1, so ids never go back
            "AND id < (SELECT MAX(id) FROM task_events)"
        )
        params: dict[str, object] = {"c": cutoff}
        if board:
            sql += " AND board = :b"
            params["b"] = board
        tx.execute(sql, params)
        return tx.rowcount

    return db.write(_w)
