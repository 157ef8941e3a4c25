"""Housekeeping that changes no task state: pruning old events, folding task count deltas,
checkpointing SQLite's log."""

from __future__ import annotations

import time

from ..store.engine import Database, Row, Tx


def prune_events(db: Database, *, retention_days: int | None = None, board: str | None = None,
                 dry_run: bool = False) -> int:
    """Delete events older than the retention (default: the ``event_retention_days`` setting)
    whose task is done or archived (or gone); with ``dry_run`` count them only."""
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
        if dry_run:
            return int(tx.scalar(sql.replace("DELETE FROM", "SELECT COUNT(*) FROM", 1), params) or 0)
        tx.execute(sql, params)
        return tx.rowcount

    if dry_run:
        return db.read(_w)
    return db.write(_w)


#: PostgreSQL: a board whose count deltas exceed this many rows has them folded by the next
#: board view (one row per status again)
COUNT_DELTAS_FOLD_AT = 512

#: PostgreSQL: the count deltas as ``(board, status, d)`` lines: a row counts ``d`` for its
#: ``status`` and, when it records a move (``prev`` set, 0021), ``-d`` for ``prev``
COUNT_ROWS_PG = (
    "(SELECT board, status, d FROM task_count_deltas UNION ALL "
    "SELECT board, prev, -d FROM task_count_deltas WHERE prev IS NOT NULL) AS c"
)


def boards_to_fold(rows: list[Row]) -> list[str]:
    """The boards whose count deltas grew past :data:`COUNT_DELTAS_FOLD_AT`, from the lines of
    a read of every board's deltas (``board``, and ``k``: how many delta lines each stands for)."""
    per_board: dict[str, int] = {}
    for r in rows:
        per_board[str(r["board"])] = per_board.get(str(r["board"]), 0) + int(r["k"])
    return sorted(b for b, k in per_board.items() if k > COUNT_DELTAS_FOLD_AT)


def fold_task_counts(db: Database) -> list[str]:
    """PostgreSQL: fold the count deltas of every board that has more than
    :data:`COUNT_DELTAS_FOLD_AT` of them (a running dispatcher calls it now and then, so a board
    nobody looks at does not pile them up); the boards folded."""
    if db.dialect != "postgresql":
        return []
    folded = boards_to_fold(db.read(lambda tx: tx.all(
        f"SELECT board, COUNT(*) AS k FROM {COUNT_ROWS_PG} GROUP BY board")))
    for board in folded:
        compact_task_counts(db, board)
    return folded


def compact_task_counts(db: Database, board: str) -> None:
    """PostgreSQL: fold a board's task count deltas into one row per status. Rows that writers
    append meanwhile are left alone, and two folds at once each fold only the rows they deleted,
    so the sums never change."""
    def _w(tx: Tx) -> None:
        tx.execute(
            "WITH gone AS (DELETE FROM task_count_deltas WHERE board = :b RETURNING status, prev, d) "
            "INSERT INTO task_count_deltas (board, status, d) "
            "SELECT :b, s, SUM(n) FROM (SELECT status AS s, d AS n FROM gone UNION ALL "
            "SELECT prev, -d FROM gone WHERE prev IS NOT NULL) AS x GROUP BY s HAVING SUM(n) <> 0", {"b": board})

    if db.dialect == "postgresql":
        db.write(_w)


def checkpoint(db: Database) -> bool:
    """Fold SQLite's write-ahead log back into the database file and truncate it (False on
    PostgreSQL, or while a reader still holds part of it)."""
    if db.dialect != "sqlite":
        return False
    import sqlalchemy as sa

    with db.engine.connect() as conn:
        row = conn.execute(sa.text("PRAGMA wal_checkpoint(TRUNCATE)")).fetchone()
        conn.commit()
    return row is not None and int(row[0]) == 0
