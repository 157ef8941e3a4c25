"""The supervisor's wakes: what the hook adds to a transition, coalescing, and the sweep.

Workload (SQLite by default, ``--backend postgres`` for a scratch database on the local server):

- two boards of ``--n`` tasks each (default 10,000; bulk-inserted, setup only): ``plain`` has no
  supervisor, ``supervised`` names one;
- ``--blocks`` blocks (default 1,000) arrive in ``--bursts`` bursts on each board, over
  ``--subjects`` distinct tasks (each blocked, unblocked by a person, blocked again...). The same
  block + unblock runs on both boards, op by op (A/B, so the fsync rate drifting on a shared
  disk hits both alike). After each burst the dispatcher's step runs on the supervised board
  (:func:`kernel.supervision.take_due`: the cheap check, then one supervision task per subject);
  the supervision tasks are left running, as a busy supervisor would.
- Reported: ``wakes_enqueued`` (rows), ``spawns`` (supervision tasks the dispatcher would
  start; must equal ``distinct_subjects``, not the number of block events),
  ``hook_ratio`` = time of a supervised block+unblock / the same on the plain board (target
  ≤ 1.5), ``take_due_ms`` per burst, and ``sweep_ms`` at ``--sweep-n`` tasks (default 100,000;
  median of repeats; target ≤ 500 ms; ``first_sweep_ms``: the first, which enqueues a wake per
  stuck task) against ``baseline_scan_ms`` (one ``COUNT(*)`` pass).

    python bench/supervisor.py [--n 10000] [--blocks 1000] [--bursts 10] [--subjects 250] [--backend sqlite|postgres]
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _shared import DEFAULT_PG, drop_pg, fresh_pg, load_average  # noqa: E402

import agentboard  # noqa: E402
from agentboard.kernel import boards, profiles, supervision, tasks  # noqa: E402

STATUS_MIX = [("done", 55), ("todo", 20), ("ready", 10), ("archived", 8), ("blocked", 3), ("review", 2),
              ("triage", 1), ("running", 1)]


def populate(db: Any, board: str, prefix: str, n: int, seed: int = 1, old: float = 0.0) -> list[str]:
    """Bulk-insert ``n`` tasks; returns the ids of the todo ones (what the workload blocks)."""
    rng = random.Random(seed)
    statuses = [s for s, w in STATUS_MIX for _ in range(w)]
    now = time.time() - old
    rows = []
    for i in range(n):
        status = rng.choice(statuses)
        rows.append({"id": f"t_{prefix}{i:06x}", "board": board, "title": f"task {i}", "body": "",
                     "assignee": rng.choice(["a", "b", "c", None]) if status != "ready" else "a",
                     "status": status, "priority": 0, "created_at": now - n + i, "updated_at": now - n + i})

    def _w(tx: Any) -> None:
        tx.executemany(
            "INSERT INTO tasks (id, board, title, body, assignee, status, priority, created_at, updated_at) "
            "VALUES (:id, :board, :title, :body, :assignee, :status, :priority, :created_at, :updated_at)", rows)

    db.write(_w)
    return [r["id"] for r in rows if r["status"] == "todo"]


def analyze(db: Any) -> None:
    if db.dialect == "postgresql":
        with db._raw() as conn:
            conn.execute("ANALYZE")
            conn.commit()
    else:
        db.write(lambda tx: tx.execute("ANALYZE"))


def measure(url: str | None, args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="ab_bench_sup_"))
    try:
        client = agentboard.connect(url or str(tmp), block_loop_limit=10**6)
        db = client.db
        client.settings.home = tmp
        for name in ("sup", "a", "b", "c"):
            profiles.add(db, name, command="true")
        for slug in ("plain", "supervised", "sweep"):
            boards.create(db, slug)
        supervision.set_supervisor(db, "supervised", "sup")
        supervision.set_supervisor(db, "sweep", "sup")
        boards.update(db, "supervised", settings={"supervisor": "sup", "block_loop_limit": 100_000})
        plain_ids = populate(db, "plain", "p", args.n, seed=1)
        sup_ids = populate(db, "supervised", "s", args.n, seed=1)
        analyze(db)
        rng = random.Random(7)
        k = min(args.subjects, len(plain_ids))
        picks = [rng.randrange(k) for _ in range(args.blocks)]
        per_burst = max(1, args.blocks // args.bursts)
        t_plain: list[float] = []
        t_sup: list[float] = []
        take_ms: list[float] = []
        spawns = 0
        blocked_now: set[int] = set()
        for start in range(0, args.blocks, per_burst):
            for i in picks[start:start + per_burst]:
                for ids, times, board in ((plain_ids, t_plain, "plain"), (sup_ids, t_sup, "supervised")):
                    t0 = time.perf_counter()
                    if i in blocked_now:  # a person unblocks it, then it is blocked again
                        tasks.unblock(db, board, ids[i], actor="alice")
                    tasks.block(db, board, ids[i], "waits for a decision", actor="worker")
                    times.append(time.perf_counter() - t0)
                blocked_now.add(i)
            t0 = time.perf_counter()
            out = supervision.take_due(db, "supervised")
            take_ms.append((time.perf_counter() - t0) * 1000)
            spawns += len(out["tasks"])
        wakes = db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM supervisor_wakes WHERE board = 'supervised'"))
        distinct = len(set(picks))
        block_events = db.read(lambda tx: tx.scalar(
            "SELECT COUNT(*) FROM task_events WHERE board = 'supervised' AND kind = 'blocked'"))

        # the sweep at --sweep-n tasks (a third board, its tasks a day old: blocked ones are stuck)
        populate(db, "sweep", "w", args.sweep_n, seed=2, old=86400)
        analyze(db)
        now = time.time()

        def sweep() -> None:
            found = supervision.sweep_candidates(db, "sweep", now)
            supervision.sweep_enqueue(db, "sweep", {"stuck": found["stuck"], "unrunnable": found["unrunnable"]})

        def scan() -> None:
            db.read(lambda tx: tx.one("SELECT COUNT(*), SUM(priority) FROM tasks"))

        def median_ms(fn: Any) -> float:
            fn()
            out = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                fn()
                out.append((time.perf_counter() - t0) * 1000)
            return statistics.median(out)

        t0 = time.perf_counter()
        sweep()  # the first sweep enqueues a wake per stuck task; the later ones find them pending
        first_sweep_ms = (time.perf_counter() - t0) * 1000
        sweep_ms = median_ms(sweep)
        scan_ms = median_ms(scan)
        swept = db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM supervisor_wakes WHERE board = 'sweep'"))
        ratio = statistics.median(t_sup) / statistics.median(t_plain)
        client.close()
        return {
            "backend": "postgresql" if url else "sqlite",
            "n": args.n, "blocks": args.blocks, "bursts": args.bursts, "block_events": block_events,
            "distinct_subjects": distinct, "wakes_enqueued": wakes, "spawns": spawns,
            "plain_ms_per_transition": round(statistics.median(t_plain) * 1000, 3),
            "supervised_ms_per_transition": round(statistics.median(t_sup) * 1000, 3),
            "hook_ratio": round(ratio, 3),
            "take_due_ms_median": round(statistics.median(take_ms), 2),
            "sweep_n": args.sweep_n, "first_sweep_ms": round(first_sweep_ms, 1), "sweep_ms": round(sweep_ms, 1),
            "sweep_wakes": swept,
            "baseline_scan_ms": round(scan_ms, 1),
            "meets_target": spawns == distinct and ratio <= 1.5 and sweep_ms <= 500,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--blocks", type=int, default=1_000)
    p.add_argument("--bursts", type=int, default=10)
    p.add_argument("--subjects", type=int, default=250)
    p.add_argument("--sweep-n", type=int, default=100_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--pg", default=DEFAULT_PG)
    args = p.parse_args()
    load_start = load_average()
    if args.backend == "postgres":
        url, name = fresh_pg(args.pg)
        try:
            r = measure(url, args)
        finally:
            drop_pg(args.pg, name)
    else:
        r = measure(None, args)
    r["load_average"] = [load_start, load_average()]
    print(json.dumps(r))
    print(f"{r['backend']}: {r['block_events']} block events on {r['distinct_subjects']} tasks -> "
          f"{r['wakes_enqueued']} wakes, {r['spawns']} spawns; transition {r['plain_ms_per_transition']} ms plain vs "
          f"{r['supervised_ms_per_transition']} ms supervised (ratio {r['hook_ratio']}); take_due "
          f"{r['take_due_ms_median']} ms/burst; sweep at {r['sweep_n']} tasks {r['sweep_ms']} ms "
          f"(the first, enqueueing {r['sweep_wakes']} wakes: {r['first_sweep_ms']} ms) "
          f"(scan {r['baseline_scan_ms']} ms) {'OK' if r['meets_target'] else 'MISSES TARGET'}", file=sys.stderr)


if __name__ == "__main__":
    main()
