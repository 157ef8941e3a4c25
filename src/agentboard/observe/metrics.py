"""Prometheus metrics (docs/metrics.md).

Two kinds:

- **board-wide**, read from the database at scrape time by :class:`DatabaseCollector` (every
  process scraping the same database reports the same values: take ``max`` or one instance, do
  not ``sum`` across instances): tasks per board and status, running workers per host, budget
  blocks, supervisor wakes, the notifier's backlog and parked targets, dispatcher pass marks;
- **per-process**, observed where they happen in this process (``sum`` them across instances;
  they start at zero when the process starts, which ``rate()`` handles): runs and their outcome,
  ready→spawn latency, run durations, tokens and cost (by the dispatcher that started the
  worker), dispatcher passes, notifier deliveries, the database pool.

The observation functions are a few dictionary lookups (the labelled children are looked up
once and kept: ``labels()`` checks and locks on every call); :func:`set_enabled` turns them off
(the ``metrics`` setting).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from . import logs

if TYPE_CHECKING:
    from ..store.engine import Database

#: the exposition's content type
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

disable_created_metrics()  # no ``*_created`` series beside each counter

#: this process's metrics (plus the standard process_* and python_* collectors)
REGISTRY = CollectorRegistry(auto_describe=True)
_ENABLED = True


def set_enabled(on: bool) -> None:
    """Turn observing on or off (off: the observation functions return at once)."""
    global _ENABLED
    _ENABLED = bool(on)


def enabled() -> bool:
    return _ENABLED


def _register_standard() -> None:
    from prometheus_client import GCCollector, PlatformCollector, ProcessCollector

    ProcessCollector(registry=REGISTRY)
    PlatformCollector(registry=REGISTRY)
    GCCollector(registry=REGISTRY)


_register_standard()

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)
_RUN_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0, 14400.0)
_PASS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

RUNS = Counter("agentboard_runs", "Runs closed, by the outcome recorded on the run (per process: the "
               "dispatcher that started the worker)", ["board", "profile", "outcome"], registry=REGISTRY)
READY_TO_SPAWN = Histogram("agentboard_ready_to_spawn_seconds", "Seconds from a task's last change while "
                           "ready to its worker's start", ["profile"], buckets=_LATENCY_BUCKETS,
                           registry=REGISTRY)
RUN_DURATION = Histogram("agentboard_run_duration_seconds", "Seconds from a worker's start to its run's "
                         "close", ["profile"], buckets=_RUN_BUCKETS, registry=REGISTRY)
TOKENS = Counter("agentboard_tokens", "Tokens the agents reported, by direction (input, output)",
                 ["profile", "model", "direction"], registry=REGISTRY)
COST = Counter("agentboard_cost_usd", "US dollars the agents reported spending", ["profile", "model"],
               registry=REGISTRY)
PASS_SECONDS = Histogram("agentboard_dispatcher_pass_seconds", "Seconds one dispatcher pass took",
                         ["host"], buckets=_PASS_BUCKETS, registry=REGISTRY)
PASSES_FAILED = Counter("agentboard_dispatcher_pass_failures", "Dispatcher passes that raised an error",
                        ["host"], registry=REGISTRY)
PASSES_SKIPPED = Counter("agentboard_dispatcher_passes_skipped", "Wake-ups of a dispatcher that skipped "
                         "their pass: nothing changed that it could act on", ["host"], registry=REGISTRY)
LAST_PASS = Gauge("agentboard_dispatcher_last_pass_timestamp_seconds", "When this process's dispatcher "
                  "last finished a pass (Unix time)", ["host"], registry=REGISTRY)
SPAWN_FAILURES = Counter("agentboard_spawn_failures", "Workers that could not be started",
                         ["board"], registry=REGISTRY)
NOTIFY_MESSAGES = Counter("agentboard_notify_messages", "Notification deliveries by this process's "
                          "notifier, by result (sent, failed)", ["result"], registry=REGISTRY)
NOTIFY_PARKED = Counter("agentboard_notify_parkings", "Targets this process's notifier parked after "
                        "repeated failures", registry=REGISTRY)

_runs_log = logging.getLogger("agentboard.runs")
_MAX_SEEN = 20_000
#: the runs observed closing, by (database URL, run id): run ids are only unique in a database
_seen: OrderedDict[tuple[str, int], None] = OrderedDict()
_seen_lock = threading.Lock()
#: the labelled children, by (metric, label values): ``labels()`` returns the same child each
#: time, after validating the values under the metric's lock
_children: dict[tuple[Any, tuple[str, ...]], Any] = {}


def _child(metric: Any, *values: str) -> Any:
    child = _children.get((metric, values))
    if child is None:
        child = _children[(metric, values)] = metric.labels(*values)
    return child


def _source(db: Database | None) -> str:
    return db.url if db is not None else ""


def _first_time(source: str, run_id: int) -> bool:
    """Whether run ``run_id`` of the database ``source`` has not been observed yet (a run is
    counted once however many paths see it close)."""
    key = (source, run_id)
    with _seen_lock:
        if key in _seen:
            return False
        _seen[key] = None
        if len(_seen) > _MAX_SEEN:
            _seen.popitem(last=False)
        return True


def _model(model: Any) -> str:
    return str(model) if model else "default"


def spawned(profile: str | None, ready_since: float | None, at: float) -> None:
    """A task's worker started (its first attempt)."""
    if not _ENABLED or ready_since is None:
        return
    _child(READY_TO_SPAWN, profile or "").observe(max(0.0, at - float(ready_since)))


