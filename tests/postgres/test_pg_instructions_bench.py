"""bench/pg_instructions.py, run as a real process: it starts a PostgreSQL cluster of its own,
counts the server's instructions per completion under valgrind for agentboard and a bare
queue, and reports a positive count for each, agentboard's above the bare queue's. A wrong
system or count ends it with exit code 2 and a one-line reason."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from testenv import require_pg

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "pg_instructions.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


def test_the_instruction_count_of_a_completion_is_reported_for_agentboard_and_a_bare_queue() -> None:
    require_pg()
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (apt-get install valgrind)")
    proc = _run("--systems", "agentboard,raw", "--small", "20", "--large", "40")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = {r["system"]: r for r in out["rows"]}
    assert out["bench"] == "pg_instructions" and set(rows) == {"agentboard", "raw"}
    for row in rows.values():
        assert row["executed"] > 0 and row["preparing"] > 0
        assert row["total"] == pytest.approx(row["executed"] + row["preparing"], abs=2)
    # a board's completion (its function, event, run, rollup, checks) does more than a bare UPDATE
    assert rows["agentboard"]["executed"] > 3 * rows["raw"]["executed"]
    assert "instructions executed per completion" in proc.stderr and "vs agentboard" in proc.stderr


def test_a_wrong_system_or_count_is_refused_with_a_reason() -> None:
    proc = _run("--systems", "agentboard,nosuch")
    assert proc.returncode == 2 and "unknown system nosuch" in proc.stderr
    proc = _run("--small", "50", "--large", "50")
    assert proc.returncode == 2 and "--large must be greater than --small" in proc.stderr
