"""The next task's claim while a long transaction is open elsewhere on the PostgreSQL server.

A claim takes the first ready task in the queue's order and leaves that task's old row version
(still ``ready``) in the status index. The index entry is marked dead, and skipped for free, once
no transaction on the server can still see that version. While one can (a ``pg_dump`` of the
database, a report left open, any transaction holding a transaction id, in any database of the
server), every claim walks over the entries of the tasks claimed since that transaction began.

For each case, ``--n`` ready tasks are claimed one by one through ``kernel.runs.claim_next``
with nothing else open (the baseline, in the same run), then with a ``REPEATABLE READ``
transaction open in the same database, then with a transaction holding an id in another
database. Reported per case: claims per second over the first and the last tenth of the phase,
and the pick's buffers and time after the phase (``EXPLAIN (ANALYZE, BUFFERS)``).

    python bench/pg_long_snapshot.py [--n 1200]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _shared import drop_pg, fresh_pg  # noqa: E402

DEFAULT_PG = os.environ.get("AGENTBOARD_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
PICK = ("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT id FROM tasks WHERE board = 'default' AND status = 'ready' "
        "ORDER BY priority DESC, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED")


def _case(db: Any, url: str, server: str, holder: str, n: int) -> dict[str, Any]:
    import psycopg

    from agentboard.kernel import runs, tasks

    for i in range(n):
        tasks.create(db, "default", f"{holder} {i}", assignee="bench")
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("VACUUM ANALYZE")
    held = None
    if holder != "nothing open":
        held = psycopg.connect(url if holder == "a snapshot in this database" else server)
        held.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        held.execute("SELECT txid_current()")
    try:
        took = []
        for _ in range(n):
            t0 = time.perf_counter()
            runs.claim_next(db, "default")
            took.append(time.perf_counter() - t0)
        with psycopg.connect(url) as c:
            plan = [str(r[0]).strip() for r in c.execute(PICK).fetchall()]
            c.rollback()
    finally:
        if held is not None:
            held.rollback()
            held.close()
    db.write(lambda tx: tx.execute("UPDATE tasks SET status = 'done', current_run_id = NULL WHERE status = 'running'"))
    tenth = max(1, n // 10)
    buffers = next((int(line.split("hit=")[1].split()[0]) for line in plan if "Buffers: shared hit=" in line), None)
    ms = next((float(line.split(":")[1].split()[0]) for line in plan if line.startswith("Execution Time")), None)
    return {"case": holder, "first_tenth_per_s": round(tenth / sum(took[:tenth]), 1),
            "last_tenth_per_s": round(tenth / sum(took[-tenth:]), 1), "pick_buffers_after": buffers,
            "pick_ms_after": ms}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1200, help="tasks claimed per case (default 1200)")
    ap.add_argument("--pg", default=DEFAULT_PG, help="the server (a database of its own is created and dropped)")
    args = ap.parse_args(argv)
    if args.n < 10:
        print("pg_long_snapshot: --n must be at least 10", file=sys.stderr)
        return 2
    import agentboard

    url, name = fresh_pg(args.pg)
    try:
        ab = agentboard.connect(url)
        try:
            cases = [_case(ab.db, url, args.pg, holder, args.n) for holder in (
                "nothing open", "a snapshot in this database", "a transaction id in another database")]
        finally:
            ab.close()
    finally:
        drop_pg(args.pg, name)
    base = cases[0]["last_tenth_per_s"]
    for c in cases:
        c["last_tenth_vs_nothing_open"] = round(c["last_tenth_per_s"] / base, 2)
    print(json.dumps({"n": args.n, "cases": cases}))
    print(f"\nthe next task's claim, {args.n} claims per case", file=sys.stderr)
    for c in cases:
        print(f"  {c['case']:<38} {c['first_tenth_per_s']:>7,.0f}/s first tenth  {c['last_tenth_per_s']:>7,.0f}/s "
              f"last tenth ({c['last_tenth_vs_nothing_open']:.2f})  pick after: {c['pick_buffers_after']} buffers, "
              f"{c['pick_ms_after']} ms", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