def run_closed(run_id: int, board: str, task_id: str | None, profile: str | None, outcome: str | None,
               seconds: float | None, model: Any = None, usage: dict[str, Any] | None = None, *,
               db: Database | None = None) -> None:
    """A run (of the database ``db``) this process's dispatcher started has closed: logged (one
    line with its ids) and counted, once per run."""
    if not _first_time(_source(db), int(run_id)):
        return
    prof = profile or ""
    if _runs_log.isEnabledFor(logging.INFO):
        logs.info(_runs_log, "run closed: %s after %.1f s (profile %s)", outcome or "unknown", seconds or 0.0, prof,
                  extra={"board": board, "task": task_id, "run": int(run_id), "outcome": outcome})
    if not _ENABLED:
        return
    _child(RUNS, board, prof, outcome or "unknown").inc()
    if seconds is not None:
        _child(RUN_DURATION, prof).observe(max(0.0, seconds))
    if usage:
        m = _model(model)
        for direction in ("input", "output"):
            n = usage.get(f"{direction}_tokens")
            if n:
                _child(TOKENS, prof, m, direction).inc(max(0, int(n)))
        cost = usage.get("cost_usd")
        if cost:
            _child(COST, prof, m).inc(max(0.0, float(cost)))


def runs_closed(db: Database, run_ids: Iterable[int]) -> None:
    """Observe the given runs once they are closed (read from the database: their outcome,
    times, usage and model)."""
    source = _source(db)
    ids = [int(r) for r in run_ids if r is not None]
    with _seen_lock:
        ids = [r for r in ids if (source, r) not in _seen]
    if not ids or not (_ENABLED or _runs_log.isEnabledFor(logging.INFO)):
        return
    from ..kernel import monitoring

    try:
        rows = monitoring.closed_runs(db, ids)
    except Exception:  # metrics never break what they observe
        return
    for r in rows:
        seconds = (float(r["ended_at"]) - float(r["started_at"])) if r.get("ended_at") else None
        run_closed(int(r["id"]), str(r["board"]), r.get("task_id"), r.get("profile"), r.get("outcome"), seconds,
                   r.get("model"), {"input_tokens": r.get("input_tokens"), "output_tokens": r.get("output_tokens"),
                                    "cost_usd": r.get("cost_usd")}, db=db)


def spawn_failed(boards: list[str]) -> None:
    """Workers that could not be started, one board each."""
    if not _ENABLED:
        return
    for board in boards:
        _child(SPAWN_FAILURES, board).inc()


def pass_done(host: str, started: float, ok: bool = True) -> None:
    """A dispatcher pass that started at ``started`` (``time.perf_counter()``) ended."""
    if not _ENABLED:
        return
    if ok:
        _child(PASS_SECONDS, host).observe(time.perf_counter() - started)
        _child(LAST_PASS, host).set(time.time())
    else:
        _child(PASSES_FAILED, host).inc()


def pass_skipped(host: str) -> None:
    """A dispatcher woken by a change skipped its pass (nothing it could act on)."""
    if _ENABLED:
        PASSES_SKIPPED.labels(host).inc()


def notify_cycle(messages: int, failures: int, parked: int) -> None:
    """What one notifier cycle delivered."""
    if not _ENABLED:
        return
    if messages:
        _child(NOTIFY_MESSAGES, "sent").inc(messages)
    if failures:
        _child(NOTIFY_MESSAGES, "failed").inc(failures)
    if parked:
        NOTIFY_PARKED.inc(parked)


# -- read at scrape time ------------------------------------------------------------------------


