"""The insight rollups: per board, UTC day, profile and model, what the runs of that day did.

``run_rollups`` holds rows per (board, day, profile, model) — on PostgreSQL up to one per
``shard`` of the writing connections, so writers of one key never wait for each other; readers
sum a key's rows: counts, sums and two bucketed histograms (run durations and task cycle times). Each row is added to by one statement —
``INSERT ... SELECT ... ON CONFLICT DO UPDATE`` — built here from the facts of one source:

- :data:`RUN`: a closed run (runs, first attempts and their success, verifications, failures by
  class, tokens, cost, its duration's bucket); :data:`RUN_DONE` the same and :data:`DONE`'s
  facts at once, for a run whose close made its task done;
- :data:`DONE`: a task that reached done (a done task, its cycle time's bucket), counted for
  the profile and model of its last worker run, or of a race's picked attempt (an attempt's own
  task is no task of the board's: its runs count, its done does not); :data:`UNDONE` takes the
  same facts away again when the task leaves done (reopened, or restored from the archive), so
  a task done, reopened and done again counts once, as a rebuild counts it;
- :data:`REVIEW`: a review verdict (reviewed, approved), counted for the reviewed run's profile;
- :data:`USAGE`: tokens and cost learned after the run closed.

A run's close does not add its own row: it appends the run to ``run_rollups_pending`` (0029),
and :func:`fold_statements` adds every pending run at once, as :data:`RUN` (or :data:`RUN_DONE`)
adds one, in one aggregated upsert (``kernel.insights.fold``).

The same statements, without the one-row filter, rebuild every row from the runs, tasks and
reviews (:func:`rebuild`): the migration that adds the table and ``agentboard`` maintenance use
it. Days are UTC (``floor(epoch / 86400)``).

Histogram buckets: bucket 0 holds values below 1 s, bucket ``i`` (1 … 22) values in
``[2^(i-1), 2^i)`` seconds, bucket 23 everything from 2^22 s (48.5 days) on.
"""

from __future__ import annotations

from typing import Any

#: the histogram buckets (see the module's docstring)
BUCKETS = 24
#: the failure classes kept per row: a run outcome of one of these counts in ``f_<outcome>``,
#: any other outcome that is not a success (``completed``, ``review_requested``, ``reviewed``)
#: in ``f_other``
FAILURE_CLASSES: tuple[str, ...] = (
    "verify_failed", "crashed", "timed_out", "stale", "spawn_failed", "protocol_violation",
    "rate_limited", "reclaimed", "gave_up", "blocked", "other",
)
SUCCESS_OUTCOMES: tuple[str, ...] = ("completed", "review_requested", "reviewed")
KEYS: tuple[str, ...] = ("board", "day", "profile", "model")
COUNTS: tuple[str, ...] = (
    "runs", "firsts", "first_ok", "verified_total", "verified_pass", "reviewed", "approved", "done",
    "started", "input_tokens", "output_tokens", "cost_usd", "duration_s",
    *(f"f_{c}" for c in FAILURE_CLASSES),
    *(f"d{i}" for i in range(BUCKETS)),
    *(f"c{i}" for i in range(BUCKETS)),
)


def bucket_bounds(i: int) -> tuple[float, float | None]:
    """``[lo, hi)`` of bucket ``i`` in seconds (``hi`` None: the last, open bucket)."""
    if i == 0:
        return 0.0, 1.0
    lo = float(2 ** (i - 1))
    return lo, (float(2 ** i) if i < BUCKETS - 1 else None)


def bucket_of(seconds: float) -> int:
    """The bucket a value falls in."""
    for i in range(BUCKETS):
        lo, hi = bucket_bounds(i)
        if hi is None or seconds < hi:
            return i
    return BUCKETS - 1  # pragma: no cover


def _day(dialect: str, expr: str) -> str:
    if dialect == "postgresql":
        return f"CAST(FLOOR(({expr}) / 86400) AS INTEGER)"
    return f"CAST(({expr}) / 86400 AS INTEGER)"


def _in_bucket(expr: str, i: int) -> str:
    lo, hi = bucket_bounds(i)
    cond = f"({expr}) >= {lo}" if i else "1 = 1"
    if hi is not None:
        cond += f" AND ({expr}) < {hi}"
    return f"CASE WHEN {cond} THEN 1 ELSE 0 END"


