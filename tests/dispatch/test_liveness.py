"""Liveness: timeouts kill the whole process group, reclaims stop the old worker first,
late completions from a reclaimed run are refused, stale claims come back."""

from __future__ import annotations

import os
import shlex
import subprocess
import time

import pytest

from agentboard.dispatch import liveness

from .conftest import all_in, events, open_runs, wait_for


def _alive(pid: int) -> bool:
    return liveness.pid_alive(pid)


def test_timed_out_worker_and_its_whole_process_group_are_gone(ab, board, dispatcher, tmp_path):
    pids = tmp_path / "pids"
    # the worker starts a grandchild that ignores nothing and would outlive a plain kill of the leader
    cmd = "sh -c " + shlex.quote(f"sleep 600 & echo $! >> {pids}; echo $$ >> {pids}; wait")
    ab.add_profile("sleeper", command=cmd)
    t = board.create("runs forever", assignee="sleeper", max_runtime=1, max_retries=1)
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"blocked"}))
    assert [r["outcome"] for r in board.runs(t["id"])] == ["timed_out"]
    recorded = [int(p) for p in pids.read_text().split()]
    assert len(recorded) == 2
    assert not any(_alive(p) for p in recorded)
    assert "max runtime of 1s" in board.runs(t["id"])[0]["error"]


def test_reclaimed_worker_is_dead_before_its_task_is_respawned(ab, board, dispatcher, tmp_path):
    first = tmp_path / "first.pid"
    report = tmp_path / "report"
    # run 1 records its pid and hangs (ignoring SIGTERM); run 2 checks whether run 1 still lives
    script = (
        f"if [ ! -f {first} ]; then echo $$ > {first}; trap '' TERM; while true; do sleep 0.1; done; fi; "
        f"if kill -0 $(cat {first}) 2>/dev/null; then echo alive > {report}; else echo dead > {report}; fi; "
        "echo '{\"success\": true, \"summary\": \"second run\"}' > .board/result.json"
    )
    ab.add_profile("stubborn", command="sh -c " + shlex.quote(script))
    t = board.create("reclaim me", assignee="stubborn")
    dispatcher()
    wait_for(lambda: first.exists() and first.read_text().strip())
    pid1 = int(first.read_text())
    proc = subprocess.run(["agentboard", "reclaim", t["id"]], capture_output=True, text=True,
                          env={**os.environ, "AGENTBOARD_HOME": str(ab.home),
                               **({"AGENTBOARD_DATABASE_URL": ab.settings.database_url} if ab.settings.database_url else {})})
    assert proc.returncode == 0, proc.stderr
    wait_for(lambda: all_in(board, [t["id"]], {"done"}))
    assert report.read_text().strip() == "dead"
    assert not _alive(pid1)
    outcomes = [r["outcome"] for r in board.runs(t["id"])]
    assert outcomes == ["reclaimed", "completed"]


def test_late_completion_from_a_reclaimed_run_is_refused(ab, board, dispatcher, tmp_path):
    started = tmp_path / "started"
    go = tmp_path / "go"
    late = tmp_path / "late.txt"
    script = (f"touch {started}; trap '' TERM; while [ ! -f {go} ]; do sleep 0.05; done; "
              f"agentboard complete --summary late > {late} 2>&1; echo $? >> {late}")
    ab.add_profile("late", command="sh -c " + shlex.quote(script))
    t = board.create("slow", assignee="late")
    d = dispatcher(start=False)
    d.run_pass()
    wait_for(started.exists)
    run1 = board.runs(t["id"])[0]["id"]
    board.reclaim(t["id"], reason="person wants it back")
    # the worker still runs (the dispatcher has not passed yet); it reports late
    go.write_text("go")
    wait_for(lambda: late.exists() and late.read_text().strip().splitlines()[-1:] and
             late.read_text().strip().splitlines()[-1].isdigit())
    text = late.read_text()
    assert text.strip().splitlines()[-1] == "4"  # conflict: stale run
    assert f"run {run1} is no longer current" in text
    runs = board.runs(t["id"])
    assert runs[0]["outcome"] == "reclaimed" and runs[0]["summary"] is None
    assert all_in(board, [t["id"]], {"ready"})


