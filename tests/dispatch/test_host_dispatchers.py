"""Several dispatchers on one host and home, as real processes: a dispatcher takes a guard and
workers over only from one that is gone, a guard survives a takeover signal sent before it is
ready, and a dispatcher's workers get an API that lives as long as it does."""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path

import pytest

from agentboard.api.serve import API_FILE
from agentboard.dispatch.guard import Guard
from agentboard.dispatch.liveness import group_has_live, pid_alive

from .conftest import wait_for
from .test_orphans import _first_pid
from .test_processes import _no_dispatcher_outlives_its_test, _start_dispatcher, _stop

__all__ = ["_no_dispatcher_outlives_its_test"]  # (autouse here too: no dispatcher outlives its test)

HOST = {"AGENTBOARD_HOST_ID": "host-a", "AGENTBOARD_CLAIM_TTL": 4}


def _started(tmp_path: Path, name: str) -> None:
    wait_for(lambda: "Ctrl-C to stop" in (tmp_path / f"{name}.log").read_text(), what=f"{name} started")


def test_a_second_dispatcher_on_the_host_leaves_the_first_one_s_worker_alone_and_a_kill_9_of_the_first_still_stops_it(
        ab, board, tmp_path):
    """Dispatchers started beside a running one on the same host and home (one then stopped,
    one killed) neither take its guard nor its worker: the worker works on, and when the first
    dispatcher is killed its own guard stops the worker at once."""
    ab.add_profile("w", command="sleep 600")
    t = board.create("long work", assignee="w")
    d1 = _start_dispatcher(ab, tmp_path, "d1", **HOST)
    pid = 0
    try:
        pid = _first_pid(board, t["id"])
        d2 = _start_dispatcher(ab, tmp_path, "d2", **HOST)
        d3 = _start_dispatcher(ab, tmp_path, "d3", **HOST)
        for name in ("d2", "d3"):  # started: past what it found of the other dispatcher
            wait_for(lambda name=name: any(s in (tmp_path / f"{name}.log").read_text() for s in (
                "its guard and its workers are left alone", "took over")), what=f"{name} started")
        _stop(d2)  # stopped on purpose: its guard ends what it holds after half the claim TTL (2 s)
        d3.send_signal(signal.SIGKILL)  # killed: its guard ends what it holds at once
        d3.wait()
        time.sleep(3.5)
        assert pid_alive(pid), "a dispatcher that did not own the worker ended it"
        assert board.runs(t["id"])[0]["status"] == "open"
        d1.send_signal(signal.SIGKILL)
        d1.wait()
        wait_for(lambda: not pid_alive(pid) and not group_has_live(pid), timeout=10,
                 what="the killed dispatcher's worker stopped by its guard")
        for name in ("d2", "d3"):
            assert "took over" not in (tmp_path / f"{name}.log").read_text()
    finally:
        _stop(d1)
        if pid and group_has_live(pid):  # (a failure leaves no worker behind)
            os.killpg(pid, signal.SIGKILL)


def test_a_guard_signalled_before_it_is_ready_survives_and_still_ends_its_workers(tmp_path):
    """A takeover signal (SIGUSR1) that reaches the guard before its handler is in place does
    not end it by the signal's default action: it is delivered once the guard is ready."""
    import subprocess

    worker = subprocess.Popen(["sleep", "600"], start_new_session=True)
    guard = Guard()
    try:
        guard.start()
        assert guard.pid is not None
        os.kill(guard.pid, signal.SIGUSR1)  # at once: the guard is still starting Python
        time.sleep(1.0)
        proc = guard._proc
        assert proc is not None and proc.poll() is None, f"the guard ended with status {proc and proc.returncode}"
    finally:
        guard.detach(0)
        worker.kill()
        worker.wait()


def test_a_dispatcher_whose_borrowed_api_died_hands_its_next_worker_a_live_api(ab, board, tmp_path):
    """A dispatcher started while another process served the home's API (another dispatcher,
    here killed before the task exists) still gives its workers an API that answers: the
    worker's `agentboard complete` goes through."""
    said = tmp_path / "said"
    d1 = _start_dispatcher(ab, tmp_path, "d1", **HOST)
    d2 = None
    try:
        _started(tmp_path, "d1")
        wait_for((Path(ab.home) / API_FILE).exists, what="d1's API recorded in the home")
        d2 = _start_dispatcher(ab, tmp_path, "d2", **HOST)
        _started(tmp_path, "d2")
        d1.send_signal(signal.SIGKILL)
        d1.wait()
        ab.add_profile("api", command="sh -c " + shlex.quote(f"agentboard complete --summary 'via the api' > {said} 2>&1"))
        t = board.create("report through the api", assignee="api")
        wait_for(lambda: board.runs(t["id"]) and board.runs(t["id"])[0]["status"] != "open", timeout=60,
                 what="the run closed")
        run = board.runs(t["id"])[0]
        assert (run["outcome"], run["summary"]) == ("completed", "via the api"), said.read_text()
    finally:
        _stop(d1)
        if d2 is not None:
            _stop(d2)


def test_a_dispatcher_locked_out_of_a_sqlite_board_takes_it_soon_after_its_holder_is_killed(ab, board, tmp_path):
    """On SQLite one dispatcher holds a board. Killed, it leaves no commit behind that would wake
    the others (its guard just stops its worker): a dispatcher locked out tries the lock again
    within seconds, not at its next interval, and restarts the task once its claim lapses."""
    if ab.settings.database_url:
        pytest.skip("a board lock is SQLite's: on PostgreSQL every dispatcher works every board")
    ab.add_profile("w", command="sleep 600")
    t = board.create("long work", assignee="w")
    slow = {"AGENTBOARD_DISPATCH_INTERVAL": 120, "AGENTBOARD_CLAIM_TTL": 4}
    d1 = _start_dispatcher(ab, tmp_path, "d1", AGENTBOARD_HOST_ID="host-a", **slow)
    d2 = None
    try:
        first = _first_pid(board, t["id"])
        d2 = _start_dispatcher(ab, tmp_path, "d2", AGENTBOARD_HOST_ID="host-b", **slow)
        _started(tmp_path, "d2")
        time.sleep(1)  # its first pass found the board held
        d1.send_signal(signal.SIGKILL)
        d1.wait()
        wait_for(lambda: len(board.runs(t["id"])) >= 2, timeout=30,
                 what="the task restarted by the dispatcher that was locked out")
        assert first != board.show(t["id"]).get("worker_pid")
    finally:
        _stop(d1)
        if d2 is not None:
            _stop(d2)
        for r in board.runs(t["id"]):
            pid = r.get("worker_pid")
            if pid and group_has_live(int(pid)):
                os.killpg(int(pid), signal.SIGKILL)