_WORKER_RUN = "(x.claim_lock IS NULL OR x.claim_lock NOT LIKE 'review:%')"
_PASSED = "r.outcome IN ('completed', 'review_requested')"
_CHECKED = "COALESCE(t.verify, '[]') NOT IN ('[]', '')"
_RUN_DURATION = "CASE WHEN r.ended_at > r.started_at THEN r.ended_at - r.started_at ELSE 0 END"
_CYCLE = "CASE WHEN t.completed_at > t.created_at THEN t.completed_at - t.created_at ELSE 0 END"
#: a task of the board's own work: not an attempt of a race (whose done is the race's), nor
#: the supervisor's own task (its runs still count as runs and spend)
_OWN_TASK = "(t.purpose IS NULL OR t.purpose NOT IN ('attempt', 'supervision'))"


def _failure(c: str) -> str:
    if c == "other":
        known = ", ".join(f"'{o}'" for o in (*FAILURE_CLASSES[:-1], *SUCCESS_OUTCOMES))
        return f"CASE WHEN r.outcome IS NULL OR r.outcome NOT IN ({known}) THEN 1 ELSE 0 END"
    return f"CASE WHEN r.outcome = '{c}' THEN 1 ELSE 0 END"


def _run_source(dialect: str) -> tuple[str, dict[str, str]]:
    frm = ("task_runs r LEFT JOIN tasks t ON t.id = r.task_id "
           "LEFT JOIN profiles p ON p.name = COALESCE(r.profile, t.assignee)")
    cols = {
        "board": "r.board", "day": _day(dialect, "COALESCE(r.ended_at, r.started_at)"),
        "profile": "COALESCE(r.profile, t.assignee, '')", "model": "COALESCE(t.model, p.model, '')",
        "runs": "1",
        "firsts": "CASE WHEN r.attempt = 1 THEN 1 ELSE 0 END",
        "first_ok": f"CASE WHEN r.attempt = 1 AND {_PASSED} THEN 1 ELSE 0 END",
        "verified_total": f"CASE WHEN r.outcome = 'verify_failed' OR ({_PASSED} AND {_CHECKED}) THEN 1 ELSE 0 END",
        "verified_pass": f"CASE WHEN {_PASSED} AND {_CHECKED} THEN 1 ELSE 0 END",
        "started": f"CASE WHEN r.attempt = 1 AND {_OWN_TASK} THEN 1 ELSE 0 END",
        "input_tokens": "COALESCE(r.input_tokens, 0)", "output_tokens": "COALESCE(r.output_tokens, 0)",
        "cost_usd": "COALESCE(r.cost_usd, 0)", "duration_s": _RUN_DURATION,
        **{f"f_{c}": _failure(c) for c in FAILURE_CLASSES},
        **{f"d{i}": _in_bucket(_RUN_DURATION, i) for i in range(BUCKETS)},
    }
    return frm, cols


#: who is credited with a done task or a review: a race's picked attempt (its profile, and the
#: model its own task ran with), else the task's last worker run; nobody ('') when neither
_CREDITED_PROFILE = ("CASE WHEN a.task_id IS NOT NULL THEN a.profile WHEN r.id IS NULL THEN '' "
                     "ELSE COALESCE(r.profile, t.assignee, '') END")
_CREDITED_MODEL = ("CASE WHEN a.task_id IS NOT NULL THEN COALESCE(wt.model, a.model, p.model, '') "
                   "WHEN r.id IS NULL THEN '' ELSE COALESCE(t.model, p.model, '') END")
_PICKED = ("LEFT JOIN attempts a ON a.task_id = t.id AND a.picked = 1 "
           "LEFT JOIN tasks wt ON wt.id = a.attempt_task_id "
           "LEFT JOIN profiles p ON p.name = COALESCE(a.profile, r.profile, t.assignee)")


def _done_source(dialect: str) -> tuple[str, dict[str, str]]:
    last = (f"(SELECT MAX(x.id) FROM task_runs x WHERE x.task_id = t.id AND x.synthetic = 0 AND {_WORKER_RUN})")
    frm = f"tasks t LEFT JOIN task_runs r ON r.id = {last} {_PICKED}"
    cols = {
        "board": "t.board", "day": _day(dialect, "t.completed_at"),
        "profile": _CREDITED_PROFILE, "model": _CREDITED_MODEL,
        "done": "1", "started": "CASE WHEN r.id IS NULL THEN 1 ELSE 0 END",
        **{f"c{i}": _in_bucket(_CYCLE, i) for i in range(BUCKETS)},
    }
    return frm, cols


def _run_done_source(dialect: str) -> tuple[str, dict[str, str]]:
    """A run that closed and made its task done in the same transaction: both in one row (the
    run is the task's last worker run, and both happened at the same moment)."""
    frm, cols = _run_source(dialect)
    own = f"CASE WHEN {_OWN_TASK} THEN 1 ELSE 0 END"
    return frm, {**cols, "done": own, **{f"c{i}": f"{own} * {_in_bucket(_CYCLE, i)}" for i in range(BUCKETS)}}


