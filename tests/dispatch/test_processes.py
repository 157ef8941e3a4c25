"""Dispatchers as real processes: kill -9 and restart, two on one SQLite home, several hosts on
PostgreSQL, wake-up on changes made by other processes, the CLI verbs."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import all_in, completed_runs, open_runs, wait_for

RESULT_AFTER = "sh -c " + shlex.quote(
    "sleep {secs}; echo '{{\"success\": true, \"summary\": \"ok\"}}' > .board/result.json")


def _env(ab, **extra):
    env = {**os.environ, "AGENTBOARD_HOME": str(ab.home), "AGENTBOARD_SPAWN_GRACE": "0.5"}
    if ab.settings.database_url:
        env["AGENTBOARD_DATABASE_URL"] = ab.settings.database_url
    env.update({k: str(v) for k, v in extra.items()})
    return env


_started: list[subprocess.Popen[bytes]] = []


@pytest.fixture(autouse=True)
def _no_dispatcher_outlives_its_test():
    """A test that fails half-way must not leave its dispatcher running after the suite."""
    yield
    while _started:
        proc = _started.pop()
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)


def _start_dispatcher(ab, tmp_path, name="d", **extra):
    log = open(tmp_path / f"{name}.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "agentboard", "dispatcher"], env=_env(ab, **extra),
                            stdout=log, stderr=log, start_new_session=True)
    _started.append(proc)
    return proc


def _stop(proc, sig=signal.SIGTERM):
    if proc.poll() is None:
        proc.send_signal(sig)
    proc.wait(timeout=60)


def test_kill_9_dispatcher_then_restart_every_task_done_exactly_once(ab, board, tmp_path):
    """kill -9 the dispatcher with 50 tasks running, start another: each task is done exactly once."""
    n = 50
    ab.add_profile("w", command=RESULT_AFTER.format(secs=2))
    ids = [board.create(f"t{i}", assignee="w")["id"] for i in range(n)]
    d1 = _start_dispatcher(ab, tmp_path, "d1", AGENTBOARD_MAX_PARALLEL=n)
    try:
        wait_for(lambda: all_in(board, ids, {"running"}), what="all running")
    finally:
        d1.send_signal(signal.SIGKILL)
        d1.wait()
    d2 = _start_dispatcher(ab, tmp_path, "d2", AGENTBOARD_MAX_PARALLEL=n)
    try:
        wait_for(lambda: all_in(board, ids, {"done"}), what="all done after restart")
    finally:
        _stop(d2)
    for tid in ids:
        assert completed_runs(ab.db, tid) == 1
    assert open_runs(ab.db) == 0


def test_restart_handles_dead_workers_at_once(ab, board, tmp_path):
    """Workers that died with the dispatcher: the new one sees their pids gone on start-up, and
    returns their tasks to the queue as the dead dispatcher's loss (its guard ended them), not
    as a failure of the task."""
    ab.add_profile("w", command="sh -c " + shlex.quote(
        f"if [ -f {tmp_path}/second ]; then echo '{{\"success\": true, \"summary\": \"ok\"}}' > .board/result.json; "
        "else sleep 600; fi"))
    ids = [board.create(f"t{i}", assignee="w")["id"] for i in range(3)]
    d1 = _start_dispatcher(ab, tmp_path, "d1")
    wait_for(lambda: all_in(board, ids, {"running"}))
    wait_for(lambda: all(r["worker_pid"] for t in ids for r in board.runs(t)))
    pids = [r["worker_pid"] for t in ids for r in board.runs(t)]
    d1.send_signal(signal.SIGKILL)
    d1.wait()
    from agentboard.dispatch.liveness import group_has_live

    for pid in pids:  # its guard stops its workers
        wait_for(lambda pid=pid: not group_has_live(pid), what="the killed dispatcher's workers gone")
    (tmp_path / "second").write_text("")
    d2 = _start_dispatcher(ab, tmp_path, "d2", AGENTBOARD_CLAIM_TTL=3600)
    try:
        wait_for(lambda: all_in(board, ids, {"done"}))
    finally:
        _stop(d2)
    for tid in ids:
        outcomes = [r["outcome"] for r in board.runs(tid)]
        assert outcomes == ["stale", "completed"]
        assert "its dispatcher died" in board.runs(tid)[0]["error"]


def test_clean_sigterm_leaves_workers_running_and_their_tasks_recoverable(ab, board, tmp_path):
    go = tmp_path / "go"
    ab.add_profile("w", command="sh -c " + shlex.quote(
        f"while [ ! -f {go} ]; do sleep 0.05; done; echo '{{\"success\": true, \"summary\": \"ok\"}}' > .board/result.json"))
    t = board.create("survives the dispatcher", assignee="w")
    d1 = _start_dispatcher(ab, tmp_path, "d1")
    wait_for(lambda: all_in(board, [t["id"]], {"running"}) and board.runs(t["id"])[0]["worker_pid"])
    pid = board.runs(t["id"])[0]["worker_pid"]
    _stop(d1)
    assert d1.returncode == 0
    from agentboard.dispatch.liveness import pid_alive

    assert pid_alive(pid)
    go.write_text("")
    d2 = _start_dispatcher(ab, tmp_path, "d2")
    try:
        wait_for(lambda: all_in(board, [t["id"]], {"done"}))
    finally:
        _stop(d2)
    assert [r["outcome"] for r in board.runs(t["id"])] == ["completed"]


def test_two_dispatchers_on_one_sqlite_home_never_double_spawn(tmp_path, monkeypatch):
    import agentboard

    home = tmp_path / "home"
    monkeypatch.setenv("AGENTBOARD_HOME", str(home))
    monkeypatch.delenv("AGENTBOARD_DATABASE_URL", raising=False)
    ab = agentboard.connect(str(home))
    board = ab.board()
    ab.add_profile("w", command=RESULT_AFTER.format(secs=0))
    ids = [board.create(f"t{i}", assignee="w")["id"] for i in range(20)]
    procs = [_start_dispatcher(ab, tmp_path, f"d{i}") for i in range(2)]
    try:
        wait_for(lambda: all_in(board, ids, {"done"}))
        one_shot = subprocess.run([sys.executable, "-m", "agentboard", "dispatch", "--json"], env=_env(ab),
                                  capture_output=True, text=True)
    finally:
        for p in procs:
            _stop(p)
    for tid in ids:
        assert len(board.runs(tid)) == 1
    assert open_runs(ab.db) == 0
    rep = json.loads(one_shot.stdout)
    assert rep["skipped_boards"] == ["default"] and "another dispatcher" in rep["skipped_reason"]
    ab.close()


def test_a_task_made_ready_by_another_process_starts_without_waiting_for_the_interval(ab, board, dispatcher):
    ab.add_profile("w", command=RESULT_AFTER.format(secs=0))
    dispatcher(dispatch_interval=3600)
    out = subprocess.run(["agentboard", "create", "from the cli", "--assignee", "w", "--json"], env=_env(ab),
                         capture_output=True, text=True, check=True)
    tid = json.loads(out.stdout)["id"]
    wait_for(lambda: all_in(board, [tid], {"done"}), timeout=45)


def test_a_flood_of_commits_costs_a_dispatcher_a_pass_per_gap_not_a_pass_per_commit(ab, board, dispatcher):
    from agentboard.dispatch.dispatcher import PASS_MIN_GAP

    ab.add_profile("w", command=RESULT_AFTER.format(secs=0))
    d = dispatcher(dispatch_interval=3600)
    target = board.create("a note board", assignee="nobody-runs-this")["id"]
    wait_for(lambda: d.passes >= 1, what="the first pass")
    before, t0 = d.passes, time.monotonic()
    for i in range(300):  # each commit wakes the dispatcher
        board.comment(target, f"note {i}", mentions=False)
    took = time.monotonic() - t0
    passes = d.passes - before
    assert passes <= took / PASS_MIN_GAP + 2, (passes, took)
    tid = board.create("still served", assignee="w")["id"]  # and it still reacts to new work
    wait_for(lambda: all_in(board, [tid], {"done"}), timeout=45)


def test_dispatch_dry_run_and_log_from_the_cli(ab, board):
    ab.add_profile("w", command="sh -c " + shlex.quote(
        "echo hello from the worker; echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json"))
    t = board.create("one", assignee="w", priority=5)
    dry = subprocess.run(["agentboard", "dispatch", "--dry-run", "--json"], env=_env(ab), capture_output=True,
                         text=True, check=True)
    rep = json.loads(dry.stdout)
    assert [w["task"] for w in rep["would_spawn"]] == [t["id"]] and not rep["spawned"]
    assert all_in(board, [t["id"]], {"ready"})
    real = subprocess.run(["agentboard", "dispatch"], env=_env(ab), capture_output=True, text=True, check=True)
    assert f"spawned {t['id']} (w)" in real.stdout
    wait_for(lambda: (ab.home / "boards/default/logs" / f"{t['id']}.log").exists())
    # the one-shot dispatcher has exited; the next pass sees the worker gone and reads its result
    wait_for(lambda: subprocess.run(["agentboard", "dispatch"], env=_env(ab), capture_output=True).returncode == 0
             and all_in(board, [t["id"]], {"done"}))
    log = subprocess.run(["agentboard", "log", t["id"]], env=_env(ab), capture_output=True, text=True, check=True)
    assert "hello from the worker" in log.stdout
    missing = subprocess.run(["agentboard", "log", "t_00000000"], env=_env(ab), capture_output=True, text=True)
    assert missing.returncode == 3


def test_log_prints_the_latest_runs_part_and_run_n_the_whole_of_attempt_n(ab, board, tmp_path):
    tried = tmp_path / "tried"
    ab.add_profile("w", command="sh -c " + shlex.quote(
        f"if [ -e {tried} ]; then echo second try; "
        "echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json; "
        f"else touch {tried}; echo first try; exit 1; fi"))
    t = board.create("flaky", assignee="w")
    for _ in range(2):
        subprocess.run(["agentboard", "dispatch", "--wait"], env=_env(ab), capture_output=True, check=True)
    wait_for(lambda: all_in(board, [t["id"]], {"done"}))

    def log(*args):
        return subprocess.run(["agentboard", "log", t["id"], *args], env=_env(ab), capture_output=True,
                              text=True, check=True).stdout
    latest, first, second = log(), log("--run", "1"), log("--run", "2")
    assert "second try" in latest and "first try" not in latest
    assert latest.startswith("=== run ") and latest == second
    assert "first try" in first and "second try" not in first


def test_demo_runs_to_the_end(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    out = subprocess.run(["agentboard", "demo", "--home", str(tmp_path / "demo"), "--json"], env=env,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert rep["ok"] and all(t["status"] == "done" for t in rep["tasks"])
    assert len(rep["runs"]) == 3 and {r["outcome"] for r in rep["runs"]} == {"completed"}
    text = Path(rep["artifact"]).read_text()
    assert "## Boards" in text and "## Fleets" in text


@pytest.mark.postgres
@pytest.mark.stress
def test_three_dispatchers_on_postgres_each_task_once_and_a_dead_host_s_tasks_return(pg_database, tmp_path, monkeypatch):
    import agentboard

    monkeypatch.setenv("AGENTBOARD_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AGENTBOARD_DATABASE_URL", pg_database)
    ab = agentboard.connect(pg_database)
    ab.settings.home = tmp_path / "home"
    board = ab.board()
    ab.add_profile("w", command=RESULT_AFTER.format(secs=0))
    ids = [board.create(f"t{i}", assignee="w")["id"] for i in range(300)]
    procs = [_start_dispatcher(ab, tmp_path, f"h{i}", AGENTBOARD_HOST_ID=f"host-{i}", AGENTBOARD_CLAIM_TTL=3)
             for i in range(3)]
    try:
        wait_for(lambda: all_in(board, ids, {"done"}), timeout=240)
        hosts = {r["worker_host"] for r in ab.db.read(lambda tx: tx.all("SELECT worker_host FROM task_runs"))}
        counts = ab.db.read(lambda tx: tx.all(
            "SELECT task_id, COUNT(*) AS n FROM task_runs GROUP BY task_id HAVING COUNT(*) <> 1"))
        assert counts == [] and open_runs(ab.db) == 0
        assert len(hosts) >= 2
        # phase 2: a host dies with its tasks running; the others take them over after claim expiry
        for p in procs[1:]:
            p.send_signal(signal.SIGSTOP)  # pause the survivors so host-0 claims everything
        mark = tmp_path / "revived"
        ab.add_profile("hang", command="sh -c " + shlex.quote(
            f"if [ -f {mark} ]; then echo '{{\"success\": true, \"summary\": \"ok\"}}' > .board/result.json; "
            "else sleep 600; fi"))
        more = [board.create(f"h{i}", assignee="hang")["id"] for i in range(4)]
        wait_for(lambda: all_in(board, more, {"running"}))
        wait_for(lambda: all(board.runs(t)[0]["worker_pid"] for t in more))
        pids = [board.runs(t)[0]["worker_pid"] for t in more]
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        from agentboard.dispatch.liveness import group_has_live

        for pid in pids:  # its guard stops its workers
            wait_for(lambda pid=pid: not group_has_live(pid), what="the killed host's workers gone")
        mark.write_text("")
        for p in procs[1:]:
            p.send_signal(signal.SIGCONT)
        wait_for(lambda: all_in(board, more, {"done"}), timeout=120)
        for tid in more:
            runs = board.runs(tid)
            assert [r["outcome"] for r in runs] == ["reclaimed", "completed"]
            assert runs[0]["worker_host"] == "host-0" and runs[1]["worker_host"] != "host-0"
            assert "claim expired" in runs[0]["error"]
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                _stop(p)
        ab.close()
