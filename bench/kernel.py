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
#
# The machine's fsync rate drifts while other programs use the disk, so the baseline is not
# measured once: its transactions are interleaved with the kernel's ops (one after every other
# op), and each phase's ratio is taken against the baseline measured during that same phase.


class Baseline:
    """Single-row INSERT transactions on a bare table through the raw driver, in bursts."""

    def __init__(self, backend: str, folder: Path, url: str | None) -> None:
        self.backend = backend
        self.seconds: dict[str, float] = {}
        self.count: dict[str, int] = {}
        self.phase = "warmup"
        self._i = 0
        if backend == "sqlite":
            self.conn: Any = sqlite3.connect(folder / "baseline.db", isolation_level=None)
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = FULL")
            self.conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL, at REAL NOT NULL)")
            self._sql = "INSERT INTO t (v, at) VALUES (?, ?)"
        else:
            import psycopg

            assert url is not None
            self.conn = psycopg.connect(url)
            self.conn.execute(
                "CREATE TABLE bench_baseline (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)"
            )
            self.conn.commit()
            self._sql = "INSERT INTO bench_baseline (v, at) VALUES (%s, %s)"
        self.burst(200)

    def burst(self, k: int = 10) -> float:
        conn, sql = self.conn, self._sql
        start = time.perf_counter()
        for _ in range(k):
            self._i += 1
            if self.backend == "sqlite":
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(sql, (f"row {self._i}", time.time()))
                conn.execute("COMMIT")
            else:
                conn.execute(sql, (f"row {self._i}", time.time()))
                conn.commit()
        took = time.perf_counter() - start
        self.seconds[self.phase] = self.seconds.get(self.phase, 0.0) + took
        self.count[self.phase] = self.count.get(self.phase, 0) + k
        return took

    def rate(self, phase: str | None = None) -> float:
        if phase is None:
            secs = sum(v for k, v in self.seconds.items() if k != "warmup")
            n = sum(v for k, v in self.count.items() if k != "warmup")
            return n / secs
        return self.count[phase] / self.seconds[phase]

    def close(self) -> None:
        self.conn.close()


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
    """Per-op time; after every ``every`` ops one baseline transaction runs (outside the timed
    region), so the baseline sees the same disk conditions as the ops, op by op."""

    def __init__(self, baseline: Baseline, every: int = 2) -> None:
        self.seconds: dict[str, float] = {}
        self.count: dict[str, int] = {}
        self.baseline = baseline
        self.every = every
        self.baseline_seconds = 0.0

    def run(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
        n = self.count[name] = self.count.get(name, 0) + 1
        if n % self.every == 0:
            self.baseline_seconds += self.baseline.burst(1)
        return out

    def rate(self, name: str) -> float:
        return self.count.get(name, 0) / self.seconds[name] if self.seconds.get(name) else 0.0


def populate_backlog(db: Any, slug: str, n: int) -> None:
    """``n`` tasks already on the board before the workload (setup, bulk-inserted): done, todo and
    archived ones, none ready, so the drain below only meets them in the indexes."""
    import random

    rng = random.Random(7)
    now = time.time()
    statuses = ["done"] * 7 + ["todo"] * 2 + ["archived"]
    for start in range(0, n, 50_000):
        rows = [{"id": f"t_b{i:07x}", "board": slug, "title": f"backlog task {i}", "body": "",
                 "assignee": f"agent-{i % 20}", "status": rng.choice(statuses), "priority": rng.choice((0, 1, 2)),
                 "created_at": now - n + i, "updated_at": now - n + i} for i in range(start, min(n, start + 50_000))]

        def _w(tx: Any, rows: list[dict[str, Any]] = rows) -> None:
            tx.executemany(
                "INSERT INTO tasks (id, board, title, body, assignee, status, priority, created_at, updated_at) "
                "VALUES (:id, :board, :title, :body, :assignee, :status, :priority, :created_at, :updated_at)", rows)
        db.write(_w)
    if db.dialect == "postgresql":  # what autovacuum does on a live server after a bulk load
        with db._raw() as conn:
            conn.autocommit = True
            conn.execute("VACUUM ANALYZE tasks")
            conn.autocommit = False
    else:
        db.write(lambda tx: tx.execute("ANALYZE tasks"))


def workload(client: Any, n: int, base: Baseline, backlog: int = 0) -> dict[str, Any]:
    db = client.db
    slug = "default"
    if backlog:
        populate_backlog(db, slug, backlog)
    done_before = queries.stats(db, slug)["by_status"]["done"]
    t = Timer(base)
    ids: list[str] = []
    base.phase = "create"
    for i in range(n):
        ids.append(t.run("create", tasks.create, db, slug, f"bench task {i}", assignee=ASSIGNEE)["id"])
    base.phase = "link"
    for i in range(n):
        if i % 10:
            t.run("link", links_link, db, slug, ids[i - 1], ids[i])

    # complete with a backlog vs complete on an empty board, A/B op by op: during the first
    # drain wave (every chain head, while the board still holds its ~n waiting tasks) each
    # completion is followed by one on a board with no backlog. Both close a run and promote one
    # child, at the same moment, so they see the same disk and the same caches.
    from agentboard.kernel import boards

    boards.create(db, "empty")
    empty = Timer(base, every=10**9)

    def complete_on_empty_board(i: int) -> None:
        head = tasks.create(db, "empty", f"lonely {i}", assignee=ASSIGNEE)["id"]
        tail = tasks.create(db, "empty", f"lonely child {i}", assignee=ASSIGNEE, parents=[head])["id"]
        run = empty.run("claim", runs.claim, db, "empty", head)
        empty.run("complete", runs.complete, db, "empty", head, summary="ok", run_id=run["run_id"])
        runs.complete(db, "empty", tail, summary="ok")  # the empty board stays empty

    base.phase = "drain"
    drain_start = time.perf_counter()
    bursts_before = t.baseline_seconds
    side_seconds = 0.0
    waves = 0
    first_wave = Timer(base, every=10**9)
    while True:
        ready = [r["id"] for r in queries.list_tasks(db, slug, status="ready", limit=n)]
        if not ready:
            break
        waves += 1
        for i, task_id in enumerate(ready):
            timer = first_wave if waves == 1 else t
            run = timer.run("claim", runs.claim, db, slug, task_id)
            t.run("heartbeat", runs.heartbeat, db, slug, task_id, run_id=run["run_id"])
            timer.run("complete", runs.complete, db, slug, task_id, summary="done", run_id=run["run_id"])
            if waves == 1:
                side = time.perf_counter()
                complete_on_empty_board(i)
                side_seconds += time.perf_counter() - side
    drain_seconds = time.perf_counter() - drain_start - (t.baseline_seconds - bursts_before) - side_seconds
    left = queries.stats(db, slug)["by_status"]
    if left["done"] != n + done_before:
        raise SystemExit(f"drain left tasks behind: {left}")
    for op in ("claim", "complete"):
        t.seconds[op] += first_wave.seconds[op]
        t.count[op] += first_wave.count[op]
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
        "claim_backlog_ops_per_s": first_wave.rate("claim"),
        "claim_empty_board_ops_per_s": empty.rate("claim"),
        "backlog": backlog,
        "waves": waves,
    }


