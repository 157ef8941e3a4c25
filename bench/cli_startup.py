"""CLI start-up: ``agentboard --version``, a worker's ``complete`` and a one-shot
``dispatch --wait`` of one worker, wall time of a fresh process.

Each command runs as a new OS process, exactly as a shell or an agent starts it; the median of
the repeats is reported next to the baseline ``python -c pass`` measured in the same run.
Targets: ``--version`` ≤ 150 ms, ``complete`` ≤ 300 ms. ``dispatch --wait`` (a ready task whose
profile's command writes ``.board/result.json``; the command serves its worker's API, so it builds the web app) is
reported with its CPU time too (the command's and its worker's, from ``RUSAGE_CHILDREN``).

    python bench/cli_startup.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import agentboard
from agentboard.kernel import runs, tasks


def wall_ms(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    took = (time.perf_counter() - start) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return took


def cpu_ms(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU milliseconds (user + system of the process and what it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = wall_ms(cmd, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args(argv)

    exe = shutil.which("agentboard")
    cli = [exe] if exe else [sys.executable, "-m", "agentboard"]
    home = Path(tempfile.mkdtemp(prefix="ab-bench-cli-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    env["AGENTBOARD_HOME"] = str(home)
    try:
        client = agentboard.connect(str(home))
        claimed = []
        for i in range(args.repeats + 1):
            t = tasks.create(client.db, "default", f"cli bench {i}", assignee="bench")
            claimed.append((t["id"], runs.claim(client.db, "default", t["id"])["run_id"]))
        client.close()

        base = [wall_ms([sys.executable, "-c", "pass"], env) for _ in range(args.repeats)]
        version = [wall_ms([*cli, "--version"], env) for _ in range(args.repeats)]
        complete = []
        for task_id, run_id in claimed:
            worker_env = {**env, "AGENTBOARD_TASK": task_id, "AGENTBOARD_RUN_ID": str(run_id),
                          "AGENTBOARD_BOARD": "default"}
            complete.append(wall_ms([*cli, "complete", "--summary", "benchmarked"], worker_env))
        complete = complete[1:]  # the first run also warms the file cache for the database

        client = agentboard.connect(str(home))
        done = client.board().list(status="done", limit=10_000)
        if len(done) != len(claimed):
            raise SystemExit(f"only {len(done)} of {len(claimed)} completions reached the board")
        client.add_profile("true", command="sh -c " + shlex.quote(
            "echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json"))
        dispatched = []
        for i in range(args.repeats + 1):
            t = client.board().create(f"dispatch bench {i}", assignee="true")
            dispatched.append(cpu_ms([*cli, "dispatch", "--wait"], env))
            if client.board().show(t["id"])["status"] != "done":
                raise SystemExit(f"dispatch --wait left {t['id']} {client.board().show(t['id'])['status']}")
        dispatched = dispatched[1:]
        client.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in (("python", base), ("version", version), ("complete", complete),
                                                 ("dispatch", [w for w, _ in dispatched]),
                                                 ("dispatch_cpu", [c for _, c in dispatched]))}
    out = {
        "baseline_python_ms": round(med["python"], 1),
        "version_ms": round(med["version"], 1),
        "complete_ms": round(med["complete"], 1),
        "dispatch_wait_ms": round(med["dispatch"], 1),
        "dispatch_wait_cpu_ms": round(med["dispatch_cpu"], 1),
        "ratios": {"version": round(med["version"] / med["python"], 2),
                   "complete": round(med["complete"] / med["python"], 2),
                   "dispatch_wait": round(med["dispatch"] / med["python"], 2)},
        "targets": {"version_ms": 150, "complete_ms": 300},
        "repeats": args.repeats,
    }
    print(json.dumps(out))
    print(f"\nCLI start-up, median wall time of {args.repeats} fresh processes", file=sys.stderr)
    print(f"  python -c pass            {out['baseline_python_ms']:>8.1f} ms", file=sys.stderr)
    print(f"  agentboard --version      {out['version_ms']:>8.1f} ms  (target 150)", file=sys.stderr)
    print(f"  agentboard complete       {out['complete_ms']:>8.1f} ms  (target 300)", file=sys.stderr)
    print(f"  agentboard dispatch --wait {out['dispatch_wait_ms']:>7.1f} ms  "
          f"({out['dispatch_wait_cpu_ms']:.1f} ms of CPU)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
