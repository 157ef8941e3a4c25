"""A worker that outlives the `dispatch --wait` that started it (Ctrl-C) keeps its report in
`.board/result.json`: the command says what to run once it exits, diagnostics points at that
command (never at `reclaim`, which would throw the finished work away and pay for the agent
again), and that command applies the report. Real processes, a real SQLite home."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from testenv import copy_template, wait_for

AB = [sys.executable, "-m", "agentboard"]


@pytest.fixture
def cli_home(home: Path, sqlite_template: Path) -> Path:
    """A fresh SQLite home (a copy of the suite's migrated template); AGENTBOARD_HOME points at it."""
    copy_template(sqlite_template, home)
    (home / "boards").mkdir(exist_ok=True)
    return home


def run(*args: str) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([*AB, *args], capture_output=True, text=True, env=dict(os.environ), timeout=120)
    assert p.returncode == 0, (args, p.stderr)
    return p


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:  # a zombie of the stopped dispatch counts as gone
            return fh.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_after_ctrl_c_on_dispatch_wait_diagnostics_points_at_dispatch_which_applies_the_kept_report_once(
        cli_home: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    agent = tmp_path / "agent.sh"
    agent.write_text("#!/bin/sh\n"
                     f"while [ ! -e {go} ]; do sleep 0.05; done\n"
                     "echo done > out.txt\n"
                     "echo run >> " + str(tmp_path / "started") + "\n"
                     "printf '{\"success\": true, \"summary\": \"slow work done\"}' > .board/result.json\n")
    agent.chmod(0o755)
    run("profiles", "add", "slow", "--command", str(agent))
    tid = json.loads(run("create", "slow task", "--assignee", "slow", "--json").stdout)["id"]
    try:
        proc = subprocess.Popen([*AB, "dispatch", "--wait"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=dict(os.environ))
        try:
            sel = selectors.DefaultSelector()
            sel.register(proc.stderr, selectors.EVENT_READ)  # type: ignore[arg-type]
            said = ""
            while "Ctrl-C stops it" not in said and sel.select(timeout=60):  # guard against a hang
                line = proc.stderr.readline()  # type: ignore[union-attr]
                if not line:
                    break
                said += line
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 130
            after = proc.stderr.read()  # type: ignore[union-attr]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        # one line: the worker still runs, and what records it once it exits
        (line,) = [ln for ln in after.splitlines() if ln.strip()]
        assert "1 worker(s) still running" in line and "`agentboard dispatch` after they exit" in line, after

        pid = json.loads(run("show", tid, "--json").stdout)["worker_pid"]
        go.touch()
        wait_for(lambda: _gone(int(pid)), what="the worker to finish")
        found = json.loads(run("diagnostics", "--json").stdout)
        (orphan,) = [f for f in found if f["kind"] == "orphan_run"]
        assert orphan["task_id"] == tid and orphan["fix"] == "agentboard dispatch"
        assert "result.json" in orphan["message"] and "would discard it" in orphan["message"]
        assert orphan["action"] == {"method": "POST", "path": "/api/dispatch", "body": None}

        # following the fix applies the kept report: the run completes, the agent is not started again
        run(*orphan["fix"].split()[1:])
        wait_for(lambda: json.loads(run("show", tid, "--json").stdout)["status"] == "done", what="the task done")
        runs = json.loads(run("runs", tid, "--json").stdout)
        assert [(r["outcome"], r["summary"]) for r in runs] == [("completed", "slow work done")]
        assert (tmp_path / "started").read_text().splitlines() == ["run"]
        assert not [f for f in json.loads(run("diagnostics", "--json").stdout) if f["kind"] == "orphan_run"]
    finally:
        go.touch()  # the worker ends whatever happened above
