"""What monitoring reads at scrape time, each one cheap read, and the dispatchers' pass marks.

The reads serve ``GET /metrics`` and ``GET /readyz`` (``observe/``): they read running counts
(PostgreSQL's ``task_count_deltas``, SQLite's ``task_counts``), indexed subsets (running tasks by
host, budget-blocked tasks, wakes by status) or small tables, never a pass over every task.

A dispatcher marks that it passes with :func:`mark_pass` (at most every
:data:`PASS_MARK_EVERY` seconds, a row of ``agentboard_meta`` per host), so a ``serve`` without
its own dispatcher can tell a load balancer whether any dispatcher works on its database; between
passes (an idle one passes once per ``dispatch_interval``) it marks every
:data:`PASS_MARK_EVERY` seconds that it lives, which holds its host id (``dispatch/host_id.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..store.engine import Database, Tx

Row = dict[str, Any]

#: a dispatcher writes its pass mark at most this often (seconds)
PASS_MARK_EVERY = 15.0
_PASS_KEY = "dispatcher_pass:"


def ping(db: Database) -> None:
    """One trivial statement: raises ``Unavailable`` when the database does not answer."""
    db.read(lambda tx: tx.scalar("SELECT 1"))


@dataclass
class Snapshot:
    """What one scrape reads, on one snapshot."""

    #: tasks per ``(board, status)``
    tasks: dict[tuple[str, str], int] = field(default_factory=dict)
    #: every board that is not archived, and every board holding tasks
    boards: list[str] = field(default_factory=list)
    #: running tasks per worker host
    running: dict[str, int] = field(default_factory=dict)
    #: tasks blocked by a spent budget, per board
    budget_blocked: dict[str, int] = field(default_factory=dict)
    #: the supervisor's wakes per ``(board, status)``
    wakes: dict[tuple[str, str], int] = field(default_factory=dict)
    #: per board: subscriptions (not parked) behind the newest event, and parked targets
    notify: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: PostgreSQL: boards whose count deltas grew past the fold threshold (the caller folds them
    #: with :func:`agentboard.kernel.maintenance.compact_task_counts`)
    fold: list[str] = field(default_factory=list)


def snapshot(db: Database) -> Snapshot:
    """The board-wide figures of a scrape, in one read transaction."""
    from .maintenance import COUNT_ROWS_PG, boards_to_fold

    def _r(tx: Tx) -> Snapshot:
        snap = Snapshot()
        if tx.db.dialect == "postgresql":  # the triggers' running counts (docs/kernel.md)
            rows = tx.all(f"SELECT board, status, SUM(d) AS n, COUNT(*) AS k FROM {COUNT_ROWS_PG} "
                          "GROUP BY board, status")
            snap.fold = boards_to_fold(rows)
        else:  # the triggers' counter rows (0020)
            rows = tx.all("SELECT board, status, n FROM task_counts WHERE n != 0")
        for r in rows:
            snap.tasks[(str(r["board"]), str(r["status"]))] = int(r["n"] or 0)
        slugs = {str(r["slug"]) for r in tx.all("SELECT slug FROM boards WHERE archived = 0")}
        snap.boards = sorted(slugs | {b for b, _ in snap.tasks})
        snap.running = {str(r["worker_host"] or ""): int(r["n"]) for r in tx.all(
            "SELECT worker_host, COUNT(*) AS n FROM tasks WHERE status = 'running' GROUP BY worker_host")}
        snap.budget_blocked = {str(r["board"]): int(r["n"]) for r in tx.all(  # their own partial index
            "SELECT board, COUNT(*) AS n FROM tasks WHERE status = 'blocked' AND block_kind = 'budget' "
            "GROUP BY board")}
        snap.wakes = {(str(r["board"]), str(r["status"])): int(r["n"]) for r in tx.all(
            "SELECT board, status, COUNT(*) AS n FROM supervisor_wakes GROUP BY board, status")}
        snap.notify = {str(r["board"]): (int(r["behind"] or 0), int(r["parked"] or 0)) for r in tx.all(
            "SELECT board, "
            "SUM(CASE WHEN parked_at IS NULL AND cursor < (SELECT COALESCE(MAX(id), 0) FROM task_events) "
            "THEN 1 ELSE 0 END) AS behind, "
            "SUM(CASE WHEN parked_at IS NOT NULL THEN 1 ELSE 0 END) AS parked "
            "FROM notify_subscriptions GROUP BY board")}
        return snap
    return db.read(_r)


def closed_runs(db: Database, run_ids: list[int]) -> list[Row]:
    """The closed runs among ``run_ids`` with their board, profile, outcome, times, usage and
    their task's model."""
    from ..store.engine import in_list

    def _r(tx: Tx) -> list[Row]:
        params: dict[str, Any] = {}
        return tx.all(
            "SELECT r.id, r.board, r.task_id, r.profile, r.outcome, r.started_at, r.ended_at, r.input_tokens, "
            "r.output_tokens, r.cost_usd, t.model FROM task_runs r LEFT JOIN tasks t ON t.id = r.task_id "
            "WHERE r.status = 'closed' AND r.id IN " + in_list("r", run_ids, params), params)
    return db.read(_r) if run_ids else []


