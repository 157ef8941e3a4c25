"""bench/pg_released_graph.py, run as a real process on the local server in a small run: both
cases measured per child, the refreshed one on statistics analyzed after the release."""

from __future__ import annotations

import subprocess
import sys

from testenv import BENCH, run_bench

SCRIPT = BENCH / "pg_released_graph.py"


def test_the_released_graph_benchmark_measures_both_cases_and_their_ratio() -> None:
    out, table = run_bench("pg_released_graph.py", "--n", "600", "--rounds", "1")
    assert out["bench"] == "pg_released_graph" and out["n"] == 600
    (row,) = out["rounds"]
    assert row["stale"]["analyzed"] == [] and "tasks" in row["refreshed"]["analyzed"]
    for case in ("stale", "refreshed"):
        assert all(row[case][k] > 0 for k in ("server_ms", "client_ms", "wall_ms")), row
    assert set(out["median_stale_vs_refreshed"]) == {"server_ms", "client_ms", "wall_ms"}
    assert "stale over refreshed statistics" in table


def test_the_released_graph_benchmark_refuses_a_tiny_graph_with_a_one_line_reason() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--n", "3"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--n must be at least 10" in proc.stderr
