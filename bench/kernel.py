"""Kernel throughput against the fsync-bound baseline measured in the same run.

Workload: N tasks created (one transaction each), linked into chains of 10, then drained in
waves (claim every ready task, heartbeat it, complete it, until all are done). A baseline of
single-row INSERT transactions through the raw driver, with the same settings on the same
filesystem, is measured first; every rate is also reported as a ratio of it.

    python bench/kernel.py --n 2000 [--backend sqlite|postgres] [--json]

Prints one JSON line on stdout and a readable table on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import agentboard
from agentboard.kernel import queries, runs, tasks

PG_URL = os.environ.get("AGENTBOARD_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
ASSIGNEE = "bench"


# -- baseline ---------------------------------------------------------------------------------


def baseline_sqlite(folder: Path, n: int) -> float:
    """Single-row INSERT transactions on a bare table: WAL, synchronous=FULL, raw sqlite3."""
    path = folder / "baseline.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL, at REAL NOT NULL)")
    for i in range(50):  # warm up
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (v, at) VALUES (?, ?)", (f"w{i}", time.time()))
        conn.execute("COMMIT")
    start = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (v, at) VALUES (?, ?)", (f"row {i}", time.time()))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return n / elapsed


def baseline_postgres(url: str, n: int) -> float:
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE bench_baseline (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)")
        conn.commit()
        for i in range(50):
            conn.execute("INSERT INTO bench_baseline (v, at) VALUES (%s, %s)", (f"w{i}", time.time()))
            conn.commit()
        start = time.perf_counter()
        for i in range(n):
            conn.execute("INSERT INTO bench_baseline (v, at) VALUES (%s, %s)", (f"row {i}", time.time()))
            conn.commit()
        elapsed = time.perf_counter() - start
        conn.execute("DROP TABLE bench_baseline")
        conn.commit()
    return n / elapsed


@contextmanager
def fresh_pg_database() -> Iterator[str]:
    import psycopg

    base, _, _ = PG_URL.rpartition("/")
    name = "bench_" + secrets.token_hex(5)
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(base + "/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- the workload -------------------------------------------------------------------------------


class Timer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.count: dict[str, int] = {}

    def run(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
        self.count[name] = self.count.get(name, 0) + 1
        return out

    def rate(self, name: str) -> float:
        return self.count.get(name, 0) / self.seconds[name] if self.seconds.get(name) else 0.0


def workload(client: Any, n: int) -> dict[str, Any]:
    db = client.db
    slug = "default"
    t = Timer()
    ids: list[str] = []
    for i in range(n):
        ids.append(t.run("create", tasks.create, db, slug, f"bench task {i}", assignee=ASSIGNEE)["id"])
    for i in range(n):
        if i % 10:
            t.run("link", links_link, db, slug, ids[i - 1], ids[i])

    # complete on a board with no backlog, while the main board holds its n waiting tasks. Each
    # timed completion does the same work as one in the first wave below: it closes the run and
    # promotes one child (the board holds only that child)
    from agentboard.kernel import boards

    boards.create(db, "empty")
    empty = Timer()
    for i in range(max(200, n // 4)):
        head = tasks.create(db, "empty", f"lonely {i}", assignee=ASSIGNEE)["id"]
        tail = tasks.create(db, "empty", f"lonely child {i}", assignee=ASSIGNEE, parents=[head])["id"]
        run = runs.claim(db, "empty", head)
        empty.run("complete", runs.complete, db, "empty", head, summary="ok", run_id=run["run_id"])
        runs.complete(db, "empty", tail, summary="ok")

    # complete with the full backlog: the first wave (every chain head) completes while the
    # board still holds ~n waiting tasks
    drain_start = time.perf_counter()
    waves = 0
    first_wave = Timer()
    while True:
        ready = [r["id"] for r in queries.list_tasks(db, slug, status="ready", limit=n)]
        if not ready:
            break
        waves += 1
        for task_id in ready:
            run = t.run("claim", runs.claim, db, slug, task_id)
            t.run("heartbeat", runs.heartbeat, db, slug, task_id, run_id=run["run_id"])
            before = t.seconds.get("complete", 0.0)
            t.run("complete", runs.complete, db, slug, task_id, summary="done", run_id=run["run_id"])
            if waves == 1:
                first_wave.seconds["complete"] = first_wave.seconds.get("complete", 0.0) + t.seconds["complete"] - before
                first_wave.count["complete"] = first_wave.count.get("complete", 0) + 1
    drain_seconds = time.perf_counter() - drain_start
    left = queries.stats(db, slug)["by_status"]
    if left["done"] != n:
        raise SystemExit(f"drain left tasks behind: {left}")
    drain_ops = t.count["claim"] + t.count["heartbeat"] + t.count["complete"]
    return {
        "ops_per_s": {
            "create": t.rate("create"),
            "link": t.rate("link"),
            "claim": t.rate("claim"),
            "heartbeat": t.rate("heartbeat"),
            "complete": t.rate("complete"),
            "drain": drain_ops / drain_seconds,
        },
        "complete_backlog_ops_per_s": first_wave.rate("complete"),
        "complete_empty_board_ops_per_s": empty.rate("complete"),
        "waves": waves,
    }


def links_link(db: Any, slug: str, parent: str, child: str) -> Any:
    from agentboard.kernel import links

    return links.link(db, slug, parent, child)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="tasks on the board (default 2000)")
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--dir", default=None, help="folder for the SQLite files (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line on stdout (the default output)")
    args = ap.parse_args(argv)

    folder = Path(tempfile.mkdtemp(prefix="ab-bench-", dir=args.dir))
    try:
        if args.backend == "sqlite":
            base = baseline_sqlite(folder, max(1000, args.n))
            client = agentboard.connect(str(folder / "home"))
            try:
                result = workload(client, args.n)
            finally:
                client.close()
        else:
            with fresh_pg_database() as url:
                base = baseline_postgres(url, max(1000, args.n))
                client = agentboard.connect(url)
                try:
                    result = workload(client, args.n)
                finally:
                    client.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    ops = {k: round(v, 1) for k, v in result["ops_per_s"].items()}
    out = {
        "backend": args.backend,
        "n": args.n,
        "baseline_txn_per_s": round(base, 1),
        "ops_per_s": ops,
        "complete_empty_board_ops_per_s": round(result["complete_empty_board_ops_per_s"], 1),
        "complete_backlog_ops_per_s": round(result["complete_backlog_ops_per_s"], 1),
        "ratios": {
            **{k: round(v / base, 3) for k, v in result["ops_per_s"].items()},
            "complete_backlog_vs_empty": round(
                result["complete_backlog_ops_per_s"] / result["complete_empty_board_ops_per_s"], 3
            ),
        },
        "targets": {"each_op": 0.6, "drain": 0.5, "complete_backlog_vs_empty": 0.8},
    }
    print(json.dumps(out))
    rows = [("baseline txn/s", f"{base:,.0f}", "1.00")]
    rows += [(f"{k} ops/s", f"{v:,.0f}", f"{out['ratios'][k]:.2f}") for k, v in ops.items()]
    rows.append(("complete (empty board)", f"{out['complete_empty_board_ops_per_s']:,.0f}", ""))
    rows.append(("complete (2k backlog)", f"{out['complete_backlog_ops_per_s']:,.0f}",
                 f"{out['ratios']['complete_backlog_vs_empty']:.2f} of empty"))
    print(f"\nkernel benchmark, {args.backend}, n={args.n}, {result['waves']} waves", file=sys.stderr)
    for name, value, ratio in rows:
        print(f"  {name:<26}{value:>12}  {ratio}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
