"""A graph released at once, claimed and started on the planner statistics of an empty board.

A parent with ``--n`` children is created on a board whose tables were last analyzed while
empty (``VACUUM ANALYZE`` first, as after a quiet spell); the parent's completion makes every
child ready in one transaction. The children are then claimed and their workers' starts
recorded as a dispatcher does (``kernel.dispatching.claim_to_start`` with run tokens and what
the files need, then ``record_spawns``), in groups of ``--group``, in one process with no
worker started. Reported per child: PostgreSQL's CPU (every server process's, from ``/proc``),
the client's CPU and the wall time; and ``release_ms``, the wall time of the parent's completion
that makes the children ready (always on the empty board's statistics: it comes before any
refresh).

Two cases per round, alternated, each on a fresh database: ``stale``, the statistics of the
empty board; ``refreshed``, after ``kernel.maintenance.refresh_statistics`` (what a running
dispatcher does within seconds, on a thread of its own). The ratios are ``stale`` over
``refreshed`` in the same round. Autovacuum is off on the bench's tables, so that only the case
under test analyzes them.

With ``--backlog N``, N done tasks are on the board before it is analyzed: a board with a long
history, where the release is too small a change for the statistics to be refreshed, and the
planner's statistics still say no task is ready.

    python bench/pg_released_graph.py [--n 1000] [--group 8] [--rounds 3] [--backlog 0]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _shared import DEFAULT_PG, drop_pg, fresh_pg, load_average  # noqa: E402

CASES = ("stale", "refreshed")


def _server_cpu() -> dict[tuple[int, int], int]:
    """The CPU time (clock ticks) of every PostgreSQL process on this machine (the server is
    local), by process id and start time: a process that ends or starts meanwhile (another
    client's backend) must not move the difference of the others."""
    ticks: dict[tuple[int, int], int] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        if "(postgres)" in stat:
            fields = stat.rsplit(")", 1)[1].split()
            ticks[(int(pid), int(fields[19]))] = int(fields[11]) + int(fields[12])
    return ticks


def _server_cpu_s(since: dict[tuple[int, int], int]) -> float:
    """Seconds of PostgreSQL's CPU since the snapshot ``since``: what the processes alive now
    spent after it (one started since counts whole)."""
    return sum(t - since.get(key, 0) for key, t in _server_cpu().items()) / os.sysconf("SC_CLK_TCK")


def _client_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _case(pg: str, n: int, group: int, refresh: bool, backlog: int = 0) -> dict[str, Any]:
    import psycopg

    import agentboard
    from agentboard.kernel import dispatching, maintenance, runs, tasks

    url, name = fresh_pg(pg)
    home = Path(tempfile.mkdtemp(prefix="ab-released-"))
    try:
        client = agentboard.connect(url)
        client.settings.home = home
        client.add_profile("w", command="true")
        db = client.db
        gate = tasks.create(db, "default", "gate", assignee="w")["id"]
        with psycopg.connect(url, autocommit=True) as conn:
            if backlog:  # a long history: done tasks, bulk-inserted
                conn.execute(
                    "INSERT INTO tasks (id, board, title, body, assignee, status, priority, created_at, updated_at) "
                    "SELECT 'old_' || g, 'default', 'old', '', 'w', 'done', 0, g, g FROM generate_series(1, %s) g",
                    (backlog,))
            for table in maintenance.STATISTICS_TABLES:  # only the case under test analyzes them
                conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
            conn.execute("VACUUM ANALYZE")
        children = [tasks.create(db, "default", f"child {i}", assignee="w", parents=[gate])["id"] for i in range(n)]
        run = runs.claim(db, "default", gate)
        released = time.perf_counter()  # the release itself, on the empty board's statistics in both cases
        runs.complete(db, "default", gate, summary="released", run_id=run["run_id"])
        release_ms = (time.perf_counter() - released) * 1000
        analyzed: list[str] = []
        if refresh:
            # the server counts the writes within a second or two of their commits; on a board
            # with a long history the release may be too small a change to refresh anything
            deadline = time.monotonic() + (3 if backlog else 15)
            while not analyzed and time.monotonic() < deadline:
                analyzed = maintenance.refresh_statistics(db)
                if not analyzed:
                    time.sleep(0.2)
        server0, client0, wall0 = _server_cpu(), _client_cpu_s(), time.perf_counter()
        left, pid = list(children), 100_000
        while left:
            got = dispatching.claim_to_start(db, "default", left[:4 * group], host="bench", limit=group, tokens=True)
            items = []
            for c in got.claimed:
                pid += 1
                items.append({"task_id": c["id"], "run_id": c["run_id"], "pid": pid, "host": "bench",
                              "log_path": "/dev/null", "workspace": "/dev/null"})
            dispatching.record_spawns(db, "default", items)
            taken = {c["id"] for c in got.claimed}
            left = [t for t in left if t not in taken]
        wall = time.perf_counter() - wall0
        out = {"server_ms": _server_cpu_s(server0) * 1000 / n, "client_ms": (_client_cpu_s() - client0) * 1000 / n,
               "wall_ms": wall * 1000 / n, "release_ms": release_ms, "analyzed": analyzed}
        client.close()
        return out
    finally:
        drop_pg(pg, name)
        shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="children released at once (default 1000)")
    ap.add_argument("--group", type=int, default=8, help="tasks per claim, as a dispatcher's (default 8)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of both cases, alternated (default 3)")
    ap.add_argument("--backlog", type=int, default=0,
                    help="done tasks on the board before it is analyzed (default 0): a board with a long history")
    ap.add_argument("--pg", default=DEFAULT_PG, help="the server (a database of its own per case)")
    args = ap.parse_args(argv)
    if args.n < 10 or args.group < 1 or args.rounds < 1:
        print("pg_released_graph: --n must be at least 10, --group and --rounds at least 1", file=sys.stderr)
        return 2
    load0 = load_average()
    rounds = []
    for r in range(args.rounds):
        order = CASES if r % 2 == 0 else CASES[::-1]
        got = {case: _case(args.pg, args.n, args.group, case == "refreshed", args.backlog) for case in order}
        row = {case: {k: (round(v, 3) if isinstance(v, float) else v) for k, v in got[case].items()} for case in CASES}
        row["stale_vs_refreshed"] = {k: round(got["stale"][k] / got["refreshed"][k], 2)
                                     for k in ("server_ms", "client_ms", "wall_ms")}
        rounds.append(row)
        print(f"round {r + 1}/{args.rounds}: per child, stale / refreshed: server "
              f"{row['stale']['server_ms']:.3f} / {row['refreshed']['server_ms']:.3f} ms, client "
              f"{row['stale']['client_ms']:.3f} / {row['refreshed']['client_ms']:.3f} ms, wall "
              f"{row['stale']['wall_ms']:.3f} / {row['refreshed']['wall_ms']:.3f} ms; the release "
              f"{row['stale']['release_ms']:.0f} / {row['refreshed']['release_ms']:.0f} ms "
              f"(analyzed: {', '.join(row['refreshed']['analyzed']) or 'nothing'})", file=sys.stderr, flush=True)
    median = {k: statistics.median(r["stale_vs_refreshed"][k] for r in rounds) for k in ("server_ms", "client_ms", "wall_ms")}
    print(json.dumps({"bench": "pg_released_graph", "n": args.n, "group": args.group, "backlog": args.backlog,
                      "rounds": rounds,
                      "median_stale_vs_refreshed": median,
                      "load_average": {"start": load0, "end": load_average()}}))
    print(f"\nmedian of {args.rounds}, stale over refreshed statistics: server CPU {median['server_ms']:.2f}, "
          f"client CPU {median['client_ms']:.2f}, wall {median['wall_ms']:.2f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
