"""Dispatch latency: from the commit that makes a task ready to the worker process existing.

A second connection (as another process would) creates ready tasks one at a time while a
started dispatcher waits; the dispatcher wakes on the change (SQLite: PRAGMA data_version poll;
PostgreSQL: LISTEN/NOTIFY), claims, prepares the workspace and starts the worker. Latency is
measured from the return of the create call to the moment ``Popen`` returned in the dispatcher.
Baseline in the same run: the bare cost of starting the same worker command with ``Popen``.

    python bench/dispatch_latency.py [--n 100] [--pg URL]

Prints a table and one JSON object (targets: p50 <= 50 ms, p99 <= 250 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _shared import DEFAULT_PG, load_average, per_backend, report

WORKER = "sh -c " + shlex.quote("echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def _status(board, task_id: str) -> str:
    d = board.show(task_id)
    return str(d.get("task", d)["status"])


def baseline(n: int, cwd: Path) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        p = subprocess.Popen(["/bin/sh", "-c", "true"], cwd=cwd, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
        out.append((time.perf_counter() - t0) * 1000)
        p.wait()
    return out


def measure(url: str | None, n: int) -> dict[str, object]:
    import agentboard
    from agentboard.dispatch.dispatcher import Dispatcher

    home = Path(tempfile.mkdtemp(prefix="ab-bench-lat-"))
    os.environ["AGENTBOARD_HOME"] = str(home)
    if url:
        os.environ["AGENTBOARD_DATABASE_URL"] = url
    else:
        os.environ.pop("AGENTBOARD_DATABASE_URL", None)
    ab = agentboard.connect(url or str(home))
    ab.settings.home = home
    ab.add_profile("w", command=WORKER)
    d = Dispatcher(ab.db, ab.settings)
    started: dict[str, float] = {}
    d.on_spawn = lambda _b, task_id, _r, _pid, at: started.__setitem__(task_id, at)
    d.start()
    other = agentboard.connect(url or str(home))  # a separate connection, like the CLI in another process
    board = other.board()
    lat: list[float] = []
    try:
        for i in range(n + 5):
            t = board.create(f"task {i}", assignee="w")
            t0 = time.time()
            deadline = time.monotonic() + 30
            while t["id"] not in started and time.monotonic() < deadline:
                time.sleep(0.0005)
            if t["id"] not in started:
                raise SystemExit(f"task {t['id']} did not start within 30 s")
            if i >= 5:  # warm-up excluded
                lat.append((started[t["id"]] - t0) * 1000)
            done_by = time.monotonic() + 30
            while _status(board, t["id"]) != "done" and time.monotonic() < done_by:
                time.sleep(0.002)
            time.sleep(0.01)
    finally:
        d.stop()
        other.close()
        ab.close()
    base = baseline(50, home)
    return {
        "backend": "postgresql" if url else "sqlite", "n": len(lat),
        "p50_ms": round(pct(lat, 50), 2), "p90_ms": round(pct(lat, 90), 2), "p99_ms": round(pct(lat, 99), 2),
        "max_ms": round(max(lat), 2), "mean_ms": round(statistics.mean(lat), 2),
        "baseline_popen_p50_ms": round(pct(base, 50), 2),
        "p50_over_baseline": round(pct(lat, 50) / max(pct(base, 50), 0.001), 1),
        "target_p50_ms": 50, "target_p99_ms": 250,
        "meets_target": pct(lat, 50) <= 50 and pct(lat, 99) <= 250,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--pg", default=DEFAULT_PG)
    ap.add_argument("--no-pg", action="store_true")
    args = ap.parse_args()
    load0 = load_average()
    results = per_backend(lambda url: measure(url, args.n), args.pg, args.no_pg)
    load = report(results, lambda r: (
        f"n={r['n']} p50={r['p50_ms']} ms p90={r['p90_ms']} ms p99={r['p99_ms']} ms max={r['max_ms']} ms "
        f"(bare Popen p50 {r['baseline_popen_p50_ms']} ms)"), load0)
    print(json.dumps({"benchmark": "dispatch_latency", "load_average_start": load0, "load_average_end": load,
                      "cpus": os.cpu_count(), "results": results}))


if __name__ == "__main__":
    main()
