"""Dispatchers on several hosts: N ``agentboard dispatcher`` processes, each with its own home
and ``AGENTBOARD_HOST_ID`` (simulated hosts), draining one PostgreSQL board of ``--tasks``
trivial tasks (a shell one-liner writing ``.board/result.json``).

For each N in ``--hosts`` (default 1, 2, 4), on a fresh board: the draining rate (tasks/s from
the first 1% of tasks done to the last, by the tasks' completion times: the dispatchers' own
start-up — about a second of CPU each, all at once — is not draining), tasks/s from the
dispatchers' start to the last task done, the CPU per task of the dispatchers (with the workers
they reaped) and of the server, and the checks: every task done, each task run exactly once, the
work spread over the hosts. Target: the draining rate grows with N.
Baseline in the same run: the same one-liners started ``max_parallel`` × N at a time with no
board at all (what the machine's process spawning allows).

    python bench/pg_drain.py                      # 5,000 tasks, N = 1, 2, 4
    python bench/pg_drain.py --tasks 1000 --hosts 1,2
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import DEFAULT_PG, drop_pg, fresh_pg, load_average  # noqa: E402

LINE = "echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json"
WORKER = "sh -c " + shlex.quote(LINE)


def bare_spawn(n: int, parallel: int, root: Path) -> float:
    dirs = []
    for i in range(n):
        d = root / f"b{i}" / ".board"
        d.mkdir(parents=True)
        dirs.append(d.parent)
    t0 = time.perf_counter()
    running: list[subprocess.Popen[bytes]] = []
    for d in dirs:
        while len(running) >= parallel:
            running = [p for p in running if p.poll() is None]
            if len(running) >= parallel:
                time.sleep(0.0005)
        running.append(subprocess.Popen(["/bin/sh", "-c", LINE], cwd=d, stdin=subprocess.DEVNULL))
    for p in running:
        p.wait()
    return n / (time.perf_counter() - t0)


def drain(url: str, root: Path, hosts: int, n: int, parallel: int) -> dict[str, Any]:
    import agentboard
    from agentboard.kernel import tasks

    ab = agentboard.connect(url)
    slug = f"drain{hosts}"
    ab.create_board(slug)
    for j in range(n):  # setup, not measured
        tasks.create(ab.db, slug, f"task {j}", assignee="w")
    # the statistics autovacuum gathers within a minute on a real database: a table loaded the
    # moment before has none, and the planner then scans a whole board for a few ids
    ab.db.write(lambda tx: tx.execute("ANALYZE"))
    procs = []
    env0 = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    t0 = time.perf_counter()
    for h in range(hosts):
        home = root / f"n{hosts}-host{h}"
        home.mkdir(parents=True)
        env = {**env0, "AGENTBOARD_HOME": str(home), "AGENTBOARD_DATABASE_URL": url,
               "AGENTBOARD_HOST_ID": f"host-{h}", "AGENTBOARD_MAX_PARALLEL": str(parallel),
               "AGENTBOARD_SPAWN_GRACE": "0"}
        log = open(home / "dispatcher.log", "ab")
        procs.append(subprocess.Popen([sys.executable, "-m", "agentboard", "dispatcher", "--board", slug],
                                      env=env, stdout=log, stderr=log, start_new_session=True))
    q = "SELECT COUNT(*) FROM tasks WHERE board = :b AND status = 'done'"
    pg_cpu0 = _cpu_seconds(_postgres_pids())
    try:
        while int(ab.db.read(lambda tx: tx.scalar(q, {"b": slug}))) < n:
            if any(p.poll() is not None for p in procs):
                raise RuntimeError(f"a dispatcher exited; see {root}")
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        dispatch_cpu = _cpu_seconds([p.pid for p in procs])
        pg_cpu = _cpu_seconds(_postgres_pids()) - pg_cpu0
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait(60)
    per_task = ab.db.read(lambda tx: tx.all(
        "SELECT task_id, COUNT(*) AS runs, SUM(CASE WHEN outcome = 'completed' THEN 1 ELSE 0 END) AS ok "
        "FROM task_runs WHERE board = :b GROUP BY task_id", {"b": slug}))
    by_host = ab.db.read(lambda tx: tx.all(
        "SELECT worker_host, COUNT(*) AS n FROM task_runs WHERE board = :b GROUP BY worker_host ORDER BY worker_host",
        {"b": slug}))
    done_at = [float(r["completed_at"]) for r in ab.db.read(lambda tx: tx.all(
        "SELECT completed_at FROM tasks WHERE board = :b AND completed_at IS NOT NULL ORDER BY completed_at",
        {"b": slug}))]
    ab.close()
    k = max(1, n // 100)  # from the first 1% done: the dispatchers' start-up is not draining
    steady = (len(done_at) - k) / (done_at[-1] - done_at[k - 1]) if len(done_at) > k else 0.0
    once = len(per_task) == n and all(r["runs"] == 1 and r["ok"] == 1 for r in per_task)
    return {"hosts": hosts, "tasks": n, "seconds": round(wall, 2), "tasks_per_s": round(n / wall, 1),
            "draining_tasks_per_s": round(steady, 1),
            "each_task_once": once, "runs_by_host": {r["worker_host"]: r["n"] for r in by_host},
            # CPU per task: the dispatchers with the workers they reaped, and the database server
            "dispatcher_cpu_ms_per_task": round(dispatch_cpu / n * 1000, 2),
            "postgres_cpu_ms_per_task": round(pg_cpu / n * 1000, 2),
            "cores_busy": round((dispatch_cpu + pg_cpu) / wall, 2)}


def _cpu_seconds(pids: list[int]) -> float:
    """CPU time of processes (with their waited-for children) from ``/proc``; 0 where unreadable."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return total / os.sysconf("SC_CLK_TCK")


