"""Insights on a big board: every insight at 100,000 and 1,000,000 tasks (two runs per task).

Setup (not timed as an insight): a migrated database, then the history in bulk SQL on the server
side (a recursive CTE on SQLite, ``generate_series`` on PostgreSQL), never through the kernel:
tasks spread over a year across six profiles and three models, two runs each (first attempts
that pass, fail verification, crash or time out; second attempts that finish), a review for one
task in five, and three race attempts for one task in a hundred (``attempts``). The rollups are
then rebuilt from the runs (``kernel.insights.rebuild``, what migration 0018 runs), timed.

Timed, median of repeats, each through ``kernel.insights.read`` (what the CLI, REST and the
dashboard call):
- ``profile_all`` / ``profile_30d``: per profile, all time and the last 30 days
- ``model_all``: per model
- ``board_all`` / ``board_30d``: the board's days (throughput, cycle time, work in progress, spend)
- baseline: the same per-profile counts aggregated straight from ``task_runs`` (what a read
  would cost without the rollups), 3 repeats

Target: every insight ≤ 500 ms on both backends.

    python bench/insights.py [--sizes 100000,1000000] [--repeats 7] [--backend sqlite|postgres|both]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agentboard
from agentboard.kernel import insights

BOARD = "default"
PROFILES = ("claude-a", "claude-b", "codex", "gemini", "opencode", "aider")
MODELS = ("sonnet", "opus", "gpt-5")
YEAR = 365 * 86400
TARGET_MS = 500


def _seq(dialect: str, n: int) -> tuple[str, str, str]:
    """(statement prefix, FROM clause, task id expression) for rows ``i`` = 0 … n-1."""
    if dialect == "postgresql":
        return "", f"generate_series(0, {n - 1}) AS s(i)", "'t_' || lpad(to_hex(i), 8, '0')"
    return (f"WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < {n - 1}) ",
            "s", "printf('t_%08x', i)")


def populate(db: Any, n: int, now: float) -> dict[str, Any]:
    """Tasks, runs, reviews (and race attempts when the table exists) in bulk SQL."""
    d = db.dialect
    pre, frm, tid = _seq(d, n)
    profile = "CASE i % 6 " + " ".join(f"WHEN {k} THEN '{p}'" for k, p in enumerate(PROFILES)) + " END"
    created = f"({now} - {YEAR} + CAST(i AS DOUBLE PRECISION) * {YEAR} / {n})" if d == "postgresql" else \
        f"({now} - {YEAR} + CAST(i AS REAL) * {YEAR} / {n})"
    # 80 % done, the rest spread over running, review, blocked, ready
    status = "CASE WHEN i % 10 < 8 THEN 'done' WHEN i % 10 = 8 THEN 'review' ELSE 'blocked' END"
    spans = {}

    def step(name: str, sql: str) -> None:
        start = time.perf_counter()
        db.write(lambda tx: tx.execute(sql))
        spans[name] = round(time.perf_counter() - start, 2)

    step("tasks", pre + (
        "INSERT INTO tasks (id, board, title, status, assignee, model, verify, created_at, updated_at, "
        "started_at, completed_at) "
        f"SELECT {tid}, '{BOARD}', 'task', {status}, {profile}, "
        f"CASE WHEN i % 7 = 0 THEN 'opus' ELSE NULL END, CASE WHEN i % 3 = 0 THEN '[\"make test\"]' ELSE '[]' END, "
        f"{created}, {created} + 7200, {created} + 60, "
        f"CASE WHEN i % 10 < 8 THEN {created} + 600 + (i % 97) * 300 ELSE NULL END FROM {frm}"))
    # run 1: i % 10 in 0..3 passes, 4..5 fails verification, 6 crashes, 7 times out, 8..9 passes
    first = ("CASE WHEN i % 10 IN (4, 5) THEN 'verify_failed' WHEN i % 10 = 6 THEN 'crashed' "
             "WHEN i % 10 = 7 THEN 'timed_out' ELSE 'completed' END")
    step("runs", pre + (
        "INSERT INTO task_runs (task_id, board, profile, attempt, status, outcome, started_at, ended_at, "
        "input_tokens, output_tokens, cost_usd, synthetic) "
        f"SELECT {tid}, '{BOARD}', {profile}, 1, 'closed', {first}, {created} + 60, {created} + 60 + 30 + (i % 53) * 40, "
        f"1000 + i % 5000, 200 + i % 900, 0.01 + (i % 40) * 0.005, 0 FROM {frm}"))
    pre2, frm2, tid2 = _seq(d, n)
    step("runs_2", pre2 + (
        "INSERT INTO task_runs (task_id, board, profile, attempt, status, outcome, started_at, ended_at, "
        "input_tokens, output_tokens, cost_usd, synthetic) "
        f"SELECT {tid2}, '{BOARD}', {profile}, 2, 'closed', "
        "CASE WHEN i % 10 = 9 THEN 'crashed' ELSE 'completed' END, "
        f"{created} + 400, {created} + 400 + 20 + (i % 31) * 25, 800 + i % 3000, 150 + i % 500, "
        f"0.008 + (i % 25) * 0.004, 0 FROM {frm2}"))
    pre3, frm3, tid3 = _seq(d, n)
    step("reviews", pre3 + (
        "INSERT INTO reviews (task_id, board, run_id, reviewer, verdict, created_at) "
        f"SELECT {tid3}, '{BOARD}', NULL, 'reviewer', "
        "CASE WHEN i % 20 < 15 THEN 'approved' ELSE 'changes_requested' END, "
        f"{created} + 500 FROM {frm3} WHERE i % 5 = 0"))
    # one race in a hundred tasks, three attempts each
    races = max(1, n // 100)
    pre4, frm4, tid4 = _seq(d, races)
    step("attempts", pre4 + (
        "INSERT INTO attempts (task_id, n, board, profile, state, picked, started_at, finished_at) "
        f"SELECT {tid4}, k.n, '{BOARD}', "
        "CASE (i + k.n) % 6 " + " ".join(f"WHEN {j} THEN '{p}'" for j, p in enumerate(PROFILES)) + " END, "
        f"'finished', CASE WHEN k.n = 1 + i % 3 THEN 1 ELSE 0 END, {now} - (i % 300) * 86400, "
        f"{now} - (i % 300) * 86400 + 900 FROM {frm4} CROSS JOIN (SELECT 1 AS n UNION ALL SELECT 2 "
        "UNION ALL SELECT 3) k"))
    for p in PROFILES:
        db.write(lambda tx, p=p: tx.execute(
            "INSERT INTO profiles (name, command, model, created_at, updated_at) VALUES (:n, 'true', :m, :t, :t)",
            {"n": p, "m": MODELS[PROFILES.index(p) % 3], "t": now}))
    start = time.perf_counter()
    insights.rebuild(db)
    spans["rebuild_rollups"] = round(time.perf_counter() - start, 2)
    if d == "postgresql":
        with db._raw() as conn:
            conn.autocommit = True
            conn.execute("VACUUM ANALYZE")
            conn.autocommit = False
    else:
        db.write(lambda tx: tx.execute("ANALYZE"))
    return spans


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm the caches once
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(url: str | None, n: int, repeats: int, folder: Path) -> dict[str, Any]:
    result = _measure(url, n, repeats, folder)
    print(json.dumps(result), file=sys.stderr, flush=True)  # each result as soon as it is known
    return result


def _measure(url: str | None, n: int, repeats: int, folder: Path) -> dict[str, Any]:
    client = agentboard.connect(url) if url else agentboard.connect(str(folder / f"home-{n}"))
    db = client.db
    now = time.time()
    try:
        setup = populate(db, n, now)
        runs = db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM task_runs"))
        rows = db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM run_rollups"))
        check = insights.read(db, BOARD, insights.Query.build("profile"))
        assert sum(g["runs"] for g in check["groups"]) == runs, "the rollups disagree with the runs"
        timed: dict[str, float] = {}
        for name, by, since in (("profile_all", "profile", None), ("profile_30d", "profile", "30d"),
                                ("model_all", "model", None), ("board_all", "board", None),
                                ("board_30d", "board", "30d")):
            q = insights.Query.build(by, since)
            timed[name] = round(median_ms(lambda q=q: insights.read(db, BOARD, q), repeats), 2)
        base = median_ms(lambda: db.read(lambda tx: tx.all(
            "SELECT profile, COUNT(*) AS runs, SUM(cost_usd) AS cost, "
            "SUM(CASE WHEN outcome = 'completed' THEN 1 ELSE 0 END) AS ok FROM task_runs "
            "WHERE board = :b GROUP BY profile", {"b": BOARD})), 3)
    finally:
        client.close()
    return {
        "backend": db.dialect, "tasks": n, "runs": int(runs), "rollup_rows": int(rows), "setup_s": setup,
        "insights_ms": timed, "baseline_runs_scan_ms": round(base, 2),
        "worst_ms": max(timed.values()), "within_target": max(timed.values()) <= TARGET_MS,
        "ratio_worst_to_scan": round(max(timed.values()) / base, 4) if base else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    args = ap.parse_args(argv)
    # the bulk load and the rebuild are single statements over millions of rows (setup, not reads)
    os.environ.setdefault("AGENTBOARD_PG_STATEMENT_TIMEOUT", "3600")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    sys.path.insert(0, str(Path(__file__).parent))
    from _shared import DEFAULT_PG, drop_pg, fresh_pg, load_average

    results = []
    load_start = load_average()
    folder = Path(tempfile.mkdtemp(prefix="ab-bench-insights-"))
    try:
        for n in sizes:
            if args.backend in ("sqlite", "both"):
                results.append(measure(None, n, args.repeats, folder))
                shutil.rmtree(folder / f"home-{n}", ignore_errors=True)
            if args.backend in ("postgres", "both"):
                url, name = fresh_pg(DEFAULT_PG)
                try:
                    results.append(measure(url, n, args.repeats, folder))
                finally:
                    drop_pg(DEFAULT_PG, name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({"results": results, "load_average": [load_start, load_average()]}))
    print(f"\ninsights benchmark, median of {args.repeats} (target ≤ {TARGET_MS} ms each)", file=sys.stderr)
    for r in results:
        shown = ", ".join(f"{k} {v:.1f}" for k, v in r["insights_ms"].items())
        print(f"  {r['backend']:<10} {r['tasks']:>9,} tasks {r['runs']:>9,} runs: {shown} ms; "
              f"scan of the runs {r['baseline_runs_scan_ms']:.0f} ms; rebuild {r['setup_s']['rebuild_rollups']} s",
              file=sys.stderr)
    return 0 if all(r["within_target"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
