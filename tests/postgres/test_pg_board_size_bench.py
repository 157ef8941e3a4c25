"""bench/pg_board_size.py, run as a real process on the local server in a smoke-sized run: a
row per round with every verb's server CPU measured, the ratios to the first round's, and the
statements planned anew (none on a board this small)."""

from __future__ import annotations

import subprocess
import sys

from testenv import BENCH, run_bench

SCRIPT = BENCH / "pg_board_size.py"


def test_the_board_size_benchmark_measures_every_verb_in_every_round_against_the_first() -> None:
    out, table = run_bench("pg_board_size.py", "--rounds", "2", "--n", "20")
    assert out["bench"] == "pg_board_size" and out["n"] == 20
    assert [r["round"] for r in out["rounds"]] == [1, 2]
    assert [r["done_tasks_before"] for r in out["rounds"]] == [0, 40]
    for row in out["rounds"]:
        assert set(row["server_us_per_op"]) == {"create", "claim", "complete", "drain"}
        assert all(v > 0 for v in row["server_us_per_op"].values()), row
    assert out["rounds"][0]["vs_first_round"] == {"create": 1.0, "claim": 1.0, "complete": 1.0, "drain": 1.0}
    assert out["replanned_statements"] == []
    assert "no prepared statement was planned anew" in table


def test_the_board_size_benchmark_refuses_a_single_round_with_a_one_line_reason() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--rounds must be at least 2" in proc.stderr
