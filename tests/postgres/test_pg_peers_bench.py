"""bench/pg_peers.py, run as a real process on the local server in a smoke-sized run: its JSON
line has a row for every verb, process count and system, every measurement in it is positive,
and agentboard's ratios against each peer are there. A peer library that is not installed
ends the script with exit code 2 and the command that installs it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from testenv import PG_URL, require_pg

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "pg_peers.py"
VERBS = {"create", "claim", "complete", "drain"}
MEASURED = ("ops_per_s", "client_cpu_ms_per_op", "server_cpu_ms_per_op", "wal_bytes_per_op", "own_wal_bytes_per_op")


def _run(*args: str) -> tuple[dict[str, Any], str]:
    require_pg()
    proc = subprocess.run([sys.executable, str(SCRIPT), "--pg", PG_URL, "--rounds", "1", *args],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def _check(out: dict[str, Any], systems: list[str], procs: list[int]) -> None:
    assert out["bench"] == "pg_peers" and out["systems"] == systems and out["procs"] == procs
    assert out["synchronous_commit"] == "on"
    rows = {(r["verb"], r["procs"], r["system"]): r for r in out["rows"]}
    assert set(rows) == {(v, n, s) for v in VERBS for n in procs for s in systems}
    for key, row in rows.items():
        for m in MEASURED:
            assert isinstance(row[m], int | float) and row[m] > 0, (key, m, row[m])
        # the WAL writer, checkpointer and background writer may not run at all in a short phase
        assert row["background_cpu_ms_per_op"] >= 0, key
    ratios = {(r["verb"], r["procs"], r["peer"]): r for r in out["ratios"]}
    peers = [s for s in systems if s != "agentboard"]
    assert set(ratios) == {(v, n, p) for v in VERBS for n in procs for p in peers}
    for key, r in ratios.items():
        for m in ("throughput", "cpu", "wal", "own_wal"):
            assert r[m] > 0, (key, m)
    assert all(x > 0 for x in out["load_average"]["start"] + out["load_average"]["end"])


def test_the_peer_benchmark_measures_agentboard_and_a_raw_queue_with_every_number_positive() -> None:
    out, table = _run("--quick", "--ops", "20", "--systems", "agentboard,raw")
    _check(out, ["agentboard", "raw"], [1, 2])
    assert out["ops"] == 20
    assert "agentboard / peer" in table and "load average" in table


def test_the_peer_benchmark_measures_procrastinate_and_pgqueuer_when_they_are_installed() -> None:
    for package in ("procrastinate", "pgqueuer"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed (pip install -e '.[bench]')")
    out, _ = _run("--ops", "10", "--procs", "1")
    _check(out, ["agentboard", "procrastinate", "pgqueuer", "raw"], [1])
    assert out["versions"]["procrastinate"] and out["versions"]["pgqueuer"]


def test_a_peer_that_is_not_installed_ends_the_benchmark_with_the_command_that_installs_it() -> None:
    # the process sees procrastinate as absent, as on a machine without the bench extra
    hide = ("import runpy, sys; sys.modules['procrastinate'] = None; "
            f"sys.argv = [{str(SCRIPT)!r}, '--systems', 'agentboard,procrastinate']; "
            f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "procrastinate not installed" in proc.stderr and "pip install -e '.[bench]'" in proc.stderr


def test_the_completion_with_its_parts_taken_away_is_measured_beside_the_whole_one() -> None:
    # the floor (every part away) and one part alone: the function's text still has each part
    systems = ["agentboard", "agentboard-without-all", "agentboard-without-count-trigger+rollup"]
    out, table = _run("--quick", "--ops", "20", "--procs", "1", "--systems", ",".join(systems))
    _check(out, systems, [1])
    assert "agentboard-without-all" in table


def test_an_unknown_part_of_the_completion_ends_the_benchmark_with_the_parts_to_choose_from() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--systems", "agentboard,agentboard-without-budgets"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "unknown system agentboard-without-budgets" in proc.stderr and "count-trigger" in proc.stderr


def test_with_waits_each_row_says_what_the_backends_were_doing_and_the_shares_add_up() -> None:
    out, table = _run("--ops", "1200", "--procs", "1", "--systems", "agentboard,raw", "--waits")
    _check(out, ["agentboard", "raw"], [1])
    for row in out["rows"]:
        waits = row["waits"]
        assert set(waits) == {"cpu", "client", "wal_sync", "wal_write", "lock", "lwlock", "other"}
        assert all(0 <= v <= 1 for v in waits.values()), row
        assert abs(sum(waits.values()) - 1) < 0.01, row
        # the phase's backend was seen at work (agentboard's idle notification sender left out)
        assert waits["cpu"] + waits["wal_sync"] > 0, row
    assert "backends' samples (--waits)" in table
