"""PostgreSQL scale-out: create / claim / complete from N concurrent processes, next to raw
psycopg transactions from N processes in the same run.

For each N in ``--procs`` (default 1, 2, 4, 8), interleaved:

- ``raw``: N processes, each ``--ops`` / N single-row ``INSERT`` transactions (``BEGIN``,
  ``INSERT``, ``COMMIT``) on a bare table through psycopg;
- ``shared``: N processes on one board, each creating its share of tasks, then claiming them,
  then completing them (one kernel verb = one transaction);
- ``separate``: the same with each process on a board of its own.

Throughput of a phase = operations of all processes / (last end - first start), the processes
starting together at a barrier; the median of ``--rounds`` interleaved rounds. Ratios are against ``raw`` at the same N.
Targets at N = 8: separate boards ≥ 0.5 of raw, one shared board ≥ 0.35; every op's throughput
grows from N = 1 to N = 4 in both modes.

    python bench/pg_scale.py                 # a fresh database on the local server
    python bench/pg_scale.py --procs 1,2,4,8 --ops 1600
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import DEFAULT_PG, drop_pg, fresh_pg, load_average  # noqa: E402

FORK = mp.get_context("fork")
OPS = ("create", "claim", "complete")


def _raw(url: str, k: int, barrier: Any, out: Any) -> None:
    import psycopg

    conn = psycopg.connect(url)
    conn.execute("INSERT INTO bench_raw (v, at) VALUES (%s, %s)", ("warm", time.time()))
    conn.commit()
    barrier.wait()
    start = time.perf_counter()
    for i in range(k):
        conn.execute("INSERT INTO bench_raw (v, at) VALUES (%s, %s)", (f"row {i}", time.time()))
        conn.commit()
    out.put({"raw": (start, time.perf_counter(), k)})
    conn.close()


def _kernel(url: str, home: str, board: str, k: int, tag: str, barrier: Any, out: Any) -> None:
    from agentboard.config import Settings
    from agentboard.kernel import runs, tasks
    from agentboard.store import open_database

    db = open_database(url, settings=Settings(home=Path(home)), migrate=False)
    for j in range(5):  # statements prepared before the clock starts
        t = tasks.create(db, board, f"warm {tag} {j}", assignee="w")
        c = runs.claim(db, board, t["id"])
        runs.complete(db, board, t["id"], run_id=c["run_id"], summary="ok")
    spans: dict[str, tuple[float, float, int]] = {}
    ids: list[str] = []
    claims: list[int] = []
    barrier.wait()
    start = time.perf_counter()
    for j in range(k):
        ids.append(tasks.create(db, board, f"task {tag} {j}", assignee="w")["id"])
    spans["create"] = (start, time.perf_counter(), k)
    barrier.wait()
    start = time.perf_counter()
    for tid in ids:
        claims.append(runs.claim(db, board, tid)["run_id"])
    spans["claim"] = (start, time.perf_counter(), k)
    barrier.wait()
    start = time.perf_counter()
    for tid, rid in zip(ids, claims, strict=True):
        runs.complete(db, board, tid, run_id=rid, summary="done")
    spans["complete"] = (start, time.perf_counter(), k)
    out.put(spans)
    db.close()


def _measure(target: Any, n: int, args_of: Any) -> dict[str, float]:
    barrier = FORK.Barrier(n)
    out = FORK.Queue()
    procs = [FORK.Process(target=target, args=(*args_of(i), barrier, out)) for i in range(n)]
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
        if p.exitcode != 0:
            raise RuntimeError(f"a benchmark process failed (exit code {p.exitcode})")
    rates: dict[str, float] = {}
    for key in results[0]:
        first = min(r[key][0] for r in results)
        last = max(r[key][1] for r in results)
        rates[key] = sum(r[key][2] for r in results) / (last - first)
    return rates


def run(url: str, procs: list[int], ops: int, rounds: int) -> dict[str, Any]:
    import psycopg

    import agentboard

    home = tempfile.mkdtemp(prefix="ab-pgscale-")
    client = agentboard.connect(url)
    for i in range(max(procs)):
        client.create_board(f"b{i}")
    client.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench_raw (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)")
    rows: list[dict[str, Any]] = []
    samples: dict[int, list[tuple[float, dict[str, float], dict[str, float]]]] = {n: [] for n in procs}
    for r in range(rounds):  # rounds interleave the process counts: drift hits every N alike
        for n in procs:
            k = max(20, ops // n)
            raw = _measure(_raw, n, lambda i, k=k: (url, k))["raw"]
            shared = _measure(_kernel, n, lambda i, k=k, n=n, r=r: (url, home, "default", k, f"s{r}.{n}.{i}"))
            separate = _measure(_kernel, n, lambda i, k=k, n=n, r=r: (url, home, f"b{i}", k, f"p{r}.{n}.{i}"))
            samples[n].append((raw, shared, separate))
    for n in procs:
        raw = statistics.median(s[0] for s in samples[n])
        shared = {op: statistics.median(s[1][op] for s in samples[n]) for op in OPS}
        separate = {op: statistics.median(s[2][op] for s in samples[n]) for op in OPS}
        row: dict[str, Any] = {"procs": n, "raw_txn_per_s": round(raw)}
        for mode, rates in (("shared", shared), ("separate", separate)):
            for op in OPS:
                row[f"{mode}_{op}_per_s"] = round(rates[op])
                row[f"{mode}_{op}_ratio"] = round(rates[op] / raw, 2)
        rows.append(row)
        print(_line(row), file=sys.stderr, flush=True)
    by_n = {r["procs"]: r for r in rows}
    checks: dict[str, bool] = {}
    top = max(procs)
    if top >= 8:
        checks["separate_ratio_at_8"] = all(by_n[top][f"separate_{op}_ratio"] >= 0.5 for op in OPS)
        checks["shared_ratio_at_8"] = all(by_n[top][f"shared_{op}_ratio"] >= 0.35 for op in OPS)
    if 1 in by_n and 4 in by_n:
        checks["grows_1_to_4"] = all(by_n[4][f"{m}_{op}_per_s"] > by_n[1][f"{m}_{op}_per_s"]
                                     for m in ("shared", "separate") for op in OPS)
    return {"rows": rows, "checks": checks, "meets_target": all(checks.values())}


def _line(r: dict[str, Any]) -> str:
    parts = [f"N={r['procs']:<2} raw {r['raw_txn_per_s']:>6}/s"]
    for mode in ("shared", "separate"):
        parts.append(mode + " " + " ".join(
            f"{op} {r[f'{mode}_{op}_per_s']:>5}/s ({r[f'{mode}_{op}_ratio']:.2f})" for op in OPS))
    return " | ".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", default="1,2,4,8", help="comma-separated process counts (default 1,2,4,8)")
    ap.add_argument("--ops", type=int, default=1600, help="operations of each kind per measurement, split across the processes")
    ap.add_argument("--rounds", type=int, default=3, help="measurements of each N, interleaved; the median is reported")
    ap.add_argument("--pg", default=DEFAULT_PG, help="the server (a database of its own is created and dropped)")
    args = ap.parse_args(argv)
    procs = [int(x) for x in args.procs.split(",") if x.strip()]
    load_start = load_average()
    url, name = fresh_pg(args.pg)
    try:
        result = run(url, procs, args.ops, args.rounds)
    finally:
        drop_pg(args.pg, name)
    result["load_average"] = {"start": load_start, "end": load_average()}
    print("checks: " + ", ".join(f"{k} {'OK' if v else 'MISSES'}" for k, v in result["checks"].items()),
          file=sys.stderr)
    print(f"load average (1/5/15 min): {load_start} at the start, {result['load_average']['end']} at the end; "
          "numbers are only comparable on a quiet machine", file=sys.stderr)
    print(json.dumps({"bench": "pg_scale", **result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