class DatabaseCollector(Collector):
    """The board-wide metrics, read from ``db`` at each scrape (a handful of cheap reads; see
    :mod:`agentboard.kernel.monitoring`), and this process's connection pool on ``db``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def describe(self) -> Iterable[Metric]:
        return list(self._families().values())

    def _families(self) -> dict[str, Any]:
        g, c = GaugeMetricFamily, CounterMetricFamily
        return {
            "up": g("agentboard_database_up", "1 when the database answered this scrape, else 0"),
            "tasks": g("agentboard_tasks", "Tasks per board and status (running counts, board-wide)",
                       labels=["board", "status"]),
            "workers": g("agentboard_workers_running", "Running tasks per worker host (board-wide)",
                         labels=["host"]),
            "budget": g("agentboard_budget_blocked_tasks", "Tasks blocked by a spent budget", labels=["board"]),
            "wakes": g("agentboard_supervisor_wakes", "The supervisor's wakes per board and status",
                       labels=["board", "status"]),
            "backlog": g("agentboard_notify_backlog_subscriptions", "Subscriptions (not parked) with "
                         "events they have not been through yet", labels=["board"]),
            "parked": g("agentboard_notify_parked_targets", "Notification targets parked after repeated "
                        "failures", labels=["board"]),
            "seen": g("agentboard_dispatcher_seen_timestamp_seconds", "The last pass mark of each "
                      "dispatcher host on this database (Unix time; written at most every 15 s)",
                      labels=["host"]),
            "pool": g("agentboard_db_pool_connections", "This process's PostgreSQL connections by state "
                      "(in_use, idle)", labels=["state"]),
            "waits": c("agentboard_db_pool_waits", "Checkouts that found every connection of this "
                       "process's pool busy"),
            "wait_s": c("agentboard_db_pool_wait_seconds", "Seconds checkouts waited for a busy pool"),
            "timeouts": c("agentboard_db_pool_timeouts", "Checkouts that gave up after pg_pool_timeout"),
            "dead": c("agentboard_db_pool_dead_connections", "Idle connections found ended by the server "
                      "(a restart, a failover, a timeout) and replaced at a checkout"),
            "collect": g("agentboard_metrics_collect_seconds", "Seconds this scrape spent reading the "
                         "database"),
        }

    def collect(self) -> Iterator[Metric]:
        from ..domain import states
        from ..kernel import maintenance, monitoring

        t0 = time.perf_counter()
        f = self._families()
        db = self.db
        try:
            snap = monitoring.snapshot(db)
            for board in snap.boards:
                for status in states.STATUSES:
                    f["tasks"].add_metric([board, status], snap.tasks.get((board, status), 0))
                f["budget"].add_metric([board], snap.budget_blocked.get(board, 0))
            for host, n in sorted(snap.running.items()):
                f["workers"].add_metric([host], n)
            for (board, status), n in sorted(snap.wakes.items()):
                f["wakes"].add_metric([board, status], n)
            for board, (behind, parked) in sorted(snap.notify.items()):
                f["backlog"].add_metric([board], behind)
                f["parked"].add_metric([board], parked)
            for mark in monitoring.dispatcher_passes(db):
                f["seen"].add_metric([mark["host"]], mark["at"])
            f["up"].add_metric([], 1)
            for board in snap.fold:  # the board view folds too; a board nobody looks at is folded here
                try:
                    maintenance.compact_task_counts(db, board)
                except Exception:
                    pass
        except Exception:  # the database does not answer: say so, with this process's own
            f = self._families()
            f["up"].add_metric([], 0)
        if not _ENABLED:  # the per-process observations are off: the board-wide ones only
            for name in ("pool", "waits", "wait_s", "timeouts", "dead"):
                f.pop(name)
            f["collect"].add_metric([], time.perf_counter() - t0)
            yield from f.values()
            return
        in_use, idle = db.pool_state()
        if in_use is not None:
            f["pool"].add_metric(["in_use"], in_use)
            f["pool"].add_metric(["idle"], idle or 0)
        f["waits"].add_metric([], db.pool_waits)
        f["wait_s"].add_metric([], db.pool_wait_seconds)
        f["timeouts"].add_metric([], db.pool_timeouts)
        f["dead"].add_metric([], db.pool_dead)
        f["collect"].add_metric([], time.perf_counter() - t0)
        yield from f.values()


def render(db: Database | None) -> bytes:
    """The exposition of this process's metrics (unless observing is off, :func:`set_enabled`)
    and, with ``db``, the database's."""
    out = generate_latest(REGISTRY) if _ENABLED else b""
    if db is not None:
        reg = CollectorRegistry(auto_describe=False)
        reg.register(DatabaseCollector(db))
        out += generate_latest(reg)
    return out


def metric_families(db: Database) -> dict[str, str]:
    """Every metric family this process can expose, by name, with its type."""
    out = {}
    for reg in (REGISTRY,):
        for fam in reg.collect():
            out[fam.name] = fam.type
    for fam in DatabaseCollector(db).describe():
        out[fam.name] = fam.type
    return out