def _review_source(dialect: str) -> tuple[str, dict[str, str]]:
    frm = f"reviews v LEFT JOIN task_runs r ON r.id = v.run_id LEFT JOIN tasks t ON t.id = v.task_id {_PICKED}"
    cols = {
        "board": "v.board", "day": _day(dialect, "v.created_at"),
        "profile": _CREDITED_PROFILE, "model": _CREDITED_MODEL,
        "reviewed": "1", "approved": "CASE WHEN v.verdict = 'approved' THEN 1 ELSE 0 END",
    }
    return frm, cols


def _usage_source(dialect: str) -> tuple[str, dict[str, str]]:
    frm, cols = _run_source(dialect)
    keep = {k: cols[k] for k in KEYS}
    return frm, {**keep, "input_tokens": ":d_in", "output_tokens": ":d_out", "cost_usd": ":d_cost"}


RUN, RUN_DONE, DONE, UNDONE, REVIEW, USAGE = "run", "run_done", "done", "undone", "review", "usage"
_SOURCES = {RUN: _run_source, RUN_DONE: _run_done_source, DONE: _done_source, UNDONE: _done_source,
            REVIEW: _review_source, USAGE: _usage_source}
#: the sources whose facts are taken away (one row only)
_SUBTRACTED = frozenset({UNDONE})
#: the one-row filter of each source (the hooks' statements)
_ONE = {
    RUN: "r.id = :id AND r.synthetic = 0",
    RUN_DONE: "r.id = :id AND r.synthetic = 0",
    DONE: f"t.id = :id AND {_OWN_TASK}",
    # read before the task leaves done: only a task a rebuild counts as done was counted
    UNDONE: f"t.id = :id AND {_OWN_TASK} AND t.completed_at IS NOT NULL AND t.status IN ('done', 'archived')",
    REVIEW: "v.id = (SELECT MAX(id) FROM reviews WHERE task_id = :id)",
    USAGE: "r.id = :id AND r.synthetic = 0 AND r.status = 'closed'",
}
#: every row of each source (the rebuild's statements; ``:board`` may narrow it)
_ALL = {
    RUN: "r.synthetic = 0 AND r.status = 'closed'",
    DONE: f"t.completed_at IS NOT NULL AND t.status IN ('done', 'archived') AND {_OWN_TASK}",
    REVIEW: "1 = 1",
}
_BOARD_OF = {RUN: "r.board", DONE: "t.board", REVIEW: "v.board"}
_cache: dict[tuple[str, str, bool, bool, bool], str] = {}


#: the row of a key one write adds to: on PostgreSQL its connection's (``shard``, 0021), so
#: writers of one key on several connections do not line up behind one row lock until they commit
_SHARD = {"postgresql": "CAST(mod(pg_backend_pid(), 8) AS SMALLINT)", "sqlite": "0"}


def statement(dialect: str, source: str, *, one: bool = True, board: bool = False, sharded: bool = True) -> str:
    """The upsert that adds ``source``'s facts to the rollups: of the one row ``:id`` names
    (``one``), or of every row (of board ``:board`` when ``board``). ``sharded=False``: for the
    table as migration 0018 made it, before its ``shard`` column (0021). :data:`UNDONE` takes
    the facts :data:`DONE` added away (one row only)."""
    key = (dialect, source, one, board, sharded)
    if key in _cache:
        return _cache[key]
    frm, cols = _SOURCES[source](dialect)
    where = _ONE[source] if one else _ALL[source]
    if board and not one:
        where += f" AND {_BOARD_OF[source]} = :board"
    keys = [*KEYS, "shard"] if sharded else list(KEYS)
    names = [*keys, *COUNTS]
    if one:  # at most one row: no aggregation to plan
        sign = "-" if source in _SUBTRACTED else ""
        exprs = [cols[k] for k in KEYS] + [_SHARD[dialect]] * sharded + [
            f"{sign}({cols.get(c, '0')})" if sign else cols.get(c, "0") for c in COUNTS]
        group = ""
    else:
        exprs = [cols[k] for k in KEYS] + ["0"] * sharded + [f"SUM({cols.get(c, '0')})" for c in COUNTS]
        group = f" GROUP BY {', '.join(cols[k] for k in KEYS)}"
    upsert = (f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET "
              + ", ".join(f"{c} = run_rollups.{c} + excluded.{c}" for c in COUNTS))
    sql = (f"INSERT INTO run_rollups ({', '.join(names)}) SELECT {', '.join(exprs)} FROM {frm} "
           f"WHERE {where}{group} {upsert}")
    _cache[key] = sql
    return sql


