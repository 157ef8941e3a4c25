"""Where metrics-on's CPU goes: ``bench/metrics.py``'s throughput workload in one mode, with each
observation the dispatcher makes per task (``observe.metrics``' functions, the JSON log lines
of ``observe.logs`` or of ``logging``) wrapped in a per-thread CPU clock. Prints the CPU
microseconds per task spent inside each, and the process's CPU per task while draining.

Run it for each mode (a fresh process each: the wrappers stay) and compare the totals: "off"
pays only the run-once check and the clock itself (~2-3 us a call under load).

    python bench/metrics_cpu.py on|off [--tasks 1000]
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import metrics as bench

from agentboard.kernel import monitoring
from agentboard.observe import logs
from agentboard.observe import metrics as m

spent: collections.Counter[str] = collections.Counter()
calls: collections.Counter[str] = collections.Counter()
_depth = threading.local()


def _wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, its thread's CPU time counted under ``name`` (not again when nested in another)."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_depth, "n", 0)
        _depth.n = depth + 1
        t0 = time.thread_time_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            _depth.n = depth
            if depth == 0:
                spent[name] += time.thread_time_ns() - t0
                calls[name] += 1
    return wrapped


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["on", "off"])
    ap.add_argument("--tasks", type=int, default=1000)
    args = ap.parse_args()
    for name in ("spawned", "run_closed", "runs_closed", "pass_done", "pass_skipped"):
        setattr(m, name, _wrap(name, getattr(m, name)))
    monitoring.closed_runs = _wrap("closed_runs (a read)", monitoring.closed_runs)  # type: ignore[assignment]
    logging.Logger._log = _wrap("logging (a line)", logging.Logger._log)  # type: ignore[method-assign]
    logs.info = _wrap("logs.info (a line)", logs.info)  # type: ignore[assignment]
    logs.LineHandler.write_lines = _wrap("logs.batch's writes", logs.LineHandler.write_lines)  # type: ignore[method-assign]
    bench._mode(args.mode == "on", Path(tempfile.mkdtemp(prefix="ab-bench-log-")) / "log.jsonl")
    bench._fresh(None, bench.throughput, 30)  # warm-up, not counted
    spent.clear()
    calls.clear()
    per_s, cpu_ms = bench._fresh(None, bench.throughput, args.tasks)
    n = args.tasks
    print(json.dumps({
        "benchmark": "metrics_cpu", "mode": args.mode, "tasks": n, "tasks_per_s": round(per_s, 1),
        "process_cpu_us_per_task": round(cpu_ms * 1000, 1),
        "observations_cpu_us_per_task": round(sum(spent.values()) / 1000 / n, 1),
        "by_observation": {k: {"us_per_task": round(v / 1000 / n, 1), "calls": calls[k],
                               "us_per_call": round(v / 1000 / calls[k], 1)} for k, v in spent.most_common()},
    }, indent=1))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
