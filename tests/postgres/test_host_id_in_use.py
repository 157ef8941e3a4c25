"""Two dispatchers that would share a host id (two homes on one machine, or two machines with one
host name, the default host id) on one PostgreSQL board: the second refuses to start in one line
and touches nothing, so the first one's running work is never closed as crashed by the other.
Once the first is gone (its process dead on this machine; from another machine, its mark older
than ``host_id.FRESH``) the host id is free; the dispatchers of one home share it as before."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from testenv import wait_for

import agentboard
from agentboard.dispatch import host_id
from agentboard.kernel import monitoring

SLOW = "sh -c " + shlex.quote("sleep 30; echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json")


def _env(url: str, home: Path, host: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    env.update(AGENTBOARD_HOME=str(home), AGENTBOARD_DATABASE_URL=url, AGENTBOARD_HOST_ID=host,
               AGENTBOARD_SPAWN_GRACE="0", AGENTBOARD_DISPATCH_INTERVAL="1")
    return env


def _dispatcher(url: str, home: Path, host: str) -> subprocess.Popen[bytes]:
    home.mkdir(parents=True, exist_ok=True)
    log = open(home / "dispatcher.log", "ab")
    return subprocess.Popen([sys.executable, "-m", "agentboard", "dispatcher"], env=_env(url, home, host),
                            stdout=log, stderr=log, start_new_session=True)


def _run(url: str, home: Path, host: str, *args: str) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "agentboard", *args], env=_env(url, home, host),
                          capture_output=True, text=True, timeout=60)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)


def _mark(url: str, host: str) -> dict[str, Any]:
    ab = agentboard.connect(url)
    try:
        raw = ab.db.read(lambda tx: tx.scalar("SELECT value FROM agentboard_meta WHERE key = :k",
                                              {"k": f"dispatcher_pass:{host}"}))
    finally:
        ab.close()
    return json.loads(raw) if raw else {}


def test_a_second_home_with_the_same_host_id_refuses_to_start_and_the_first_ones_work_goes_on(
        pg_url: str, tmp_path: Path) -> None:
    ab = agentboard.connect(pg_url)
    ab.add_profile("slow", command=SLOW)
    board = ab.board()
    ids = [board.create(f"long {i}", assignee="slow")["id"] for i in range(3)]
    first = _dispatcher(pg_url, tmp_path / "a", "same")
    try:
        wait_for(lambda: all(board.show(t)["status"] == "running" for t in ids), 60, "the first host's runs")
        wait_for(lambda: _mark(pg_url, "same").get("by"), 30, "the first dispatcher's signed mark")
        second = _run(pg_url, tmp_path / "b", "same", "dispatcher")
        lines = second.stderr.strip().splitlines()
        assert second.returncode == 4, second.stderr
        assert "another dispatcher runs with host id 'same'" in lines[-1] and f"pid {first.pid}" in lines[-1]
        assert "AGENTBOARD_HOST_ID" in lines[-1]
        # a one-shot pass from that home is refused the same way; from the first one's home it is not
        once = _run(pg_url, tmp_path / "b", "same", "dispatch")
        assert once.returncode == 4 and "another dispatcher runs with host id" in once.stderr
        beside = _run(pg_url, tmp_path / "a", "same", "dispatch")
        assert beside.returncode == 0, beside.stderr
        # the first host's work was never touched
        runs = ab.db.read(lambda tx: tx.all("SELECT task_id, status, outcome FROM task_runs ORDER BY id"))
        assert [(r["status"], r["outcome"]) for r in runs] == [("open", None)] * 3, runs
        assert all(board.show(t)["status"] == "running" for t in ids)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # a dead dispatcher on this machine frees its host id
        first.wait(30)
    later = _dispatcher(pg_url, tmp_path / "b", "same")
    try:
        wait_for(lambda: (_mark(pg_url, "same").get("by") or {}).get("owner", "").startswith(f"{later.pid}:"),
                 60, "the second home's dispatcher signing the mark")
        assert later.poll() is None
    finally:
        _stop(later)
        for t in ids:
            if board.show(t)["status"] == "running":
                board.reclaim(t)
        ab.close()


@pytest.mark.parametrize("age", [5.0, host_id.FRESH + 30])
def test_a_host_id_marked_from_another_machine_is_held_until_its_mark_is_old(
        pg_url: str, tmp_path: Path, age: float) -> None:
    elsewhere = {"machine": "another-boot-id/4026531836", "home": "/srv/agentboard", "owner": "4242:1:abcd",
                 "node": "clone-of-this-vm"}
    ab = agentboard.connect(pg_url)
    monitoring.mark_pass(ab.db, "cloned", time.time() - age, None, by=elsewhere)
    ab.close()
    out = _run(pg_url, tmp_path / "here", "cloned", "dispatch")
    if age < host_id.FRESH:
        assert out.returncode == 4, out.stderr
        assert "pid 4242 on clone-of-this-vm, home /srv/agentboard" in out.stderr
        assert _mark(pg_url, "cloned")["by"] == elsewhere  # not overwritten
    else:
        assert out.returncode == 0, out.stderr
        assert _mark(pg_url, "cloned")["by"]["machine"] == host_id.machine()


def _another_machine() -> list[str]:
    """The command prefix that runs a process as if on another machine (a pid namespace of its
    own: ``host_id.machine()`` differs), or skip where it cannot be made."""
    import shutil

    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "--pid", "--fork", "--mount-proc", "true"],
                                         capture_output=True).returncode != 0:
        pytest.skip("needs unshare --pid (root) to stand in for another machine")
    return [unshare, "--pid", "--fork", "--mount-proc"]


def test_an_idle_dispatcher_with_a_long_interval_keeps_its_host_id_from_another_machine(
        pg_url: str, tmp_path: Path) -> None:
    prefix = _another_machine()
    env = {**_env(pg_url, tmp_path / "a", "idle"), "AGENTBOARD_DISPATCH_INTERVAL": "3600"}
    (tmp_path / "a").mkdir()
    log = open(tmp_path / "a" / "dispatcher.log", "ab")  # noqa: SIM115 - the child's
    first = subprocess.Popen([sys.executable, "-m", "agentboard", "dispatcher"], env=env, stdout=log, stderr=log,
                             start_new_session=True)
    log.close()
    try:
        signed = wait_for(lambda: _mark(pg_url, "idle").get("by"), 60, "the first dispatcher's signed mark")
        # as if it had been idle for longer than a mark holds the id (its next pass is an hour away)
        old = time.time() - host_id.FRESH - 30
        ab = agentboard.connect(pg_url)
        ab.db.write(lambda tx: tx.execute("UPDATE agentboard_meta SET value = :v WHERE key = :k", {
            "k": "dispatcher_pass:idle", "v": json.dumps({"at": old, "seen": old, "boards": None, "by": signed})}))
        ab.close()
        # a live dispatcher marks every PASS_MARK_EVERY seconds whether or not it passes
        wait_for(lambda: time.time() - float(_mark(pg_url, "idle").get("seen") or 0) < host_id.FRESH, 60,
                 "the idle dispatcher marking that it lives")
        (tmp_path / "b").mkdir()
        second = subprocess.run([*prefix, sys.executable, "-m", "agentboard", "dispatcher"],
                                env=_env(pg_url, tmp_path / "b", "idle"), capture_output=True, text=True, timeout=60)
        assert second.returncode == 4, second.stderr
        assert "another dispatcher runs with host id 'idle'" in second.stderr.strip().splitlines()[-1]
        assert _mark(pg_url, "idle")["by"] == signed
        assert first.poll() is None
    finally:
        _stop(first)
