"""No task's work runs twice at once: a killed dispatcher's workers die with it, a restarted one
stops its own leftovers whose task moved on, and one thread watches every worker's exit."""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from agentboard.cgroups import WorkerCgroups
from agentboard.dispatch.guard import guard_pid_file
from agentboard.dispatch.liveness import group_has_live, pid_alive

from .conftest import all_in, completed_runs, open_runs, wait_for
from .test_processes import _start_dispatcher, _stop


def _journal_agent(journal: Path, done_marker: Path) -> str:
    """An agent that notes in ``journal`` when each of its runs begins and ends (a TERM ends it);
    it works until ``done_marker`` exists when it starts, then reports done at once."""
    script = (
        f"j={journal}; trap 'echo end $AGENTBOARD_RUN_ID >> $j; exit 143' TERM; "
        "echo begin $AGENTBOARD_RUN_ID >> $j; "
        f"if [ -f {done_marker} ]; then echo '{{\"success\": true, \"summary\": \"ok\"}}' > .board/result.json; "
        "echo end $AGENTBOARD_RUN_ID >> $j; exit 0; fi; "
        "sleep 600 & wait")
    return "sh -c " + shlex.quote(script)


def _lines(path: Path) -> list[str]:
    return path.read_text().split("\n")[:-1] if path.exists() else []


def _no_overlap(journal: Path) -> None:
    """Every run's work ended before the next run's began."""
    running: set[str] = set()
    for line in _lines(journal):
        what, run = line.split()
        if what == "begin":
            assert not running, f"run {run} began while {running} still worked: {_lines(journal)}"
            running.add(run)
        else:
            running.discard(run)


def _first_pid(board: Any, task_id: str) -> int:
    wait_for(lambda: board.runs(task_id) and board.runs(task_id)[0]["worker_pid"], what="the worker's pid")
    return int(board.runs(task_id)[0]["worker_pid"])


def test_a_killed_dispatcher_s_worker_stops_with_it_and_its_task_completes_once(ab, board, tmp_path):
    """kill -9 of the dispatcher: its agent is stopped (not left working as an orphan), and the
    task runs again and completes exactly once, never two runs at the same time."""
    journal, marker = tmp_path / "journal", tmp_path / "second"
    ab.add_profile("w", command=_journal_agent(journal, marker))
    t = board.create("long work", assignee="w")
    d1 = _start_dispatcher(ab, tmp_path, "d1", AGENTBOARD_HOST_ID="host-a", AGENTBOARD_CLAIM_TTL=3)
    pid = _first_pid(board, t["id"])
    wait_for(lambda: _lines(journal) == [f"begin {board.runs(t['id'])[0]['id']}"], what="the agent at work")
    d1.send_signal(signal.SIGKILL)
    d1.wait()
    wait_for(lambda: not pid_alive(pid) and not group_has_live(pid), what="the killed dispatcher's worker gone")
    marker.write_text("")
    # another host takes the task over once its claim lapsed
    d2 = _start_dispatcher(ab, tmp_path, "d2", AGENTBOARD_HOST_ID="host-b", AGENTBOARD_CLAIM_TTL=3)
    try:
        wait_for(lambda: all_in(board, [t["id"]], {"done"}), what="the task done on the other host")
    finally:
        _stop(d2)
    assert completed_runs(ab.db, t["id"]) == 1 and open_runs(ab.db) == 0
    runs = board.runs(t["id"])
    assert [r["outcome"] for r in runs][-1] == "completed" and runs[0]["worker_host"] == "host-a"
    assert runs[-1]["worker_host"] == "host-b"
    _no_overlap(journal)


