"""Insights: which profiles and models get tasks done, at what cost, and how a board flows.

Everything is read from ``run_rollups`` (``store/rollups.py``), which this module keeps: it
subscribes to the kernel's hooks and adds one row's worth of facts, in the transaction that
finishes a task (``task_done``), takes a task out of done (``task_undone``: its done is taken
away again), records a review verdict (``reviewed``) or learns a closed run's usage late
(``run_usage``) — one upsert each, sent unread on PostgreSQL. A run's close (``run_closed``, the
busiest of them: every completion) only appends the run to ``run_rollups_pending``, a narrow
row; a fold adds the pending runs in one aggregated statement (:func:`fold`): every read folds
first, so what it shows is exact, and a running dispatcher folds now and then. A read sums a few
rows per day, so its cost does not grow with the number of tasks or runs. Races entered and won
come from the ``attempts`` table (a few rows per race).

Percentiles (durations, cycle times) are estimated from the rollups' bucketed histograms: the
bucket holding the rank, and a position inside it on a log scale (within a factor of 2, usually
much closer). ``docs/insights.md`` says what every number means.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from ..domain import model
from ..domain.errors import InvalidInput
from ..store import rollups
from ..store.engine import Database, Row, Tx
from . import hooks
from .common import require_board

By = Literal["profile", "model", "board"]
BYS: tuple[str, ...] = ("profile", "model", "board")
DAY = 86400


# -- keeping the rollups (hook handlers, in the caller's transaction) --------------------------------


def _add(tx: Tx, source: str, ident: Any, extra: dict[str, Any] | None = None) -> None:
    tx.execute(rollups.statement(tx.db.dialect, source), {"id": ident, **(extra or {})})


#: the server-side completion that adds a worker's closed run (and its task done with it) to the
#: rollups as these handlers do (migration 0027, ``kernel.runs.completion``)
PG_COMPLETION = "agentboard_complete_running_json"


@hooks.on("run_closed")
@hooks.mirrored(PG_COMPLETION)
def run_closed_in(tx: Tx, run_id: int, *, done: bool = False) -> None:
    """A run closed (``done``: and made its task done): appended to the pending runs, which a
    fold adds to the rollups (:func:`fold_in`) with its outcome, attempt, usage and duration as
    they are then (and its task's done and cycle time)."""
    tx.execute("INSERT INTO run_rollups_pending (run_id, done) VALUES (:id, :d)", {"id": int(run_id), "d": int(done)})


def _take_pending(tx: Tx, where: str, params: dict[str, Any]) -> bool:
    """Add the pending runs ``where`` selects to the rollups now, one by one, in the caller's
    transaction (before a change a fold would otherwise read wrongly); True if any was pending.
    A fold that deleted one of them first counted it as it was before this transaction."""
    taken = tx.all(f"DELETE FROM run_rollups_pending WHERE {where} RETURNING run_id, done", params)
    for row in taken:
        _add(tx, rollups.RUN_DONE if row["done"] else rollups.RUN, int(row["run_id"]))
    return bool(taken)


def add_pending_of_task_in(tx: Tx, task_id: str) -> bool:
    """Add the task's pending runs to the rollups now (before its runs change or go: a purge, a
    done task leaving done); True if any was pending."""
    return _take_pending(tx, "run_id IN (SELECT id FROM task_runs WHERE task_id = :id)", {"id": task_id})


@hooks.on("task_done")
@hooks.mirrored(PG_COMPLETION)
def task_done_in(tx: Tx, board: str, task_id: str) -> None:
    """A task reached done: counted for its last worker run's profile and model, with its cycle time."""
    _add(tx, rollups.DONE, task_id)


@hooks.on("task_undone")
def task_undone_in(tx: Tx, board: str, task_id: str) -> None:
    """A done task is about to leave done (reopened, or restored from the archive): its done and
    cycle time are taken away from where :func:`task_done_in` (or the fold of the run that made
    it done) added them (done again, it counts once)."""
    add_pending_of_task_in(tx, task_id)
    _add(tx, rollups.UNDONE, task_id)
    tx.execute(rollups.emptied_statement(tx.db.dialect), {"id": task_id})


@hooks.on("reviewed")
def reviewed_in(tx: Tx, board: str, task_id: str, verdict: str) -> None:
    """A review verdict: counted for the reviewed run's profile and model."""
    _add(tx, rollups.REVIEW, task_id)


@hooks.on("run_usage")
def run_usage_in(tx: Tx, run_id: int, input_tokens: int, output_tokens: int, cost_usd: float) -> None:
    """Usage learned after a run closed: added on the day the run closed (a run still pending is
    added now, with its usage as it now is)."""
    if _take_pending(tx, "run_id = :id", {"id": int(run_id)}):
        return
    _add(tx, rollups.USAGE, int(run_id), {"d_in": int(input_tokens), "d_out": int(output_tokens),
                                           "d_cost": float(cost_usd)})


def fold_in(tx: Tx) -> None:
    """Add every pending closed run to the rollups (``store.rollups.fold_statements``)."""
    if tx.db.dialect == "postgresql":  # runs piled up while nothing folded: not cut by the statement timeout
        tx.execute("SET LOCAL statement_timeout = 0")
    for sql in rollups.fold_statements(tx.db.dialect):
        tx.execute(sql)


def fold(db: Database) -> bool:
    """:func:`fold_in` in a transaction of its own, when any run is pending (a read first: no
    write when none is); True if it folded."""
    if db.read(lambda tx: tx.scalar("SELECT run_id FROM run_rollups_pending LIMIT 1")) is None:
        return False
    db.write(fold_in)
    return True


def rebuild_in(tx: Tx, board: str | None = None) -> None:
    """Rebuild the rollups (of one board, or all) from the runs, tasks and reviews recorded."""
    params = {"board": board} if board else {}
    if tx.db.dialect == "postgresql":  # one pass over every run: not cut by the statement timeout
        tx.execute("SET LOCAL statement_timeout = 0")
    for sql in rollups.rebuild_statements(tx.db.dialect, board=board is not None):
        tx.execute(sql, params)


def rebuild(db: Database, board: str | None = None) -> None:
    """:func:`rebuild_in` in a transaction of its own."""
    db.write(rebuild_in, board)


# -- reading --------------------------------------------------------------------------------------------


def since_days(value: str | int | None) -> int | None:
    """``--since``: a number of whole days (``7d``, ``2w``, ``48h`` → 2, a bare number of days);
    None for all time."""
    if value is None or value == "" or value == "all":
        return None
    if isinstance(value, int):
        days = value
    else:
        text = str(value).strip().lower()
        if text.isdigit():
            days = int(text)
        elif text.endswith("w") and text[:-1].strip().isdigit():
            days = int(text[:-1]) * 7
        else:
            try:
                seconds = model.duration(text) or 0
            except InvalidInput:
                raise InvalidInput(f"invalid since {value!r}: use a number of days such as 7d, 2w or 30d") from None
            days = math.ceil(seconds / DAY)
    if days <= 0:
        raise InvalidInput(f"invalid since {value!r}: a window of at least one day, such as 7d")
    if days > 36600:
        raise InvalidInput(f"invalid since {value!r}: at most 36600 days")
    return days


def day_iso(day: int) -> str:
    return datetime.fromtimestamp(day * DAY, tz=UTC).strftime("%Y-%m-%d")


def percentile(hist: list[int], q: float) -> float | None:
    """The ``q`` quantile (0..1) of a bucketed histogram (``store/rollups.py``'s buckets): the
    bucket holding the rank, and the position inside it on a log scale (linear in bucket 0)."""
    n = sum(hist)
    if n <= 0:
        return None
    rank = q * n
    seen = 0
    for i, k in enumerate(hist):
        if k <= 0:
            continue
        if seen + k >= rank:
            lo, hi = rollups.bucket_bounds(i)
            frac = min(1.0, max(0.0, (rank - seen) / k))
            if hi is None:
                return lo
            if i == 0:
                return lo + (hi - lo) * frac
            return float(lo * (hi / lo) ** frac)
        seen += k
    lo, _ = rollups.bucket_bounds(len(hist) - 1)  # pragma: no cover
    return lo  # pragma: no cover


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def _per(total: float, done: int) -> float | None:
    return total / done if done else None


_SUMS = ", ".join(f"SUM({c}) AS {c}" for c in rollups.COUNTS)


def _window(since: int | None, now: float) -> tuple[int | None, int]:
    today = int(now // DAY)
    return (today - since + 1 if since else None), today


def _group_out(key: str, r: Row, races: dict[str, tuple[int, int]],
               stopped: dict[str, tuple[int, int]] | None = None) -> Row:
    n = {c: (float(r[c] or 0) if c in ("cost_usd", "duration_s") else int(r[c] or 0)) for c in rollups.COUNTS}
    # runs a race stopped (another attempt won, or the race was blocked or archived): no failure of
    # the agent, nor a first try that failed — taken out of the first attempts and of ``other``
    runs_stopped, firsts_stopped = (stopped or {}).get(key, (0, 0))
    n["firsts"] = max(0, int(n["firsts"]) - firsts_stopped)
    n["f_other"] = max(0, int(n["f_other"]) - runs_stopped)
    durations = [int(n[f"d{i}"]) for i in range(rollups.BUCKETS)]
    tokens = int(n["input_tokens"]) + int(n["output_tokens"])
    entered, won = races.get(key, (0, 0))
    done = int(n["done"])
    return {
        "key": key,
        "runs": int(n["runs"]),
        "tasks_done": done,
        "first_attempts": int(n["firsts"]),
        "first_attempt_success_rate": _rate(int(n["first_ok"]), int(n["firsts"])),
        "verifications": int(n["verified_total"]),
        "verification_pass_rate": _rate(int(n["verified_pass"]), int(n["verified_total"])),
        "reviews": int(n["reviewed"]),
        "review_approval_rate": _rate(int(n["approved"]), int(n["reviewed"])),
        "races_entered": entered,
        "races_won": won,
        "duration_p50_s": percentile(durations, 0.5),
        "duration_p90_s": percentile(durations, 0.9),
        "input_tokens": int(n["input_tokens"]),
        "output_tokens": int(n["output_tokens"]),
        "cost_usd": round(float(n["cost_usd"]), 6),
        "tokens_per_done_task": _per(tokens, done),
        "cost_per_done_task": _per(float(n["cost_usd"]), done),
        "failures": {c: int(n[f"f_{c}"]) for c in rollups.FAILURE_CLASSES if n[f"f_{c}"]},
    }


def _races(tx: Tx, board: str, by: str, first_day: int | None) -> dict[str, tuple[int, int]]:
    """``{profile or model: (attempts entered, attempts picked)}`` on the board: the attempts
    that ran (in the window: that started in it)."""
    if by == "board":
        return {}
    # the model an attempt ran with: its own task's (the race's entry or the race's model), else its profile's
    # (looked up by key per attempt: a race is a few rows, the board's tasks may be millions)
    key = "a.profile" if by == "profile" else (
        "COALESCE((SELECT t.model FROM tasks t WHERE t.id = a.attempt_task_id), a.model, "
        "(SELECT p.model FROM profiles p WHERE p.name = a.profile), '')")
    # an attempt enters when its first run starts: one that never ran (its race archived or
    # blocked first: cancelled, no start) counts nowhere, all time as in a window
    where = "a.board = :b AND a.started_at >= :since"
    rows = tx.all(
        f"SELECT {key} AS k, COUNT(*) AS entered, SUM(CASE WHEN a.picked = 1 THEN 1 ELSE 0 END) AS won "
        f"FROM attempts a WHERE {where} GROUP BY {key}",
        {"b": board, "since": (first_day or 0) * DAY})
    return {str(r["k"] or ""): (int(r["entered"] or 0), int(r["won"] or 0)) for r in rows}


#: the outcome of a race attempt's run that its race stopped (``kernel.races``)
STOPPED = "stopped"


def _stopped(tx: Tx, board: str, by: str, first_day: int | None) -> dict[str, tuple[int, int]]:
    """``{profile or model: (runs stopped by their race, of them first attempts)}`` on the board,
    keyed as the rollups key a run (in the window: closed in it). Found through the ``attempts``
    table (a few rows per race) and each attempt's runs, by task."""
    key = "COALESCE(r.profile, t.assignee, '')" if by == "profile" else "COALESCE(t.model, p.model, '')"
    where = "a.board = :b AND r.outcome = :o AND r.status = 'closed' AND r.synthetic = 0"
    if first_day is not None:
        where += " AND COALESCE(r.ended_at, r.started_at) >= :since"
    rows = tx.all(
        f"SELECT {key} AS k, COUNT(*) AS n, SUM(CASE WHEN r.attempt = 1 THEN 1 ELSE 0 END) AS firsts "
        "FROM attempts a JOIN task_runs r ON r.task_id = a.attempt_task_id LEFT JOIN tasks t ON t.id = r.task_id "
        f"LEFT JOIN profiles p ON p.name = COALESCE(r.profile, t.assignee) WHERE {where} GROUP BY {key}",
        {"b": board, "o": STOPPED, "since": (first_day or 0) * DAY})
    return {str(r["k"] or ""): (int(r["n"] or 0), int(r["firsts"] or 0)) for r in rows}


def _by_group(tx: Tx, board: str, by: str, first_day: int | None) -> list[Row]:
    col = "profile" if by == "profile" else "model"
    where = "board = :b" + (" AND day >= :d" if first_day is not None else "")
    rows = tx.all(f"SELECT {col} AS k, {_SUMS} FROM run_rollups WHERE {where} GROUP BY {col}",
                  {"b": board, "d": first_day})
    races = _races(tx, board, by, first_day)
    stopped = _stopped(tx, board, by, first_day)
    out = [_group_out(str(r["k"] or ""), r, races, stopped) for r in rows]
    seen = {g["key"] for g in out}
    empty = dict.fromkeys(rollups.COUNTS, 0)
    out += [_group_out(k, empty, races) for k in races if k not in seen]
    return sorted(out, key=lambda g: (-g["tasks_done"], -g["runs"], g["key"]))


def _board(tx: Tx, board: str, first_day: int | None, today: int) -> Row:
    cycle = ", ".join(f"SUM(c{i}) AS c{i}" for i in range(rollups.BUCKETS))
    where = "board = :b" + (" AND day >= :d" if first_day is not None else "")
    rows = tx.all(
        f"SELECT day, SUM(done) AS done, SUM(started) AS started, SUM(runs) AS runs, SUM(cost_usd) AS cost, "
        f"{cycle} FROM run_rollups WHERE {where} GROUP BY day ORDER BY day", {"b": board, "d": first_day})
    before = 0
    if first_day is not None:
        before = int(tx.scalar("SELECT COALESCE(SUM(started), 0) - COALESCE(SUM(done), 0) FROM run_rollups "
                               "WHERE board = :b AND day < :d", {"b": board, "d": first_day}) or 0)
    hist = [0] * rollups.BUCKETS
    by_day: dict[int, Row] = {}
    for r in rows:
        by_day[int(r["day"])] = r
        for i in range(rollups.BUCKETS):
            hist[i] += int(r[f"c{i}"] or 0)
    start = first_day if first_day is not None else (min(by_day) if by_day else today)
    end = max(today, max(by_day) if by_day else today)
    days: list[Row] = []
    wip = before
    for d in range(start, end + 1):
        row = by_day.get(d)
        done = int(row["done"] or 0) if row else 0
        started = int(row["started"] or 0) if row else 0
        wip += started - done
        days.append({"day": day_iso(d), "tasks_done": done, "started": started, "work_in_progress": max(wip, 0),
                     "runs": int(row["runs"] or 0) if row else 0,
                     "cost_usd": round(float(row["cost"] or 0), 6) if row else 0.0})
    histogram = []
    for i, k in enumerate(hist):
        lo, hi = rollups.bucket_bounds(i)
        histogram.append({"lo_s": lo, "hi_s": hi, "tasks": k})
    return {
        "tasks_done": sum(d["tasks_done"] for d in days),
        "runs": sum(d["runs"] for d in days),
        "cost_usd": round(sum(d["cost_usd"] for d in days), 6),
        "cycle_time_p50_s": percentile(hist, 0.5),
        "cycle_time_p90_s": percentile(hist, 0.9),
        "cycle_time_histogram": histogram,
        "days": days,
    }


@dataclass(frozen=True)
class Query:
    """What to read: grouped ``by`` profile, model or the board's days, over the last ``since``
    days (None: all time)."""

    by: str = "profile"
    since: int | None = None

    @classmethod
    def build(cls, by: str | None = None, since: str | int | None = None) -> Query:
        by = by or "profile"
        if by not in BYS:
            raise InvalidInput(f"invalid by {by!r}: use profile, model or board")
        return cls(by=by, since=since_days(since))


def read_in(tx: Tx, board: str, q: Query, *, now: float | None = None) -> Row:
    """The insights of ``board`` (see :func:`read`) inside the caller's transaction."""
    require_board(tx, board, writable=False)
    first_day, today = _window(q.since, time.time() if now is None else now)
    out: Row = {"board": board, "by": q.by, "since_days": q.since,
                "first_day": day_iso(first_day) if first_day is not None else None, "last_day": day_iso(today),
                "groups": [], "timeline": None}
    if q.by == "board":
        out["timeline"] = _board(tx, board, first_day, today)
    else:
        out["groups"] = _by_group(tx, board, q.by, first_day)
    return out


def read(db: Database, board: str, q: Query, *, now: float | None = None) -> Row:
    """Per profile or model (``q.by``): runs, tasks done, first-attempt success, verification
    pass and review approval rates, races entered and won, duration p50/p90, tokens and cost per
    done task, failure classes. Per board: tasks done, started, work in progress, runs and spend
    per day, and the cycle time's p50/p90 and histogram. The CLI's ``stats --by``, ``GET
    /api/insights`` and the dashboard's Insights page all read this. The pending closed runs are
    folded first (:func:`fold`)."""
    fold(db)
    return db.read(read_in, board, q, now=now)


__all__ = ["BYS", "Query", "add_pending_of_task_in", "day_iso", "fold", "fold_in", "percentile", "read", "read_in", "rebuild", "rebuild_in",
           "since_days"]