def _postgres_pids() -> list[int]:
    """The local PostgreSQL server's processes (the server is on this machine here)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "cmdline").read_bytes().startswith(b"postgres"):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=5000)
    ap.add_argument("--hosts", default="1,2,4")
    ap.add_argument("--parallel", type=int, default=8, help="max_parallel of each dispatcher (default 8)")
    ap.add_argument("--pg", default=DEFAULT_PG)
    args = ap.parse_args(argv)
    hosts = [int(x) for x in args.hosts.split(",") if x.strip()]
    load_start = load_average()
    root = Path(tempfile.mkdtemp(prefix="ab-pgdrain-"))
    url, name = fresh_pg(args.pg)
    rows = []
    try:
        import agentboard

        ab = agentboard.connect(url)
        ab.add_profile("w", command=WORKER)
        ab.close()
        for n in hosts:
            row = drain(url, root, n, args.tasks, args.parallel)
            row["bare_spawn_tasks_per_s"] = round(bare_spawn(min(args.tasks, 1000), args.parallel * n,
                                                             root / f"bare{n}"), 1)
            rows.append(row)
            print(f"N={n} {row['draining_tasks_per_s']:>7} tasks/s draining, {row['tasks_per_s']} with start-up "
                  f"({row['seconds']} s; bare spawn "
                  f"{row['bare_spawn_tasks_per_s']}/s) each task once: {row['each_task_once']} "
                  f"runs by host: {row['runs_by_host']}; CPU per task: dispatchers "
                  f"{row['dispatcher_cpu_ms_per_task']} ms, PostgreSQL {row['postgres_cpu_ms_per_task']} ms; "
                  f"{row['cores_busy']} of {os.cpu_count()} cores busy", file=sys.stderr, flush=True)
    finally:
        drop_pg(args.pg, name)
    grows = all(b["draining_tasks_per_s"] > a["draining_tasks_per_s"] for a, b in zip(rows, rows[1:], strict=False))
    ok = grows and all(r["each_task_once"] for r in rows)
    print(f"grows with N: {grows}; {'OK' if ok else 'MISSES TARGET'}", file=sys.stderr)
    print(f"load average (1/5/15 min): {load_start} at the start, {load_average()} at the end", file=sys.stderr)
    print(json.dumps({"bench": "pg_drain", "rows": rows, "grows": grows, "meets_target": ok}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
