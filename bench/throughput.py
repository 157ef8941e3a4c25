"""End-to-end throughput: 500 tasks whose worker is a one-line shell script writing
``.board/result.json``, ``max_parallel`` 8, one dispatcher in this process.

Reports tasks/s, dispatcher CPU per task (this process: the dispatcher's threads and the
kernel calls it makes, not the workers) and peak RSS. Baseline in the same run: starting the
same 500 shell one-liners 8 at a time with no board at all.

    python bench/throughput.py [--tasks 500] [--parallel 8] [--pg URL]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

from _shared import DEFAULT_PG, load_average, per_backend, report

LINE = "echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json"
WORKER = "sh -c " + shlex.quote(LINE)


def baseline(n: int, parallel: int, root: Path) -> float:
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
        running.append(subprocess.Popen(["/bin/sh", "-c", LINE], cwd=d, stdin=subprocess.DEVNULL,
                                        start_new_session=True))
    for p in running:
        p.wait()
    return n / (time.perf_counter() - t0)


def run(url: str | None, n: int, parallel: int) -> dict[str, object]:
    import agentboard
    from agentboard.dispatch.dispatcher import Dispatcher

    home = Path(tempfile.mkdtemp(prefix="ab-bench-tp-"))
    os.environ["AGENTBOARD_HOME"] = str(home)
    if url:
        os.environ["AGENTBOARD_DATABASE_URL"] = url
    else:
        os.environ.pop("AGENTBOARD_DATABASE_URL", None)
    ab = agentboard.connect(url or str(home))
    ab.settings.home = home
    ab.settings.max_parallel = parallel
    ab.add_profile("w", command=WORKER)
    board = ab.board()
    ids = [board.create(f"task {i}", assignee="w")["id"] for i in range(n)]
    d = Dispatcher(ab.db, ab.settings)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    d.start()
    q = "SELECT COUNT(*) FROM tasks WHERE board = 'default' AND status = 'done'"
    while True:
        done = int(ab.db.read(lambda tx: tx.scalar(q)))
        if done >= n:
            break
        ab.db.wait_for_commit(ab.db.commit_seq, 0.05)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    d.stop()
    runs = int(ab.db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM task_runs")))
    ab.close()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    base = baseline(n, parallel, home / "baseline")
    return {
        "backend": "postgresql" if url else "sqlite", "tasks": len(ids), "runs": runs, "max_parallel": parallel,
        "seconds": round(wall, 2), "tasks_per_s": round(n / wall, 1),
        "dispatcher_cpu_ms_per_task": round(cpu / n * 1000, 2),
        "peak_rss_mb": round(r1.ru_maxrss / 1024, 1),
        "baseline_bare_spawn_tasks_per_s": round(base, 1),
        "ratio_to_baseline": round((n / wall) / base, 3),
        "target_tasks_per_s": 100, "meets_target": n / wall >= 100,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--pg", default=DEFAULT_PG)
    ap.add_argument("--no-pg", action="store_true")
    args = ap.parse_args()
    load0 = load_average()
    results = per_backend(lambda url: run(url, args.tasks, args.parallel), args.pg, args.no_pg)
    load = report(results, lambda r: (
        f"{r['tasks']} tasks in {r['seconds']} s = {r['tasks_per_s']} tasks/s "
        f"(bare spawn {r['baseline_bare_spawn_tasks_per_s']}/s); dispatcher CPU "
        f"{r['dispatcher_cpu_ms_per_task']} ms/task; peak RSS {r['peak_rss_mb']} MB"), load0)
    print(json.dumps({"benchmark": "throughput", "load_average_start": load0, "load_average_end": load,
                      "cpus": os.cpu_count(), "results": results}))


if __name__ == "__main__":
    main()
