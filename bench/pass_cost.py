"""What one dispatcher pass costs on a host whose workers are running and that has nothing new to do.

Every commit of every host wakes every dispatcher, so this is the pass a fleet runs most: its
host is full (``max_parallel`` workers running), more tasks wait in the ready queue, nothing is
new. A dispatcher (in this process) starts ``--running`` workers (``sleep``) from ``--ready`` +
``--running`` ready tasks on a fresh database, then ``--passes`` passes are timed, in rounds
alternating with the baseline so both see the same machine:

- ``pass``: ``Dispatcher.run_pass_report`` (its snapshot, the checks of its running workers,
  the ready queue; no spawn, no write);
- baseline: the one statement no pass can do without, the host's running tasks with their runs,
  read through a bare psycopg (or sqlite3) connection.

Reported: wall and CPU time (this process) per pass and per baseline read, the ratio, and the
database round trips of a pass (transactions, counted at ``Database.read``/``write``).

    python bench/pass_cost.py [--backend postgres|sqlite] [--running 160] [--ready 140]
                              [--done 0] [--fleet 0] [--passes 100] [--rounds 5] [--json]

``--done`` puts that many done tasks on the board first (one statement), a board with a long
history; a large ``--ready`` is a long queue; ``--fleet N`` has N tasks running on seven other
hosts (claimed in their names, their claims far from lapsing), the rest of a fleet.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import DEFAULT_PG, drop_pg, fresh_pg  # noqa: E402

import agentboard  # noqa: E402
from agentboard.dispatch.dispatcher import Dispatcher  # noqa: E402
from agentboard.store import engine  # noqa: E402

SLEEP = 600


def _baseline(url: str | None, home: Path, host: str) -> Any:
    """A bare connection reading the host's running tasks, as the snapshot's statement does."""
    sql = ("SELECT t.*, r.started_at AS run_started_at, r.log_path, r.profile FROM tasks t "
           "LEFT JOIN task_runs r ON r.id = t.current_run_id WHERE t.status = 'running' "
           "AND (t.worker_host = {p} OR t.worker_host IS NULL)")
    if url is not None:
        import psycopg

        conn = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)
        q = sql.format(p="%s")
        return lambda: conn.execute(q, (host,)).fetchall()
    import sqlite3

    lite = sqlite3.connect(home / "agentboard.db", isolation_level=None)
    q = sql.format(p="?")
    return lambda: lite.execute(q, (host,)).fetchall()


def _count_transactions(fn: Any) -> Counter[str]:
    calls: Counter[str] = Counter()
    depth = [0]
    saved = {n: getattr(engine.Database, n) for n in ("read", "read_pipelined", "write") if hasattr(engine.Database, n)}

    def wrap(name: str) -> Any:
        def counted(self: Any, f: Any, *a: Any, **k: Any) -> Any:
            if not depth[0]:
                calls["write" if name == "write" else "read"] += 1
            depth[0] += 1
            try:
                return saved[name](self, f, *a, **k)
            finally:
                depth[0] -= 1
        return counted

    for name in saved:
        setattr(engine.Database, name, wrap(name))
    try:
        fn()
    finally:
        for name, original in saved.items():
            setattr(engine.Database, name, original)
    return calls


def _history(ab: Any, board: Any, n: int) -> None:
    """``n`` done tasks on the board, in one statement: a board with a long history."""
    t = board.create("done long ago", assignee="w")
    board.complete(t["id"], run_id=board.claim(t["id"])["run_id"], summary="ok")
    cols = list(ab.db.read(lambda tx: tx.one("SELECT * FROM tasks WHERE id = :i", {"i": t["id"]})))
    picks = ", ".join("'h_' || CAST(n.i AS VARCHAR(8))" if c == "id" else f"t.{c}" for c in cols)
    sql = (f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {int(n)}) "
           f"INSERT INTO tasks ({', '.join(cols)}) SELECT {picks} FROM tasks t, n WHERE t.id = :src")
    ab.db.write(lambda tx: tx.execute(sql, {"src": t["id"]}))


def measure(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="ab-bench-pass-"))
    url = name = None
    if args.backend == "postgres":
        url, name = fresh_pg(args.pg)
    try:
        ab = agentboard.connect(url or str(root / "home"))
        ab.settings.home = root / "home"
        ab.settings.max_parallel = args.running
        ab.add_profile("w", command=f"sleep {SLEEP}")
        board = ab.board()
        if args.done:
            _history(ab, board, args.done)
        if args.fleet:  # other hosts' workers: their claims only (no process of theirs runs here)
            from agentboard.kernel import dispatching

            others = [board.create(f"other host's {i}", assignee="w")["id"] for i in range(args.fleet)]
            for h in range(7):
                dispatching.claim_batch(ab.db, board.slug, others[h::7], ttl=3600, host=f"other-host-{h}")
        for i in range(args.running + args.ready):
            board.create(f"task {i}", assignee="w")
        d = Dispatcher(ab.db, ab.settings)
        started = len(d.run_pass_report().spawned)
        assert started == args.running, f"started {started} of {args.running} workers"
        for _ in range(5):  # warm: the workers' rows recorded, the connections and statements ready
            d.run_pass_report()
        calls = _count_transactions(d.run_pass_report)
        bare = _baseline(url, ab.settings.home, d.host)
        assert len(bare()) == args.running
        per: dict[str, list[tuple[float, float]]] = {"pass": [], "baseline": []}
        for _ in range(args.rounds):
            for label, fn in (("pass", d.run_pass_report), ("baseline", bare)):
                w0, c0 = time.perf_counter(), time.process_time()
                for _ in range(args.passes):
                    fn()
                per[label].append(((time.perf_counter() - w0) / args.passes * 1000,
                                   (time.process_time() - c0) / args.passes * 1000))
        d.stop()
        ab.close()
    finally:
        subprocess.run(["pkill", "-f", f"sleep {SLEEP}"], check=False)
        if name is not None:
            drop_pg(args.pg, name)
        shutil.rmtree(root, ignore_errors=True)

    def med(label: str, i: int) -> float:
        return round(statistics.median(x[i] for x in per[label]), 3)

    return {"backend": args.backend, "running": args.running, "ready": args.ready, "done": args.done, "fleet": args.fleet,
            "pass_ms": {"wall": med("pass", 0), "cpu": med("pass", 1)},
            "baseline_ms": {"wall": med("baseline", 0), "cpu": med("baseline", 1)},
            "ratio": {"wall": round(med("pass", 0) / med("baseline", 0), 2),
                      "cpu": round(med("pass", 1) / max(med("baseline", 1), 1e-6), 2)},
            "transactions_per_pass": dict(calls)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")
    ap.add_argument("--pg", default=DEFAULT_PG)
    ap.add_argument("--running", type=int, default=160)
    ap.add_argument("--ready", type=int, default=140)
    ap.add_argument("--done", type=int, default=0, help="done tasks on the board first (a long history)")
    ap.add_argument("--fleet", type=int, default=0, help="tasks running on seven other hosts (the rest of a fleet)")
    ap.add_argument("--passes", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="JSON only")
    args = ap.parse_args(argv)
    out = measure(args)
    print(json.dumps(out))
    if not args.json:
        print(f"a pass, {args.running} running, {args.ready} ready, {args.done} done, nothing new ({args.backend}): "
              f"{out['pass_ms']['wall']} ms wall, {out['pass_ms']['cpu']} ms CPU; the bare read of its running "
              f"tasks {out['baseline_ms']['wall']} ms ({out['ratio']['wall']}x); transactions per pass "
              f"{out['transactions_per_pass']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
