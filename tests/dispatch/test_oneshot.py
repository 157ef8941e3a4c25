"""One-shot `agentboard dispatch` (cron style): a later pass by another process still learns how
the workers of an earlier one ended; a run claimed by hand is left to its claimer."""

from __future__ import annotations

import os
import subprocess
import sys

from .conftest import wait_for


def _cli(ab, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTBOARD_HOME": str(ab.home), "AGENTBOARD_SPAWN_GRACE": "0.2"}
    if ab.settings.database_url:
        env["AGENTBOARD_DATABASE_URL"] = ab.settings.database_url
    env.update(extra)
    return subprocess.run([sys.executable, "-m", "agentboard", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def _exited(board, task_id: str) -> bool:
    pid = board.runs(task_id)[-1]["worker_pid"]
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as fh:  # a zombie of the finished dispatch process counts as gone
        return fh.read().split(")")[-1].split()[0] == "Z"


def test_the_exit_status_of_a_one_shot_passs_workers_is_recorded(ab, board):
    ab.add_profile("limited", command="sh -c 'exit 75'")
    ab.add_profile("broken", command="sh -c 'echo boom; exit 3'")
    limited = board.create("hits a rate limit", assignee="limited")["id"]
    broken = board.create("fails", assignee="broken")["id"]
    first = _cli(ab, "dispatch")
    assert first.returncode == 0, first.stderr
    wait_for(lambda: _exited(board, limited) and _exited(board, broken), what="workers exited")
    second = _cli(ab, "dispatch", "--max", "0")  # records what is left to record, starts nothing
    assert second.returncode == 0, second.stderr
    wait_for(lambda: board.runs(limited)[0]["outcome"] and board.runs(broken)[0]["outcome"], what="runs closed")
    rl, br = board.runs(limited)[0], board.runs(broken)[0]
    assert (rl["outcome"], rl["exit_code"]) == ("rate_limited", 75)
    assert (br["outcome"], br["exit_code"]) == ("crashed", 3)
    assert "status 3" in br["error"] and "boom" in br["error"]
    # a rate limit is not a failure: the task waits out its cooldown instead of counting
    assert board.show(limited)["consecutive_failures"] == 0
    assert board.show(broken)["consecutive_failures"] == 1


def test_a_run_claimed_by_hand_is_left_to_its_claimer_until_its_claim_expires(ab, board):
    ab.add_profile("w", command="sh -c 'exit 0'")
    t = board.create("a person does this one", assignee="w")["id"]
    claimed = _cli(ab, "claim", t, "--ttl", "1h")
    assert claimed.returncode == 0, claimed.stderr
    for _ in range(2):
        assert _cli(ab, "dispatch").returncode == 0
    task = board.show(t)
    assert task["status"] == "running" and task["consecutive_failures"] == 0
    assert [r["outcome"] for r in board.runs(t)] == [None]
    # once the claim lapses without a heartbeat, the next pass returns the task to the queue
    ab.db.write(lambda tx: tx.execute("UPDATE tasks SET claim_expires = 1 WHERE id = :id", {"id": t}))
    assert _cli(ab, "dispatch").returncode == 0
    first = wait_for(lambda: board.runs(t)[0]["outcome"], what="hand claim reclaimed")
    assert first == "reclaimed"
    assert "its claimer stopped heartbeating" in board.runs(t)[0]["error"]


def test_a_one_shot_dispatch_returns_while_its_worker_runs_and_serves_its_api_in_the_background(ab, board, tmp_path):
    go = tmp_path / "go"
    ab.add_profile("cli", command=f"sh -c 'while [ ! -e {go} ]; do sleep 0.05; done; "
                   "agentboard complete --summary \"reported through the API\"'")
    t = board.create("report with the worker verb", assignee="cli")["id"]
    out = _cli(ab, "dispatch")
    assert out.returncode == 0, out.stderr
    assert f"spawned {t}" in out.stdout and "report to an API served in the background" in out.stderr
    assert board.show(t)["status"] == "running"  # the worker waits for the go: the pass did not
    go.write_text("")
    wait_for(lambda: board.show(t)["status"] == "done", what="the worker's report")
    run = wait_for(lambda: (r := board.runs(t)[0])["exit_code"] is not None and r, what="its exit recorded")
    assert run["exit_code"] == 0 and run["summary"] == "reported through the API"
    wait_for(lambda: not (ab.home / "api.json").exists(), what="the background API to stop")


def test_a_one_shot_dispatch_with_wait_serves_its_workers_api_until_they_exit(ab, board):
    ab.add_profile("cli", command="sh -c 'sleep 0.5; agentboard complete --summary \"reported through the API\"'")
    t = board.create("report with the worker verb", assignee="cli")["id"]
    out = _cli(ab, "dispatch", "--wait")
    assert out.returncode == 0, out.stderr
    assert "serving the API for 1 worker(s) until they exit" in out.stderr
    # the worker reported while the pass still served its API
    detail = board.show(t)
    assert detail["status"] == "done" and detail["runs"][-1]["summary"] == "reported through the API"
    assert not (ab.home / "api.json").exists()


def test_a_one_shot_dispatch_hands_its_workers_the_api_of_a_serve_on_the_same_home(ab, board, tmp_path):
    import json
    import signal

    env = {**os.environ, "AGENTBOARD_HOME": str(ab.home)}
    if ab.settings.database_url:
        env["AGENTBOARD_DATABASE_URL"] = ab.settings.database_url
    serve = subprocess.Popen([sys.executable, "-m", "agentboard", "serve", "--port", "0", "--no-dispatch"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             start_new_session=True)
    try:
        serve.stdout.readline()  # the server is up
        url = wait_for(lambda: (ab.home / "api.json").exists() and json.loads((ab.home / "api.json").read_text())["url"])
        seen = tmp_path / "url.txt"
        ab.add_profile("cli", command=f"sh -c 'echo $AGENTBOARD_API_URL > {seen}; agentboard complete --summary ok'")
        t = board.create("report", assignee="cli")["id"]
        out = _cli(ab, "dispatch")
        assert out.returncode == 0, out.stderr
        assert "serving the API" not in out.stderr  # the serve's API outlives the pass
        wait_for(lambda: board.show(t)["status"] == "done", what="the worker's report")
        assert seen.read_text().strip() == url
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
    assert not (ab.home / "api.json").exists()


def test_waiting_for_a_passs_workers_outlasts_an_exit_in_hand_and_the_worker_it_starts(ab, dispatcher, tmp_path):
    """The exit watcher forgets a worker as it starts handling its exit, and may then start its
    run's next worker (a nudge). A wait that looks in between sees no worker at all: it must wait
    for the handling to end, then for the worker it started."""
    import threading
    import time
    from pathlib import Path

    from agentboard.cli.dispatch import _wait_for_workers
    from agentboard.dispatch import spawn

    d = dispatcher(start=False)
    assert d.ctx.workers.claim(999)  # an exit in hand: its worker already forgotten
    proc = subprocess.Popen(["sleep", "1"])

    def handled() -> None:  # ... which starts the run's next worker, then ends
        time.sleep(0.5)
        d.ctx.workers.add(spawn.Worker("b", "t-1", 999, proc, {}, Path(tmp_path), tmp_path / "log", 0))
        d.ctx.workers.release(999)

    threading.Thread(target=handled, daemon=True).start()
    try:
        _wait_for_workers(d, False)
        assert proc.poll() is not None, "the wait returned while the started worker still ran"
    finally:
        proc.kill()
        proc.wait()