def test_a_killed_dispatcher_s_worker_takes_what_it_started_in_a_session_of_its_own_with_it(ab, board, tmp_path):
    """kill -9 of the dispatcher: the guard ends its worker's process group and the worker's
    cgroup, so a daemon the agent started with ``setsid`` (out of the group) is stopped too."""
    cgroups = WorkerCgroups(Path(ab.settings.home), "host-a")
    if cgroups.probe() is None:
        pytest.skip(f"no cgroups for workers on this host: {cgroups.why}")
    daemon_pid = tmp_path / "daemon.pid"
    daemon = f"echo $$ > {daemon_pid}; exec sleep 600"
    script = (f"setsid sh -c {shlex.quote(daemon)} < /dev/null > /dev/null 2>&1 & "
              "sleep 600 & wait")
    ab.add_profile("w", command="sh -c " + shlex.quote(script))
    t = board.create("leave a daemon", assignee="w")
    d1 = _start_dispatcher(ab, tmp_path, "d1", AGENTBOARD_HOST_ID="host-a", AGENTBOARD_CLAIM_TTL=30)
    try:
        pid = _first_pid(board, t["id"])
        daemon_at = int(wait_for(lambda: daemon_pid.exists() and daemon_pid.read_text().strip(), what="the daemon"))
        assert os.getsid(daemon_at) != os.getsid(pid)  # out of the worker's session and group
        d1.send_signal(signal.SIGKILL)
        d1.wait()
        wait_for(lambda: not pid_alive(pid) and not group_has_live(pid), what="the killed dispatcher's worker gone")
        wait_for(lambda: not pid_alive(daemon_at), what="the worker's daemon gone with it")
    finally:
        if d1.poll() is None:
            _stop(d1)
        try:
            os.kill(int(daemon_pid.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
        cgroups.close()


def test_a_restarted_dispatcher_stops_its_leftover_worker_whose_task_moved_on(ab, board, tmp_path):
    """The dispatcher and its guard both killed (the worker survives as an orphan); the task is
    taken over by another host and done there; the first host's dispatcher, started again,
    finds its leftover worker and stops it."""
    journal, marker = tmp_path / "journal", tmp_path / "second"
    ab.add_profile("w", command=_journal_agent(journal, marker))
    t = board.create("long work", assignee="w")
    d1 = _start_dispatcher(ab, tmp_path, "d1", AGENTBOARD_HOST_ID="host-a", AGENTBOARD_CLAIM_TTL=3)
    pid = _first_pid(board, t["id"])
    guard_file = guard_pid_file(Path(ab.home), "host-a")
    wait_for(guard_file.exists, what="the guard's pid file")
    guard = int(guard_file.read_text())
    # the whole host side of it lost at once: the dispatcher frozen first, so that it cannot start
    # a new guard (which would end the worker as the dispatcher dies) between the two kills
    d1.send_signal(signal.SIGSTOP)
    os.kill(guard, signal.SIGKILL)
    d1.send_signal(signal.SIGKILL)
    d1.wait()
    assert pid_alive(pid)  # an orphan, as a host's crash could leave one
    marker.write_text("")
    d2 = _start_dispatcher(ab, tmp_path, "d2", AGENTBOARD_HOST_ID="host-b", AGENTBOARD_CLAIM_TTL=3)
    try:
        wait_for(lambda: all_in(board, [t["id"]], {"done"}), what="the task done on the other host")
    finally:
        _stop(d2)
    assert pid_alive(pid)  # host-b cannot reach host-a's processes
    d3 = _start_dispatcher(ab, tmp_path, "d3", AGENTBOARD_HOST_ID="host-a", AGENTBOARD_CLAIM_TTL=3)
    try:
        wait_for(lambda: not pid_alive(pid) and not group_has_live(pid), what="the leftover worker stopped")
    finally:
        _stop(d3)
    assert "no longer current; stopping it" in (tmp_path / "d3.log").read_text()
    assert completed_runs(ab.db, t["id"]) == 1
    runs = board.runs(t["id"])
    assert f"end {runs[0]['id']}" in _lines(journal)


def _through_a_restart(ab: Any, board: Any, tmp_path: Path, title: str, report: str) -> str:
    """A task whose worker waits for a go, then runs ``report``; its dispatcher is stopped on
    purpose while it works, the next one on the host takes it over, then the go is given. The
    task's id, once done."""
    go = tmp_path / "go"
    ab.add_profile("w", command="sh -c " + shlex.quote(f"while [ ! -f {go} ]; do sleep 0.05; done; {report}"))
    t = board.create(title, assignee="w")
    d1 = _start_dispatcher(ab, tmp_path, "d1", AGENTBOARD_HOST_ID="host-a")
    pid = _first_pid(board, t["id"])
    _stop(d1)
    d2 = _start_dispatcher(ab, tmp_path, "d2", AGENTBOARD_HOST_ID="host-a")
    try:
        wait_for(lambda: "took over 1 worker(s)" in (tmp_path / "d2.log").read_text(), what="the worker adopted")
        assert pid_alive(pid)
        go.write_text("")
        wait_for(lambda: all_in(board, [t["id"]], {"done"}), timeout=20)
    finally:
        _stop(d2)
    return str(t["id"])


def test_a_dispatcher_stopped_on_purpose_leaves_its_worker_to_the_next_one_on_the_host(ab, board, tmp_path):
    """SIGTERM: the worker keeps running, and the dispatcher started next on the host adopts it
    (the task completes once, in its first run)."""
    tid = _through_a_restart(ab, board, tmp_path, "survives a restart",
                             "echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json")
    assert [r["outcome"] for r in board.runs(tid)] == ["completed"]


def test_a_worker_taken_over_by_the_next_dispatcher_still_reports_through_the_api(ab, board, tmp_path):
    """The next dispatcher on the host serves its workers' API where the last one did, so a
    worker it took over reports with `agentboard complete` (its URL and run token unchanged)."""
    said = tmp_path / "said"
    tid = _through_a_restart(ab, board, tmp_path, "reports across a restart",
                             f"agentboard complete --summary 'after the restart' > {said} 2>&1")
    (run,) = board.runs(tid)
    assert (run["outcome"], run["summary"]) == ("completed", "after the restart")
    assert "trying again" not in said.read_text()


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_a_dispatcher_with_50_workers_holds_no_thread_per_worker(ab, board, tmp_path):
    go = tmp_path / "go"
    ab.add_profile("w", command="sh -c " + shlex.quote(
        f"while [ ! -f {go} ]; do sleep 0.2; done; echo '{{\"success\": true, \"summary\": \"ok\"}}' > .board/result.json"))
    ids = [board.create(f"t{i}", assignee="w")["id"] for i in range(50)]
    d = _start_dispatcher(ab, tmp_path, "d", AGENTBOARD_MAX_PARALLEL=50)  # (a bounded pool of 8 prepares spawns)
    try:
        wait_for(lambda: all_in(board, ids, {"running"}), what="50 workers running")
        wait_for(lambda: all(board.runs(i)[0]["worker_pid"] for i in ids), what="their pids recorded")
        time.sleep(0.5)  # (not a timing assertion: lets the pass that recorded them finish)
        with_50 = _threads(d.pid)
        assert with_50 < 20, f"{with_50} threads for 50 workers"
        go.write_text("")
        wait_for(lambda: all_in(board, ids, {"done"}), what="all done once their workers exit")
    finally:
        _stop(d)
    assert open_runs(ab.db) == 0


def test_a_starting_dispatcher_ends_what_is_left_in_the_cgroups_of_runs_that_are_over(ab, board, tmp_path):
    """The dispatcher and its guard lost together leave a run's cgroup with a daemon in it: the
    next dispatcher on the host ends it and removes the cgroup; the cgroup of a run still open on
    the host (a one-shot pass's worker) is left alone."""
    import subprocess

    from agentboard.cgroups import wrapped
    from agentboard.dispatch.dispatcher import Dispatcher

    ab.settings.host_id = "host-a"
    cgroups = WorkerCgroups(Path(ab.settings.home), "host-a")
    if cgroups.probe() is None:
        pytest.skip(f"no cgroups for workers on this host: {cgroups.why}")
    ab.add_profile("w", command="true")
    over = board.create("over", assignee="w")
    open_ = board.create("still running", assignee="w")
    gone_run = board.claim(over["id"])["run_id"]
    board.complete(over["id"], summary="done elsewhere", run_id=gone_run)
    live_run = board.claim(open_["id"], host="host-a")["run_id"]
    procs = [subprocess.Popen(wrapped(["sleep", "600"], cgroups.prepare(rid)), start_new_session=True)
             for rid in (gone_run, live_run)]
    try:
        wait_for(lambda: all(len(members) == 1 for members in
                             ([*map(int, (cgroups.folder(r) / "cgroup.procs").read_text().split())]
                              for r in (gone_run, live_run))), what="both in their cgroups")
        d = Dispatcher(ab.db, ab.settings)
        d.start()
        try:
            wait_for(lambda: procs[0].poll() is not None, what="the daemon of the run that is over ended")
            assert not cgroups.folder(gone_run).exists()
            assert procs[1].poll() is None and cgroups.folder(live_run).exists()
        finally:
            d.stop()
    finally:
        for p in procs:
            p.kill()
            p.wait()
        cgroups.end(live_run, grace=0)
        cgroups.close()


@pytest.mark.parametrize("argv", [
    ["/bin/sh", "-c", 'grep "^0::" /proc/self/cgroup | cut -d: -f3; echo "$0 $1"', "zero", "one"],
    ["sh", "-c", 'grep "^0::" /proc/self/cgroup | cut -d: -f3; echo "$0 $1"', "zero", "one"],
    ["/bin/sh", "-ec", 'grep "^0::" /proc/self/cgroup | cut -d: -f3; echo "$0 $1"', "zero", "one"],
    ["bash", "-c", 'grep "^0::" /proc/self/cgroup | cut -d: -f3; echo "$0 $1"', "zero", "one"],
    ["/usr/bin/env", "sh", "-c", 'grep "^0::" /proc/self/cgroup | cut -d: -f3; echo "$0 $1"', "zero", "one"],
], ids=["a shell's script", "a shell by name", "a shell with more options", "bash", "any other program"])
def test_a_worker_is_in_its_runs_cgroup_before_its_first_command_with_its_own_arguments(tmp_path, argv):
    """``sh`` running a ``-c`` script joins as the script's first command (no second shell);
    anything else goes through the wrapper; either way the first command already runs inside."""
    import subprocess

    from agentboard.cgroups import wrapped

    cgroups = WorkerCgroups(tmp_path / "home", "host-fold")
    if cgroups.probe() is None:
        pytest.skip(f"no cgroups for workers on this host: {cgroups.why}")
    try:
        folder = cgroups.prepare(7)
        out = subprocess.run(wrapped(argv, folder), capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        where, args = out.stdout.splitlines()
        assert where.endswith("/run-7")
        assert args == "zero one"
        assert out.stderr == ""
    finally:
        cgroups.end(7, grace=0)
        cgroups.close()


def test_a_shell_that_cannot_join_its_cgroup_says_so_and_runs_its_script(tmp_path):
    import subprocess

    from agentboard.cgroups import wrapped

    gone = tmp_path / "no-such-cgroup"
    out = subprocess.run(wrapped(["/bin/sh", "-c", "echo ran"], gone), capture_output=True, text=True, timeout=30)
    assert out.stdout == "ran\n"
    assert out.stderr == f"agentboard: could not join the cgroup {gone}\n"


def test_bash_reads_its_start_up_file_only_inside_the_cgroup(tmp_path, monkeypatch):
    """``$BASH_ENV`` runs before a ``bash -c`` script: bash goes through the wrapper, so even
    that file runs inside the run's cgroup."""
    import subprocess

    from agentboard.cgroups import wrapped

    cgroups = WorkerCgroups(tmp_path / "home", "host-bashenv")
    if cgroups.probe() is None:
        pytest.skip(f"no cgroups for workers on this host: {cgroups.why}")
    startup = tmp_path / "startup.sh"
    startup.write_text('grep "^0::" /proc/self/cgroup | cut -d: -f3\n')
    try:
        folder = cgroups.prepare(8)
        out = subprocess.run(wrapped(["bash", "-c", "true"], folder), capture_output=True, text=True,
                             timeout=30, env={**os.environ, "BASH_ENV": str(startup)})
        assert out.stdout.strip().endswith("/run-8")
    finally:
        cgroups.end(8, grace=0)
        cgroups.close()
