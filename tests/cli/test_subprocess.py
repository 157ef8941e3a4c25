"""End to end through real processes: start-up imports, a shell worker, live watch, PostgreSQL."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import pytest

AB = [sys.executable, "-m", "agentboard"]


def run(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    p = subprocess.run([*AB, *args], capture_output=True, text=True, env=full_env, timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"agentboard {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p


def imported_modules(*args: str) -> set[str]:
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "agentboard", *args],
                       capture_output=True, text=True, env=dict(os.environ), timeout=120)
    names = set()
    for line in p.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def test_version_is_light(cli_home: Path) -> None:
    p = run("--version")
    assert p.stdout.startswith("agentboard ")
    mods = imported_modules("--version")
    assert "sqlalchemy" not in mods and "rich" not in mods and "click" not in mods


def test_worker_verbs_import_only_what_they_need(cli_home: Path) -> None:
    mods = imported_modules("complete", "--help")
    assert "sqlalchemy" not in mods and "rich" not in mods
    assert not any(m.startswith(("agentboard.cli.tasks", "agentboard.cli.boards", "fastapi", "mcp")) for m in mods)
    tid = json.loads(run("create", "x", "--json").stdout)["id"]
    mods = imported_modules("complete", tid)
    assert "rich" not in mods and "alembic" not in mods


def test_shell_worker_end_to_end(cli_home: Path) -> None:
    run("profiles", "add", "sh", "--command", "true")
    tid = json.loads(run("create", "count lines", "--assignee", "sh", "--json").stdout)["id"]
    run_id = json.loads(run("claim", tid, "--json").stdout)["run_id"]
    worker = {"AGENTBOARD_TASK": tid, "AGENTBOARD_RUN_ID": str(run_id), "AGENTBOARD_BOARD": "default"}
    task = json.loads(run("show", "--json", env=worker).stdout)
    assert task["id"] == tid and task["status"] == "running"
    run("heartbeat", "--note", "1 of 2", env=worker)
    run("reclaim", tid)
    late = run("complete", "--summary", "late", env=worker, check=False)
    assert late.returncode == 4
    assert late.stderr.startswith("error: run ") and "no longer current" in late.stderr
    assert len(late.stderr.strip().splitlines()) == 1 and late.stdout == ""
    run_id = json.loads(run("claim", tid, "--json").stdout)["run_id"]
    worker["AGENTBOARD_RUN_ID"] = str(run_id)
    done = run("complete", "--summary", "42 lines", "--metadata", '{"lines": 42}', env=worker)
    assert done.stdout.strip() == f"{tid}: done"
    runs = json.loads(run("runs", tid, "--json").stdout)
    assert [(r["outcome"], r["metadata"]) for r in runs] == [("reclaimed", None), ("completed", {"lines": 42})]


def test_ctrl_c_on_dispatch_wait_stops_serving_with_130_and_leaves_the_worker_running(cli_home: Path,
                                                                                     tmp_path: Path) -> None:
    flag = tmp_path / "started"
    run("profiles", "add", "slow", "--command", f"sh -c 'touch {flag}; sleep 30'")
    tid = json.loads(run("create", "slow work", "--assignee", "slow", "--json").stdout)["id"]
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
        assert "Ctrl-C stops it" in said, said
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        assert flag.exists()
        task = json.loads(run("show", tid, "--json").stdout)
        assert task["status"] == "running"  # its worker goes on; it can report through .board/result.json
        pid = task["worker_pid"]
        os.kill(pid, 0)  # still alive
        os.killpg(pid, signal.SIGKILL)  # the worker leads a process group of its own
    finally:
        if proc.poll() is None:
            proc.kill()


def test_dispatch_wait_records_a_silent_workers_exit_after_its_one_nudge(cli_home: Path) -> None:
    # the worker exits 0 without reporting: the pass nudges it once (a second start for the same
    # run, which ends at once too); --wait returns only when that exit is recorded as well
    run("profiles", "add", "silent", "--command", "true")
    tid = json.loads(run("create", "says nothing", "--assignee", "silent", "--json").stdout)["id"]
    run("dispatch", "--wait")
    (only,) = json.loads(run("runs", tid, "--json").stdout)
    assert (only["status"], only["outcome"]) == ("closed", "protocol_violation"), only
    kinds = [json.loads(line)["kind"] for line in run("tail", tid, "--once", "--json").stdout.splitlines()]
    assert "nudged" in kinds, kinds


def test_errors_have_no_traceback(cli_home: Path) -> None:
    for args, code in ((["show", "t_deadbeef"], 3), (["create", ""], 2), (["list", "--board", "a b"], 2),
                       (["nonsense"], 2), (["create"], 2)):
        p = run(*args, check=False)
        assert p.returncode == code, (args, p.stderr)
        assert p.stderr.startswith("error: ") and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert p.stdout == ""


def test_watch_follows_new_events_and_stops_on_interrupt(cli_home: Path) -> None:
    proc = subprocess.Popen([*AB, "watch", "--json", "--since", "0", "--kinds", "created"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        tid = json.loads(run("create", "appears live", "--json").stdout)["id"]
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        seen = None
        while seen is None and sel.select(timeout=60):  # guard against a hang, not a timing check
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            ev = json.loads(line)
            if ev["task_id"] == tid:
                seen = ev
        assert seen is not None and seen["kind"] == "created"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        assert "Traceback" not in proc.stderr.read()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.postgres
def test_postgres_smoke(pg_database: str, home: Path) -> None:
    env = {"AGENTBOARD_DATABASE_URL": pg_database}
    info = json.loads(run("init", "--json", env=env).stdout)
    assert info["database"].startswith("postgresql")
    run("profiles", "add", "w", "--command", "true", env=env)
    p = json.loads(run("create", "parent", "--assignee", "w", "--json", env=env).stdout)["id"]
    c = json.loads(run("create", "child", "--assignee", "w", "--parent", p, "--json", env=env).stdout)["id"]
    run_id = json.loads(run("claim", p, "--json", env=env).stdout)["run_id"]
    run("complete", "--summary", "ok", env={**env, "AGENTBOARD_TASK": p, "AGENTBOARD_RUN_ID": str(run_id)})
    tasks = {t["id"]: t["status"] for t in json.loads(run("list", "--json", env=env).stdout)}
    assert tasks == {p: "done", c: "ready"}
    bad = run("link", c, p, env=env, check=False)
    assert bad.returncode == 4 and "cycle" in bad.stderr
    run("boards", "create", "other", "--switch", env=env)
    # a task id finds its board from any current board; a --board naming another one is refused
    assert json.loads(run("show", p, "--json", env=env).stdout)["board"] == "default"
    wrong = run("show", p, "--board", "other", env=env, check=False)
    assert wrong.returncode == 2 and "on board 'default'" in wrong.stderr
    assert run("show", "t_00000000", env=env, check=False).returncode == 3
    assert not (home / "agentboard.db").exists()