def test_expired_claim_of_a_live_local_worker_is_extended(ab, board, dispatcher, tmp_path):
    go = tmp_path / "go"
    ab.add_profile("slow", command="sh -c " + shlex.quote(
        f"while [ ! -f {go} ]; do sleep 0.05; done; "
        "echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json"))
    t = board.create("long but alive", assignee="slow")
    dispatcher(claim_ttl=2)
    wait_for(lambda: len(events(board, t["id"], "claim_extended")) >= 2, what="claim extensions")
    go.write_text("go")
    wait_for(lambda: all_in(board, [t["id"]], {"done"}))
    assert [r["outcome"] for r in board.runs(t["id"])] == ["completed"]


def test_claim_of_another_host_expires_back_to_ready(ab, board, dispatcher):
    from agentboard.kernel import runs as kr

    ab.add_profile("p", command="sh -c 'exit 0'")
    t = board.create("claimed elsewhere", assignee="p")
    kr.claim(ab.db, "default", t["id"], ttl=1, host="other-host", pid=999999)
    d = dispatcher(start=False)
    d.run_pass()
    assert all_in(board, [t["id"]], {"running"})  # not expired yet, and not ours to pid-check

    def reclaimed() -> bool:  # a pass after the claim's second is up takes it back
        d.run_pass()
        return bool(board.runs(t["id"])[0]["outcome"] == "reclaimed")

    wait_for(reclaimed, what="the expired claim taken back")
    run = board.runs(t["id"])[0]
    assert run["outcome"] == "reclaimed" and "claim expired" in run["error"]


@pytest.mark.stress
def test_kill_9_random_workers_retry_within_the_breaker(ab, board, dispatcher, tmp_path):
    import random

    ab.add_profile("w", command="sh -c " + shlex.quote(
        f"echo $$ > {tmp_path}/$AGENTBOARD_TASK.$AGENTBOARD_RUN_ID.pid; sleep 1; "
        "echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json"))
    ids = [board.create(f"t{i}", assignee="w", max_retries=3)["id"] for i in range(10)]
    dispatcher()
    killed: set[str] = set()
    rnd = random.Random(7)
    deadline = time.monotonic() + 60
    while len(killed) < 4 and time.monotonic() < deadline:
        for f in tmp_path.glob("*.pid"):
            tid = f.name.split(".")[0]
            if tid in killed or rnd.random() < 0.5:
                continue
            try:
                os.kill(int(f.read_text()), 9)
                killed.add(tid)
            except (ProcessLookupError, ValueError):
                pass
        time.sleep(0.05)
    wait_for(lambda: all_in(board, ids, {"done", "blocked"}))
    assert open_runs(ab.db) == 0
    for tid in ids:
        outcomes = [r["outcome"] for r in board.runs(tid)]
        assert outcomes[-1] == "completed" and outcomes.count("completed") == 1
        assert all(o in ("crashed", "completed") for o in outcomes)
    assert sum(len(events(board, t, "crashed")) for t in killed) >= len(killed)


def test_stopping_a_reaped_worker_never_signals_the_process_that_took_its_pid() -> None:
    """A worker that exited and was reaped may have its pid handed to another process, which
    leads a group of its own (another run's worker). Stopping the first worker then signals no
    one: its group is empty (the kernel hands out no pid that still names a live group), and the
    group of that pid is someone else's."""
    finished = subprocess.Popen(["true"], start_new_session=True)
    finished.wait()
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        # the reaped worker's pid, as the new process holds it (a pid reused)
        assert liveness.stop_worker(other.pid, grace=0.5, proc=finished)
        # and what the exited worker left in its group is ended by the group's id: none left
        assert liveness.end_group(other.pid, grace=0.5)
        time.sleep(0.2)
        assert other.poll() is None and _alive(other.pid)
    finally:
        other.kill()
        other.wait()
