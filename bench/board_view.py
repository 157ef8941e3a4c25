"""Read models at 100,000 tasks: the board view and a filtered list, against a bare COUNT(*).

Setup bulk-inserts the tasks (executemany on the raw connection, setup only): statuses, assignees,
priorities and a few links spread like a busy board. Timed, median of repeats:
- ``board_view``: columns by status with counts and the first 100 cards of each (target ≤ 100 ms)
- ``list_filtered``: ``list_tasks(status=…, assignee=…)`` (target ≤ 20 ms)
- ``glance``: what a woken dispatcher reads before deciding on a pass
  (``kernel.dispatching.glance``: ready work, lapsed claims, its running tasks, reviews/triage/races)
- baseline: one pass over the table (``SELECT COUNT(*), SUM(priority) FROM tasks``), same path

    python bench/board_view.py [--n 100000] [--repeats 15] [--backend sqlite|postgres]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agentboard
from agentboard.kernel import dispatching, queries

STATUS_MIX = [("done", 55), ("todo", 20), ("ready", 10), ("archived", 8), ("blocked", 3), ("review", 2),
              ("triage", 1), ("running", 1)]
ASSIGNEES = [f"agent-{i}" for i in range(20)] + [None]


def populate(db: Any, board: str, n: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    statuses = [s for s, w in STATUS_MIX for _ in range(w)]
    now = time.time()
    rows = []
    for i in range(n):
        status = rng.choice(statuses)
        assignee = rng.choice(ASSIGNEES) if status != "ready" else rng.choice(ASSIGNEES[:-1])
        rows.append({
            "id": f"t_{i:08x}", "board": board, "title": f"task number {i} about {rng.choice(['api', 'ui', 'db'])}",
            "body": "", "assignee": assignee, "status": status, "priority": rng.choice((0, 0, 0, 1, 2, 5)),
            "created_at": now - n + i, "updated_at": now - n + i,
            "current_run_id": None,
        })

    def _w(tx: Any) -> None:
        tx.executemany(
            "INSERT INTO tasks (id, board, title, body, assignee, status, priority, created_at, updated_at, "
            "current_run_id) VALUES (:id, :board, :title, :body, :assignee, :status, :priority, :created_at, "
            ":updated_at, :current_run_id)",
            rows,
        )
        links = [{"p": f"t_{i:08x}", "c": f"t_{i + 1:08x}", "b": board, "now": now} for i in range(0, n - 1, 7)]
        tx.executemany("INSERT INTO task_links (parent_id, child_id, board, created_at) VALUES (:p, :c, :b, :now)", links)
        comments = [{"t": f"t_{i:08x}", "b": board, "now": now} for i in range(0, n, 11)]
        tx.executemany(
            "INSERT INTO task_comments (task_id, board, author, body, kind, created_at) "
            "VALUES (:t, :b, 'someone', 'a comment', 'comment', :now)", comments)

    db.write(_w)
    if db.dialect == "postgresql":
        # what autovacuum does on a live server after a bulk load: statistics, and the
        # visibility map that lets counts read the index alone
        with db._raw() as conn:
            conn.autocommit = True
            conn.execute("VACUUM ANALYZE")
            conn.autocommit = False
    else:
        db.write(lambda tx: tx.execute("ANALYZE"))


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm the caches once
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    args = ap.parse_args(argv)

    folder = Path(tempfile.mkdtemp(prefix="ab-bench-view-"))
    try:
        if args.backend == "sqlite":
            result = run(agentboard.connect(str(folder / "home")), args)
        else:
            sys.path.insert(0, str(Path(__file__).parent))
            from kernel import fresh_pg_database

            with fresh_pg_database() as url:
                result = run(agentboard.connect(url), args)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(result))
    print(f"\nboard view benchmark, {args.backend}, {args.n:,} tasks, median of {args.repeats}", file=sys.stderr)
    for key in ("baseline_scan_ms", "board_view_ms", "list_filtered_ms", "glance_ms"):
        print(f"  {key:<22}{result[key]:>9.2f} ms", file=sys.stderr)
    print(f"  targets: board_view ≤ {result['targets']['board_view_ms']} ms, "
          f"list_filtered ≤ {result['targets']['list_filtered_ms']} ms", file=sys.stderr)
    return 0


def run(client: Any, args: argparse.Namespace) -> dict[str, Any]:
    db = client.db
    start = time.perf_counter()
    populate(db, "default", args.n)
    setup_s = time.perf_counter() - start
    view = queries.board_view(db, "default")
    assert view["total"] > 0.8 * args.n and all(len(c["tasks"]) <= 100 for c in view["columns"])
    filtered = queries.list_tasks(db, "default", status="todo", assignee="agent-3")
    assert filtered and all(t["assignee"] == "agent-3" and t["status"] == "todo" for t in filtered)
    base = median_ms(lambda: db.read(lambda tx: tx.one("SELECT COUNT(*) AS n, SUM(priority) AS p FROM tasks")),
                     args.repeats)
    bv = median_ms(lambda: queries.board_view(db, "default"), args.repeats)
    lf = median_ms(lambda: queries.list_tasks(db, "default", status="todo", assignee="agent-3"), args.repeats)
    gl = median_ms(lambda: dispatching.glance(db, "host-1", unrecorded=db.dialect == "sqlite"), args.repeats)
    client.close()
    return {
        "backend": args.backend,
        "tasks": args.n,
        "setup_s": round(setup_s, 2),
        "baseline_scan_ms": round(base, 3),
        "board_view_ms": round(bv, 3),
        "list_filtered_ms": round(lf, 3),
        "glance_ms": round(gl, 3),
        "ratios": {"board_view": round(bv / base, 2), "list_filtered": round(lf / base, 2),
                   "glance": round(gl / base, 3)},
        "targets": {"board_view_ms": 100, "list_filtered_ms": 20},
    }


if __name__ == "__main__":
    raise SystemExit(main())
