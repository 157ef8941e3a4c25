"""One-shot `agentboard dispatch`: when the background process serving its workers' API dies
while a worker runs, a later pass serves that API again on the port the worker was given, so
the worker's report (retried meanwhile) gets through and the job is not run twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from .conftest import wait_for


def _cli(ab: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTBOARD_HOME": str(ab.home), "AGENTBOARD_SPAWN_GRACE": "0.2"}
    if ab.settings.database_url:
        env["AGENTBOARD_DATABASE_URL"] = ab.settings.database_url
    return subprocess.run([sys.executable, "-m", "agentboard", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_later_pass_serves_the_api_again_for_a_worker_whose_api_process_died(
        ab: Any, board: Any, tmp_path: Path) -> None:
    go, journal = tmp_path / "go", tmp_path / "journal"
    ab.add_profile("long", command="sh -c " + json.dumps(
        f"echo start >> {journal}; while [ ! -e {go} ]; do sleep 0.05; done; "
        "agentboard complete --summary 'long done'"))
    t = board.create("oneshot long", assignee="long")["id"]
    try:
        _second_pass_serves_it(ab, board, t, go, journal)
    finally:
        go.write_text("")  # whatever happened, the worker ends: nothing is left running


def _second_pass_serves_it(ab: Any, board: Any, t: str, go: Path, journal: Path) -> None:
    first = _cli(ab, "dispatch")
    assert first.returncode == 0, first.stderr
    api = wait_for(lambda: (ab.home / "api.json").exists() and json.loads((ab.home / "api.json").read_text()),
                   what="the background API recorded")
    os.kill(int(api["pid"]), signal.SIGKILL)  # the background API dies while its worker runs
    wait_for(lambda: _gone(int(api["pid"])), what="the background API process gone")
    second = _cli(ab, "dispatch")
    assert second.returncode == 0, second.stderr
    assert "1 worker(s) report to an API served in the background" in second.stderr
    assert "started by an earlier pass" in second.stderr
    go.write_text("")  # the worker reports now: to the API of the second pass, on the same port
    wait_for(lambda: board.show(t)["status"] == "done", timeout=40, what="the worker's report")
    # the second pass serves until that worker has exited, then stops
    wait_for(lambda: not (ab.home / "api.json").exists(), what="the background API to stop")
    assert [(r["outcome"], r["summary"]) for r in board.runs(t)] == [("completed", "long done")]
    assert journal.read_text().split() == ["start"]  # it ran once: no nudge
    assert not [e for e in board.events(task_id=t, limit=1000) if e["kind"] == "nudged"]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:  # a zombie counts as gone
            return fh.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
