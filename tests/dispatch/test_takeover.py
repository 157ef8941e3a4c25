"""A dispatcher restarted on the host, as real processes: the workers it takes over from the one
before are its own workers in every way (stopped once their run is no longer current, their exit
logged and counted), and a worker its dead dispatcher's guard ended goes back to the queue as the
dispatcher's loss, not as a failure of the task — while one that crashed by itself still counts."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from agentboard.dispatch.liveness import group_has_live, pid_alive

from .conftest import all_in, events, wait_for
from .test_orphans import _first_pid
from .test_processes import (
    _env,
    _no_dispatcher_outlives_its_test,
    _start_dispatcher,
    _started,
    _stop,
)

__all__ = ["_no_dispatcher_outlives_its_test"]  # (autouse here too: no dispatcher outlives its test)

HOST = {"AGENTBOARD_HOST_ID": "host-a"}


def _waits_for(go: Path, then: str) -> str:
    """A worker that waits until ``go`` exists, then runs ``then``."""
    return "sh -c " + shlex.quote(f"while [ ! -f {go} ]; do sleep 0.05; done; {then}")


def _taken_over(ab, board, tmp_path: Path, command: str, *extra: str) -> tuple[str, int, subprocess.Popen[bytes]]:
    """A task whose worker runs ``command``; its dispatcher is stopped on purpose (SIGTERM) while
    the worker runs, and the next one on the host (``d2``, started with ``extra`` arguments)
    takes it over. The task's id, the worker's pid and ``d2``."""
    ab.add_profile("w", command=command)
    t = board.create("works across a restart", assignee="w")
    d1 = _start_dispatcher(ab, tmp_path, "d1", **HOST)
    pid = _first_pid(board, t["id"])
    _stop(d1)
    log = open(tmp_path / "d2.log", "ab")  # noqa: SIM115 - the dispatcher's output, closed with it
    # (a change made while it starts may reach it only at its next interval: a short one)
    env = _env(ab, AGENTBOARD_DISPATCH_INTERVAL=1, **HOST)
    d2 = subprocess.Popen([sys.executable, "-m", "agentboard", "dispatcher", *extra], env=env,
                          stdout=log, stderr=log, start_new_session=True)
    _started.append(d2)
    wait_for(lambda: "took over 1 worker(s)" in (tmp_path / "d2.log").read_text(), what="the worker taken over")
    assert pid_alive(pid)
    return str(t["id"]), pid, d2


def test_a_worker_taken_over_after_a_restart_is_stopped_once_its_task_is_archived(ab, board, tmp_path):
    """The task of a worker the restarted dispatcher took over is archived: its run is closed and
    its worker stopped within a pass or two, as a worker the dispatcher started itself would be
    (not left to work, and spend, to its end)."""
    tid, pid, d2 = _taken_over(ab, board, tmp_path, "sleep 600")
    try:
        board.archive(tid, actor="ana")
        wait_for(lambda: not pid_alive(pid) and not group_has_live(pid), timeout=30,
                 what="the taken-over worker of the archived task stopped")
        assert board.runs(tid)[0]["status"] == "closed"
    finally:
        _stop(d2)
        if group_has_live(pid):  # (a failure leaves no worker behind)
            os.killpg(pid, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_taken_over_worker_that_reports_through_the_cli_is_logged_and_counted_when_it_exits(ab, board, tmp_path):
    """A worker taken over reports with `agentboard complete` (its run closes before it exits):
    when it exits, the dispatcher that took it over logs its `run closed` line and counts it in
    `agentboard_runs_total`, and says its exit status is unknown (it is not its child)."""
    go, port = tmp_path / "go", _free_port()
    tid, pid, d2 = _taken_over(ab, board, tmp_path, _waits_for(go, "agentboard complete --summary 'after the restart'"),
                               "--metrics-port", str(port))
    try:
        go.write_text("")
        wait_for(lambda: all_in(board, [tid], {"done"}), timeout=30, what="the task done")
        wait_for(lambda: "run closed: completed" in (tmp_path / "d2.log").read_text(), timeout=30,
                 what="the run closed line of the taken-over worker")
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        counted = [ln for ln in text.splitlines() if ln.startswith("agentboard_runs_total{")
                   and 'outcome="completed"' in ln and 'profile="w"' in ln]
        assert counted and float(counted[0].rsplit(" ", 1)[1]) == 1.0, text
        assert "exit status is unknown" in (tmp_path / "d2.log").read_text()
    finally:
        _stop(d2)
    (run,) = board.runs(tid)
    assert (run["outcome"], run["summary"], run["exit_code"]) == ("completed", "after the restart", None)


def test_a_task_whose_dispatcher_is_killed_twice_is_not_given_up_it_runs_again_and_completes(ab, board, tmp_path):
    """kill -9 of the dispatcher, twice, while the task's worker works (the failure limit is 2):
    each time its guard ends the worker and the next dispatcher returns the task to the queue
    saying the dispatcher died, counted as no failure; the third run completes."""
    marker = tmp_path / "third"
    ab.add_profile("w", command="sh -c " + shlex.quote(
        f"if [ -f {marker} ]; then echo '{{\"success\": true, \"summary\": \"ok\"}}' > .board/result.json; "
        "else sleep 600; fi"))
    t = board.create("outlives two dispatchers", assignee="w")
    procs = []
    try:
        for n in (1, 2):
            d = _start_dispatcher(ab, tmp_path, f"d{n}", **HOST)
            procs.append(d)
            wait_for(lambda n=n: len(board.runs(t["id"])) == n and board.runs(t["id"])[-1]["worker_pid"]
                     and board.show(t["id"])["status"] == "running", timeout=30, what=f"run {n} working")
            pid = int(board.runs(t["id"])[-1]["worker_pid"])
            d.send_signal(signal.SIGKILL)
            d.wait()
            wait_for(lambda pid=pid: not group_has_live(pid), what="the killed dispatcher's worker ended by its guard")
        marker.write_text("")
        d3 = _start_dispatcher(ab, tmp_path, "d3", **HOST)
        procs.append(d3)
        wait_for(lambda: all_in(board, [t["id"]], {"done", "blocked"}), timeout=60, what="the task finished")
    finally:
        for d in procs:
            _stop(d)
    shown = board.show(t["id"])
    assert shown["status"] == "done", shown.get("block_reason")
    runs = board.runs(t["id"])
    assert [r["outcome"] for r in runs] == ["stale", "stale", "completed"]
    assert all("its dispatcher died" in r["error"] and "not counted" in r["error"] for r in runs[:2])
    gone = events(board, t["id"], "stale")
    assert [e["payload"]["failures"] for e in gone] == [0, 0] and all(e["payload"]["dispatcher_gone"] for e in gone)
    assert not events(board, t["id"], "gave_up")


def test_a_taken_over_worker_that_crashes_by_itself_is_still_counted_as_a_failure(ab, board, tmp_path):
    """A worker taken over that crashes while its new dispatcher runs (no guard ended it): a
    crash counted against the task, its status said to be unknown."""
    go = tmp_path / "go"
    tid, _pid, d2 = _taken_over(ab, board, tmp_path, _waits_for(go, "echo boom >&2; exit 3"))
    try:
        go.write_text("")
        wait_for(lambda: events(board, tid, "crashed"), timeout=30, what="the crash")
    finally:
        _stop(d2)
    first = board.runs(tid)[0]
    assert first["outcome"] == "crashed" and "exit status is unknown" in first["error"]
    assert events(board, tid, "crashed")[0]["payload"]["failures"] == 1
    assert not events(board, tid, "stale")


def test_a_guard_records_the_workers_it_ends_and_not_one_that_exited_by_itself(tmp_path):
    """The guard of a dispatcher that died writes down the live workers it ends, before it ends
    them; a worker whose process had already exited is not written down."""
    from agentboard.dispatch.guard import Guard, ended_by_guard, ended_file

    pid_file = tmp_path / "guard-h.pid"
    live = subprocess.Popen(["sleep", "600"], start_new_session=True)
    done = subprocess.Popen(["true"], start_new_session=True)
    done.wait()
    guard = Guard()
    try:
        guard.start(pid_file)
        guard.hold(live.pid)
        guard.hold(done.pid)
        proc = guard._proc
        assert proc is not None and proc.stdin is not None
        proc.stdin.close()  # what a dispatcher's death does to its pipe
        live.wait(timeout=20)
        proc.wait(timeout=20)
    finally:
        if live.poll() is None:
            live.kill()
            live.wait()
    found = ended_by_guard(ended_file(pid_file), live.pid, 0)
    assert found is not None and found[1] == "died"
    assert ended_by_guard(ended_file(pid_file), done.pid, 0) is None
    assert re.fullmatch(r"(\d+ \d+\.\d{3} died\n)+", ended_file(pid_file).read_text())


def test_a_worker_its_stopped_dispatcher_s_guard_ends_unclaimed_returns_its_task_uncounted(ab, board, tmp_path):
    """A dispatcher stopped on purpose, and none started on the host within half the claim TTL:
    its guard ends the worker; the next dispatcher returns the task to the queue saying so, not
    counted as a failure."""
    second = tmp_path / "second"
    ab.add_profile("w", command="sh -c " + shlex.quote(
        f"if [ -f {second} ]; then echo '{{\"success\": true, \"summary\": \"ok\"}}' > .board/result.json; "
        "else sleep 600; fi"))
    t = board.create("left behind", assignee="w")
    d1 = _start_dispatcher(ab, tmp_path, "d1", AGENTBOARD_CLAIM_TTL=4, **HOST)
    pid = _first_pid(board, t["id"])
    _stop(d1)
    wait_for(lambda: not group_has_live(pid), timeout=20, what="the worker ended by the guard after 2 s")
    second.write_text("")
    d2 = _start_dispatcher(ab, tmp_path, "d2", **HOST)
    try:
        wait_for(lambda: all_in(board, [t["id"]], {"done"}), timeout=30, what="the task run again")
    finally:
        _stop(d2)
    first = board.runs(t["id"])[0]
    assert first["outcome"] == "stale" and "no dispatcher on this host took its worker over" in first["error"]
    assert events(board, t["id"], "stale")[0]["payload"]["failures"] == 0
