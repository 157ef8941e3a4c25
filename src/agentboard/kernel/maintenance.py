"""Housekeeping that changes no task state: pruning old events, folding task count deltas,
checkpointing SQLite's log, keeping PostgreSQL's planner statistics current; what ``gc`` reads."""

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


def race_attempt_ids(db: Database, board: str) -> set[str]:
    """The ids of ``board``'s race attempts' own tasks (``race_of`` set, read through its partial
    index): ``gc`` removes them by the rules for races only (``dispatch.gc``), never as other
    finished tasks — the attempts of a race not finished are kept, and the picked attempt's
    worktree is the race's."""
    return {str(r["id"]) for r in db.read(lambda tx: tx.all(
        "SELECT id FROM tasks WHERE race_of IS NOT NULL AND board = :b", {"b": board}))}


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


#: PostgreSQL: the tables whose planner statistics a dispatcher keeps current
#: (:func:`refresh_statistics`): those its claims and a worker's start read by key
STATISTICS_TABLES = ("tasks", "task_links", "task_runs", "task_events")
#: a table's statistics lag once more rows than this floor plus this share of its live rows
#: changed since its last ``ANALYZE`` (autovacuum's own rule is 50 rows plus 10 %, applied only
#: when its launcher next visits the database, every minute by default)
STATISTICS_FLOOR = 500
STATISTICS_SHARE = 0.1
#: a lagging table is analyzed at once when more of its rows changed than this many times the
#: rows its statistics know (plus the floor): a board created or released in bulk, planned as if
#: empty (``pg_released_graph.py``). Changes, not live rows: the server counts both as backends
#: hand in their counters, and a bulk load's changes (inserts, then the release's updates) come
#: in faster. Otherwise a lagging table is analyzed again at most every :data:`STATISTICS_EVERY`
#: seconds: the rows a burst of claims changes, one after another, would otherwise have each
#: host analyze it again every few seconds while the burst runs
STATISTICS_GROWTH = 2
STATISTICS_EVERY = 60.0
#: the server's activity counters, which every backend updates as its transactions end; only
#: the tables this role may analyze (it owns them, owns the database or is a superuser): for
#: another role ``ANALYZE`` would only warn, every time, and autovacuum keeps them instead
STALE_STATISTICS_SQL = (
    "SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid "
    "WHERE s.schemaname = current_schema() "
    "AND s.relname IN (" + ", ".join(f"'{t}'" for t in STATISTICS_TABLES) + ") "
    f"AND s.n_mod_since_analyze > {STATISTICS_FLOOR} + {STATISTICS_SHARE} * s.n_live_tup "
    f"AND (s.n_mod_since_analyze > {STATISTICS_GROWTH} * GREATEST(c.reltuples, 0) + {STATISTICS_FLOOR} "
    "OR COALESCE(GREATEST(s.last_analyze, s.last_autoanalyze), '-infinity') < now() - make_interval(secs => :every)) "
    "AND (pg_has_role(c.relowner, 'USAGE') "
    "OR pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE') "
    "OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)) ORDER BY s.relname"
)
#: the key of the transaction lock one host holds while it analyzes (the others leave it the work)
_ANALYZE_LOCK = 0x61625F616E616C  # "ab_anal"


def stale_statistics(db: Database, *, every: float = STATISTICS_EVERY) -> list[str]:
    """PostgreSQL: the tables of :data:`STATISTICS_TABLES` whose planner statistics lag behind
    their rows (:data:`STALE_STATISTICS_SQL`): changed far past them, or changed and not analyzed
    for ``every`` seconds; [] on SQLite."""
    if db.dialect != "postgresql":
        return []
    return [str(r["relname"]) for r in db.read(lambda tx: tx.all(STALE_STATISTICS_SQL, {"every": float(every)}))]


def refresh_statistics(db: Database) -> list[str]:
    """PostgreSQL: ``ANALYZE`` the tables whose statistics lag (:func:`stale_statistics`), one
    host at a time: a host that finds another at it leaves it the work. The tables analyzed.

    A graph created in bulk and then released (a parent whose completion makes a thousand
    children ready) would otherwise be claimed and started on plans made when its tables were
    empty: each look-up by key a scan of the whole table, each claim a walk over every ready
    task (``bench/README.md``, ``pg_released_graph.py``). ``ANALYZE`` blocks no reader or
    writer; a role that may not analyze the tables never finds them stale here."""
    if db.dialect != "postgresql":
        return []
    stale = stale_statistics(db)
    if not stale:
        return []
    with db._raw() as conn:
        autocommit = conn.autocommit
        conn.autocommit = True
        try:
            with conn.transaction():  # the lock is the transaction's: safe behind a transaction pooler
                if not conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (_ANALYZE_LOCK,)).fetchone()[0]:
                    return []
                conn.execute("ANALYZE " + ", ".join(t for t in STATISTICS_TABLES if t in stale))
        finally:
            conn.autocommit = autocommit
    return stale