def mark_pass(db: Database, host: str, at: float, boards: list[str] | None, *, by: Row | None = None,
              held: Callable[[Row, float], bool] | None = None, seen: float | None = None) -> Row | None:
    """Record that the dispatcher on ``host`` finished a pass at ``at`` (over ``boards``, or
    every board when ``None``) and was alive at ``seen`` (default ``at``: a dispatcher between
    passes marks that it lives without a pass, keeping ``at``).

    ``by``: who marks (the dispatcher's identity, kept in the mark). With ``held``, the host's
    current mark is read first, in the same transaction (its row locked on PostgreSQL): when
    ``held(its "by", when it was last seen)`` says another live dispatcher holds this host id,
    nothing is written and that mark is returned (``{"by", "at"}``, ``at`` when it was seen);
    else ``None``."""
    key = (_PASS_KEY + host)[:128]
    value = json.dumps({"at": at, "seen": at if seen is None else max(at, seen), "boards": boards,
                        **({"by": by} if by is not None else {})})

    def _w(tx: Tx) -> Row | None:
        if held is not None:
            tx.execute("INSERT INTO agentboard_meta (key, value) VALUES (:k, '{}') ON CONFLICT (key) DO NOTHING",
                       {"k": key})
            lock = " FOR UPDATE" if tx.db.dialect == "postgresql" else ""
            raw = tx.scalar(f"SELECT value FROM agentboard_meta WHERE key = :k{lock}", {"k": key})
            try:
                old = json.loads(raw or "{}")
                other, when = old.get("by"), max(float(old.get("at") or 0), float(old.get("seen") or 0))
            except (ValueError, TypeError, AttributeError):
                other, when = None, 0.0
            if isinstance(other, dict) and held(other, when):
                return {"by": other, "at": when}
        tx.execute("INSERT INTO agentboard_meta (key, value) VALUES (:k, :v) "
                   "ON CONFLICT (key) DO UPDATE SET value = excluded.value", {"k": key, "v": value})
        return None
    return db.write(_w)


def dispatcher_passes(db: Database) -> list[Row]:
    """The last pass of each dispatcher host: ``{"host", "at", "seen", "boards"}`` (``seen``: when
    it was last alive, passing or not)."""
    rows = db.read(lambda tx: tx.all(
        "SELECT key, value FROM agentboard_meta WHERE key LIKE :p", {"p": _PASS_KEY + "%"}))
    out: list[Row] = []
    for r in rows:
        try:
            data = json.loads(r["value"])
            at = float(data["at"])
            out.append({"host": str(r["key"])[len(_PASS_KEY):], "at": at,
                        "seen": max(at, float(data.get("seen") or 0)), "boards": data.get("boards")})
        except (ValueError, KeyError, TypeError):
            continue
    return out