#: the pending closed runs a fold takes (``run_rollups_pending``, 0029): on PostgreSQL deleted in
#: the statement that adds them (a run another fold deletes first is skipped once that fold commits)
_PENDING = {
    "postgresql": "g AS (DELETE FROM run_rollups_pending RETURNING run_id, done)",
    "sqlite": "",
}


def fold_statements(dialect: str) -> list[str]:
    """Add every pending closed run (``run_rollups_pending``) to the rollups and delete it from
    the pending ones, as :data:`RUN` adds a run (:data:`RUN_DONE` when its close made its task
    done), in one aggregated upsert. PostgreSQL: one statement; SQLite: the upsert, then the delete."""
    key = (dialect, "fold", False, False, True)
    if key in _cache:
        return _cache[key].split(";\n")
    frm, cols = _run_source(dialect)
    own = f"CASE WHEN {_OWN_TASK} THEN 1 ELSE 0 END"
    cols = {**cols, "done": f"CASE WHEN g.done = 1 THEN {own} ELSE 0 END",
            **{f"c{i}": f"CASE WHEN g.done = 1 THEN {own} * {_in_bucket(_CYCLE, i)} ELSE 0 END" for i in range(BUCKETS)}}
    pending = "g" if dialect == "postgresql" else "run_rollups_pending g"
    frm = frm.replace("task_runs r ", f"{pending} JOIN task_runs r ON r.id = g.run_id ", 1)
    keys = [*KEYS, "shard"]
    exprs = [cols[k] for k in KEYS] + [_SHARD[dialect]] + [f"SUM({cols.get(c, '0')})" for c in COUNTS]
    upsert = (f"INSERT INTO run_rollups ({', '.join((*keys, *COUNTS))}) SELECT {', '.join(exprs)} FROM {frm} "
              f"WHERE r.synthetic = 0 GROUP BY {', '.join(cols[k] for k in KEYS)} "
              f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET "
              + ", ".join(f"{c} = run_rollups.{c} + excluded.{c}" for c in COUNTS))
    if dialect == "postgresql":
        sql = f"WITH {_PENDING[dialect]} {upsert}"
    else:
        sql = upsert + ";\nDELETE FROM run_rollups_pending"
    _cache[key] = sql
    return sql.split(";\n")


def emptied_statement(dialect: str) -> str:
    """Delete the rows (every shard) of the keys on task ``:id``'s board and completion day that
    count nothing any more (after :data:`UNDONE`): a rebuild would not make them, and a read
    would show them as groups."""
    key = (dialect, "emptied", True, True, True)
    if key not in _cache:
        where = ("board = (SELECT t.board FROM tasks t WHERE t.id = :id) "
                 f"AND day = (SELECT {_day(dialect, 't.completed_at')} FROM tasks t WHERE t.id = :id)")
        _cache[key] = (f"DELETE FROM run_rollups WHERE {where} AND (profile, model) IN ("
                       f"SELECT profile, model FROM run_rollups WHERE {where} GROUP BY profile, model HAVING "
                       + " AND ".join(f"SUM({c}) = 0" for c in COUNTS) + ")")
    return _cache[key]


def rebuild_statements(dialect: str, *, board: bool = False, sharded: bool = True) -> list[str]:
    """Delete the rollups (of ``:board``) and add every run, done task and review again (on
    PostgreSQL after fresh statistics: a plan made on none joins a million tasks row by row)."""
    delete = "DELETE FROM run_rollups" + (" WHERE board = :board" if board else "")
    # the pending closed runs (0029, after the shard of 0021) are counted by the rebuild's own statements
    pending = ["DELETE FROM run_rollups_pending" + (
        " WHERE run_id IN (SELECT id FROM task_runs WHERE board = :board)" if board else "")] * sharded
    analyze = ["ANALYZE tasks, task_runs, reviews, attempts"] if dialect == "postgresql" else []
    return [*analyze, *pending, delete, *(statement(dialect, s, one=False, board=board, sharded=sharded)
                                       for s in (RUN, DONE, REVIEW))]


def rebuild(conn: Any, dialect: str) -> None:
    """Rebuild every rollup on a SQLAlchemy connection (migration 0018's backfill: the table
    has no ``shard`` column yet)."""
    import sqlalchemy as sa

    if dialect == "postgresql":  # one pass over every run: not cut by the sessions' statement timeout
        conn.execute(sa.text("SET LOCAL statement_timeout = 0"))
    for sql in rebuild_statements(dialect, sharded=False):
        conn.execute(sa.text(sql))


__all__ = ["BUCKETS", "COUNTS", "DONE", "FAILURE_CLASSES", "KEYS", "REVIEW", "RUN", "RUN_DONE", "UNDONE", "USAGE", "bucket_bounds",
           "bucket_of", "emptied_statement", "fold_statements", "rebuild", "rebuild_statements", "statement"]
