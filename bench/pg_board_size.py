"""The hot verbs' server CPU as a PostgreSQL board grows: a plan that stops being reused.

A prepared statement keeps one plan for any parameters only while PostgreSQL prices that plan
no dearer than one made for the values at hand; past that point it plans the statement again
at every call. Whether a statement crosses it depends on the table's statistics, so a verb can
become several times dearer once a board holds enough tasks, with nothing else changed.

Rounds on one board in a fresh database, one process: ``--n`` tasks created, claimed one by
one (``kernel.runs.claim_next``) and completed; then ``--n`` more drained (claim next + complete).
``VACUUM ANALYZE`` before every phase, as autovacuum would eventually. Each round leaves ``2 ×
--n`` done tasks behind, so the board grows by that much per round. Reported per round and
verb: the server's CPU per operation (the backend's ``/proc/<pid>/schedstat``) and its ratio to
the first round's (the baseline, in the same run); and at the end, every statement prepared on
the connection that was planned anew more than 5 times (``pg_prepared_statements``).

    python bench/pg_board_size.py [--rounds 8] [--n 1200]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _shared import DEFAULT_PG, drop_pg, fresh_pg, load_average  # noqa: E402

VERBS = ("create", "claim", "complete", "drain")


def _cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat") as fh:
        return int(fh.read().split()[0])


def _rounds(url: str, rounds: int, n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    import psycopg

    from agentboard.config import Settings
    from agentboard.kernel import runs, tasks
    from agentboard.store import open_database

    home = Path(tempfile.mkdtemp(prefix="ab-board-size-"))
    db = open_database(url, settings=Settings(home=home), migrate=False)
    pid = int(db.read(lambda tx: tx.scalar("SELECT pg_backend_pid()")))
    monitor = psycopg.connect(url, autocommit=True)
    board = "default"

    def timed(fn: Any, count: int) -> tuple[list[Any], float]:
        monitor.execute("VACUUM ANALYZE")
        before = _cpu_ns(pid)
        out = [fn(i) for i in range(count)]
        return out, (_cpu_ns(pid) - before) / count / 1000

    def claim(_: int) -> tuple[str, int]:
        got = runs.claim_next(db, board, limit=1)
        return got[0]["id"], int(got[0]["run_id"])

    def drain(_: int) -> None:
        task_id, run_id = claim(0)
        runs.complete(db, board, task_id, run_id=run_id, summary="done")

    rows = []
    try:
        for r in range(rounds):
            done_before = r * 2 * n
            _, create_us = timed(lambda i, r=r: tasks.create(db, board, f"r{r} {i}", assignee="bench"), n)
            claimed, claim_us = timed(claim, n)
            _, complete_us = timed(lambda i, c=claimed: runs.complete(db, board, c[i][0], run_id=c[i][1],
                                                                     summary="done"), n)
            for i in range(n):
                tasks.create(db, board, f"r{r} drain {i}", assignee="bench")
            _, drain_us = timed(drain, n)
            rows.append({"round": r + 1, "done_tasks_before": done_before,
                         "server_us_per_op": {"create": round(create_us), "claim": round(claim_us),
                                              "complete": round(complete_us), "drain": round(drain_us)}})
            print(f"round {r + 1}/{rounds}: {done_before:>6,} done tasks before; server µs/op "
                  + "  ".join(f"{v} {rows[-1]['server_us_per_op'][v]}" for v in VERBS), file=sys.stderr, flush=True)
        replanned = db.write(lambda tx: tx.all(
            "SELECT generic_plans, custom_plans, left(regexp_replace(statement, '\\s+', ' ', 'g'), 200) AS statement "
            "FROM pg_prepared_statements WHERE custom_plans > 5 AND statement NOT LIKE '%pg_prepared_statements%' "
            "ORDER BY custom_plans DESC"))
    finally:
        monitor.close()
        db.close()
        shutil.rmtree(home, ignore_errors=True)
    return rows, [dict(r) for r in replanned]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=8, help="rounds (default 8)")
    ap.add_argument("--n", type=int, default=1200, help="tasks per phase (default 1200)")
    ap.add_argument("--pg", default=DEFAULT_PG, help="the server (a database of its own is created and dropped)")
    args = ap.parse_args(argv)
    if args.rounds < 2 or args.n < 10:
        print("pg_board_size: --rounds must be at least 2 and --n at least 10", file=sys.stderr)
        return 2
    import agentboard

    load0 = load_average()
    url, name = fresh_pg(args.pg)
    try:
        agentboard.connect(url).close()  # migrated; the default board
        rows, replanned = _rounds(url, args.rounds, args.n)
    finally:
        drop_pg(args.pg, name)
    base = rows[0]["server_us_per_op"]
    for row in rows:
        row["vs_first_round"] = {v: round(row["server_us_per_op"][v] / base[v], 2) for v in VERBS}
    print(json.dumps({"bench": "pg_board_size", "rounds": rows, "n": args.n, "replanned_statements": replanned,
                      "load_average": {"start": load0, "end": load_average()}}))
    print("\nserver CPU per operation against the first round's", file=sys.stderr)
    for row in rows:
        print(f"  round {row['round']}: " + "  ".join(f"{v} {row['vs_first_round'][v]:.2f}" for v in VERBS),
              file=sys.stderr)
    for st in replanned:
        print(f"  planned anew {st['custom_plans']} times (reused {st['generic_plans']}): {st['statement']}",
              file=sys.stderr)
    if not replanned:
        print("  no prepared statement was planned anew more than 5 times", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
