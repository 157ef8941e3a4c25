"""Metrics and structured logs on the hot paths, and the cost of a scrape on a large board.

1. Throughput (``bench/throughput.py``'s workload: one-line shell workers writing
   ``.board/result.json``, ``max_parallel`` 8, a dispatcher in this process) and dispatch
   latency (``bench/dispatch_latency.py``'s: a task made ready from another connection until its
   worker exists), each with metrics **on** (the per-process metrics observed, the log at
   ``info`` as JSON lines to a file) and **off** (``metrics = false``, the log at ``warning``,
   unformatted), interleaved on,off,off,on,... in one run on the same machine, after one
   unmeasured warm-up of each mode (imports, first compilations). Reports the ratio on/off (goal
   >= 0.97 for throughput; latency p50 off/on) and, less disturbed by other programs on the
   machine than wall time, the CPU time this process (the dispatcher's threads) spent per task
   while draining: off/on.
2. ``GET /metrics`` on a board of ``--tasks`` tasks (default 1,000,000) bulk-inserted into the
   database directly (rows as the kernel writes them; PostgreSQL's count triggers fire), spread
   over four boards and every status as on a long-lived board (95 % done or archived): the median of ``--scrapes`` scrapes over HTTP (goal <= 100 ms).

    python bench/metrics.py [--rounds 3] [--tp-tasks 300] [--lat-n 60] [--tasks 1000000] [--pg URL] [--no-pg]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _shared import DEFAULT_PG, drop_pg, fresh_pg, load_average

WORKER = "sh -c " + shlex.quote("echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json")
#: a long-lived board: most tasks finished (per mille of the tasks in each status)
MIX = (("done", 700), ("archived", 250), ("todo", 20), ("ready", 10), ("blocked", 10), ("triage", 5),
       ("review", 4), ("running", 1))
STATUSES = [s for s, k in MIX for _ in range(k)]


def _mode(on: bool, log_file: Path) -> None:
    from agentboard.observe import logs, metrics

    metrics.set_enabled(on)
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
        h.close()
        if isinstance(h, logging.StreamHandler) and h.stream not in (sys.stderr, sys.stdout):
            h.stream.close()  # the log file this function opened
    if on:
        logs.setup("json", logging.INFO, "bench", stream=log_file.open("a", encoding="utf-8"))
    else:
        root.setLevel(logging.WARNING)


def _home(url: str | None) -> tuple[Any, Path]:
    import agentboard

    home = Path(tempfile.mkdtemp(prefix="ab-bench-metrics-"))
    os.environ["AGENTBOARD_HOME"] = str(home)
    ab = agentboard.connect(url or str(home))
    ab.settings.home = home
    return ab, home


def throughput(url: str | None, n: int, parallel: int = 8) -> tuple[float, float]:
    """Tasks per second, and this process's CPU milliseconds per task, while the dispatcher
    drains ``n`` ready tasks."""
    from agentboard.dispatch.dispatcher import Dispatcher

    ab, _ = _home(url)
    ab.settings.max_parallel = parallel
    ab.add_profile("w", command=WORKER)
    board = ab.board()
    for i in range(n):
        board.create(f"task {i}", assignee="w")
    d = Dispatcher(ab.db, ab.settings)
    t0, c0 = time.perf_counter(), time.process_time()
    d.start()
    q = "SELECT COUNT(*) FROM tasks WHERE board = 'default' AND status = 'done'"
    while int(ab.db.read(lambda tx: tx.scalar(q))) < n:
        ab.db.wait_for_commit(ab.db.commit_seq, 0.05)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    d.stop()
    ab.close()
    return n / wall, cpu * 1000 / n


def latency(url: str | None, n: int) -> float:
    """The median ms from a ready task's commit (another connection) to its worker's start."""
    import agentboard
    from agentboard.dispatch.dispatcher import Dispatcher

    ab, home = _home(url)
    ab.add_profile("w", command=WORKER)
    d = Dispatcher(ab.db, ab.settings)
    started: dict[str, float] = {}
    d.on_spawn = lambda _b, task_id, _r, _pid, at: started.__setitem__(task_id, at)
    d.start()
    other = agentboard.connect(url or str(home))
    board = other.board()
    lat: list[float] = []
    try:
        for i in range(n + 5):
            t = board.create(f"task {i}", assignee="w")
            t0 = time.time()
            deadline = time.monotonic() + 30
            while t["id"] not in started and time.monotonic() < deadline:
                time.sleep(0.0005)
            if i >= 5:
                lat.append((started[t["id"]] - t0) * 1000)
            while board.show(t["id"])["status"] != "done" and time.monotonic() < deadline:
                time.sleep(0.002)
    finally:
        d.stop()
        other.close()
        ab.close()
    return statistics.median(lat)


def _fresh(pg: str | None, fn: Any, *args: Any) -> Any:
    """``fn(url, *args)`` on a new SQLite home, or a new PostgreSQL database dropped after."""
    if not pg:
        return fn(None, *args)
    url, name = fresh_pg(pg)
    try:
        return fn(url, *args)
    finally:
        drop_pg(pg, name)


def hot_paths(pg: str | None, rounds: int, tp_tasks: int, lat_n: int) -> dict[str, Any]:
    log_file = Path(tempfile.mkdtemp(prefix="ab-bench-log-")) / "log.jsonl"
    tp: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    lat: dict[bool, list[float]] = {True: [], False: []}
    for on in (True, False):  # warm-up, not measured: the first run of a process pays its imports
        _mode(on, log_file)
        _fresh(pg, throughput, min(tp_tasks, 30))
    log_file.unlink(missing_ok=True)
    for r in range(rounds):
        for on in ((True, False) if r % 2 == 0 else (False, True)):
            _mode(on, log_file)
            per_s, ms = _fresh(pg, throughput, tp_tasks)
            tp[on].append(per_s)
            cpu[on].append(ms)
            lat[on].append(_fresh(pg, latency, lat_n))
            print(f"round {r} metrics {'on ' if on else 'off'}: {per_s:.1f} tasks/s, {ms:.2f} CPU ms/task, "
                  f"latency p50 {lat[on][-1]:.1f} ms", file=sys.stderr)
    _mode(False, log_file)
    lines = sum(1 for _ in log_file.open()) if log_file.exists() else 0
    tp_on, tp_off = statistics.median(tp[True]), statistics.median(tp[False])
    cpu_on, cpu_off = statistics.median(cpu[True]), statistics.median(cpu[False])
    lat_on, lat_off = statistics.median(lat[True]), statistics.median(lat[False])
    return {
        "rounds": rounds, "tp_tasks": tp_tasks, "lat_n": lat_n,
        "throughput_on_tasks_per_s": [round(x, 1) for x in tp[True]],
        "throughput_off_tasks_per_s": [round(x, 1) for x in tp[False]],
        "throughput_ratio_on_off": round(tp_on / tp_off, 3),
        "cpu_on_ms_per_task": [round(x, 3) for x in cpu[True]],
        "cpu_off_ms_per_task": [round(x, 3) for x in cpu[False]],
        "cpu_ratio_off_on": round(cpu_off / cpu_on, 3),
        "latency_p50_on_ms": [round(x, 2) for x in lat[True]],
        "latency_p50_off_ms": [round(x, 2) for x in lat[False]],
        "latency_ratio_off_on": round(lat_off / lat_on, 3),
        "json_log_lines_written_on": lines,
        "goal_ratio": 0.97, "meets_goal": tp_on / tp_off >= 0.97 and lat_off / lat_on >= 0.97,
    }


def _bulk(db: Any, n: int, boards: int = 4) -> None:
    now = time.time()
    slugs = ["default"] + [f"b{i}" for i in range(1, boards)]

    def mk(tx: Any) -> None:
        for s in slugs[1:]:
            tx.execute("INSERT INTO boards (slug, name, created_at) VALUES (:s, :n, :now)", {"s": s, "n": s, "now": now})
    db.write(mk)
    chunk = 20_000
    for start in range(0, n, chunk):
        rows = [{"id": f"t_{i:08x}", "b": slugs[i % boards], "s": STATUSES[(i * 7919) % len(STATUSES)],
                 "now": now} for i in range(start, min(n, start + chunk))]
        db.write(lambda tx, rows=rows: tx.executemany(
            "INSERT INTO tasks (id, board, title, status, created_at, updated_at) "
            "VALUES (:id, :b, 'bulk', :s, :now, :now)", rows))


def scrape_cost(url: str | None, n: int, scrapes: int) -> dict[str, Any]:
    import httpx

    from agentboard.api.routes.health import open_app
    from agentboard.api.serve import BackgroundServer
    from agentboard.kernel import maintenance

    ab, _ = _home(url)
    t0 = time.perf_counter()
    _bulk(ab.db, n)
    load_s = time.perf_counter() - t0
    out: dict[str, Any] = {"tasks": n, "bulk_insert_s": round(load_s, 1)}
    # one client for every scrape, as Prometheus keeps its connection: ``httpx.get`` would build a
    # new client (and TLS context, ~100 ms) per request and measure that instead of the scrape
    with BackgroundServer(open_app(ab.settings, ab.db), log_config=None) as server, \
            httpx.Client(timeout=600) as client:
        t1 = time.perf_counter()
        first = client.get(server.url + "/metrics")
        out["first_scrape_ms"] = round((time.perf_counter() - t1) * 1000, 1)  # PostgreSQL: folds the deltas
        assert first.status_code == 200
        if ab.db.dialect == "postgresql":  # steady state: folded, and autovacuum has been by
            for s in ("default", "b1", "b2", "b3"):
                maintenance.compact_task_counts(ab.db, s)
            import psycopg

            with psycopg.connect(str(url).replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE task_count_deltas")
                conn.execute("ANALYZE tasks")
        times, collect = [], []
        for _ in range(scrapes):
            t1 = time.perf_counter()
            resp = client.get(server.url + "/metrics")
            times.append((time.perf_counter() - t1) * 1000)
            collect += [float(line.rsplit(" ", 1)[1]) * 1000 for line in resp.text.splitlines()
                        if line.startswith("agentboard_metrics_collect_seconds ")]
        total = sum(float(line.rsplit(" ", 1)[1]) for line in resp.text.splitlines()
                    if line.startswith("agentboard_tasks{"))
    ab.close()
    out.update({"scrape_p50_ms": round(statistics.median(times), 1), "scrape_max_ms": round(max(times), 1),
                "database_reads_p50_ms": round(statistics.median(collect), 2) if collect else None,
                "tasks_counted": int(total), "goal_ms": 100, "meets_goal": statistics.median(times) <= 100})
    assert int(total) == n, (total, n)
    return out


def _scrape(pg: str | None, n: int, scrapes: int) -> dict[str, Any]:
    if not pg:
        return scrape_cost(None, n, scrapes)
    url, name = fresh_pg(pg)
    try:
        return scrape_cost(url, n, scrapes)
    finally:
        drop_pg(pg, name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tp-tasks", type=int, default=300)
    ap.add_argument("--lat-n", type=int, default=60)
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--scrapes", type=int, default=20)
    ap.add_argument("--pg", default=DEFAULT_PG)
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--skip-hot", action="store_true", help="only the scrape cost")
    ap.add_argument("--skip-scrape", action="store_true", help="only the hot paths")
    args = ap.parse_args()
    load0 = load_average()
    results: list[dict[str, Any]] = []
    backends: list[str | None] = ([] if args.no_sqlite else [None]) + ([] if args.no_pg else ["pg"])
    for backend in backends:
        pg = args.pg if backend else None
        row: dict[str, Any] = {"backend": "postgresql" if pg else "sqlite"}
        if not args.skip_hot:
            row["hot_paths"] = hot_paths(pg, args.rounds, args.tp_tasks, args.lat_n)
        if not args.skip_scrape:
            row["scrape"] = _scrape(pg, args.tasks, args.scrapes)
        results.append(row)
        print(json.dumps(row), file=sys.stderr)
    print(json.dumps({"benchmark": "metrics", "load_average_start": load0, "load_average_end": load_average(),
                      "cpus": os.cpu_count(), "results": results}))


if __name__ == "__main__":
    main()