def links_link(db: Any, slug: str, parent: str, child: str) -> Any:
    from agentboard.kernel import links

    return links.link(db, slug, parent, child)


PHASE = {"create": "create", "link": "link", "claim": "drain", "heartbeat": "drain", "complete": "drain",
         "drain": "drain"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="tasks on the board (default 2000)")
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--backlog", type=int, default=0,
                    help="tasks bulk-inserted on the board before the workload (done/todo/archived; default 0)")
    ap.add_argument("--dir", default=None, help="folder for the SQLite files (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="JSON on stdout (always printed; the table goes to stderr)")
    args = ap.parse_args(argv)

    folder = Path(tempfile.mkdtemp(prefix="ab-bench-", dir=args.dir))
    try:
        if args.backend == "sqlite":
            base = Baseline("sqlite", folder, None)
            client = agentboard.connect(str(folder / "home"))
            try:
                result = workload(client, args.n, base, args.backlog)
            finally:
                client.close()
                base.close()
        else:
            with fresh_pg_database() as url:
                base = Baseline("postgres", folder, url)
                client = agentboard.connect(url)
                try:
                    result = workload(client, args.n, base, args.backlog)
                finally:
                    client.close()
                    base.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    ops = result["ops_per_s"]
    ratios = {k: round(v / base.rate(PHASE[k]), 3) for k, v in ops.items()}
    backlog = result["complete_backlog_ops_per_s"] / base.rate("drain")
    empty = result["complete_empty_board_ops_per_s"] / base.rate("drain")
    ratios["complete_backlog_vs_empty"] = round(backlog / empty, 3)
    ratios["claim_backlog_vs_empty"] = round(result["claim_backlog_ops_per_s"] / result["claim_empty_board_ops_per_s"], 3)
    out = {
        "backend": args.backend,
        "n": args.n,
        "baseline_txn_per_s": round(base.rate(), 1),
        "ops_per_s": {k: round(v, 1) for k, v in ops.items()},
        "complete_empty_board_ops_per_s": round(result["complete_empty_board_ops_per_s"], 1),
        "complete_backlog_ops_per_s": round(result["complete_backlog_ops_per_s"], 1),
        "claim_empty_board_ops_per_s": round(result["claim_empty_board_ops_per_s"], 1),
        "claim_backlog_ops_per_s": round(result["claim_backlog_ops_per_s"], 1),
        "backlog": args.backlog,
        "baseline_by_phase": {k: round(base.rate(k), 1) for k in ("create", "link", "drain")},
        "ratios": ratios,
        "targets": {"each_op": 0.6, "drain": 0.5, "complete_backlog_vs_empty": 0.8},
    }
    print(json.dumps(out))
    print(f"\nkernel benchmark, {args.backend}, n={args.n}, {result['waves']} waves "
          "(ratios against the baseline measured in the same phase)", file=sys.stderr)
    print(f"  {'baseline txn/s':<28}{out['baseline_txn_per_s']:>10,.0f}  "
          + " ".join(f"{k}={v:,.0f}" for k, v in out["baseline_by_phase"].items()), file=sys.stderr)
    for k, v in ops.items():
        target = 0.5 if k == "drain" else 0.6
        print(f"  {k + ' ops/s':<28}{v:>10,.0f}  {ratios[k]:.2f} (target {target})", file=sys.stderr)
    print(f"  {'complete, empty board':<28}{out['complete_empty_board_ops_per_s']:>10,.0f}", file=sys.stderr)
    size = f"{args.n + args.backlog:,} tasks"
    print(f"  {'complete, board of ' + size:<28}{out['complete_backlog_ops_per_s']:>10,.0f}  "
          f"{ratios['complete_backlog_vs_empty']:.2f} of empty (target 0.8)", file=sys.stderr)
    print(f"  {'claim, empty board':<28}{out['claim_empty_board_ops_per_s']:>10,.0f}", file=sys.stderr)
    print(f"  {'claim, board of ' + size:<28}{out['claim_backlog_ops_per_s']:>10,.0f}  "
          f"{ratios['claim_backlog_vs_empty']:.2f} of empty", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
