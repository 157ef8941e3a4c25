"""bench/sqlite_pages.py, run as a real process in a small run: every verb's pages are counted
from the WAL and named by the table or index they belong to."""

from __future__ import annotations

import json
import subprocess
import sys

from testenv import BENCH

SCRIPT = BENCH / "sqlite_pages.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_the_pages_benchmark_names_the_pages_each_verb_writes() -> None:
    proc = _run("--n", "40", "--every", "1")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["bench"] == "sqlite_pages" and out["baseline_insert"]["pages"] >= 1
    verbs = out["verbs"]
    assert verbs["create"]["measured"] == 40 and verbs["complete"]["measured"] == 40
    # a completion ends the run's claim and promotes the next task of the chain: the running
    # tasks' index, the run's row and the counts are written, and more pages than a bare insert
    complete = verbs["complete"]["by_btree"]
    assert {"ix_tasks_running", "task_runs", "task_counts"} <= set(complete), complete
    assert out["vs_baseline"]["complete"] > 1
    assert "WAL pages per transaction" in proc.stderr


def test_the_pages_benchmark_refuses_a_tiny_board_with_a_one_line_reason() -> None:
    proc = _run("--n", "3")
    assert proc.returncode == 2 and "--n must be at least 10" in proc.stderr
