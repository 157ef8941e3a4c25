"""A claim that lapses because its host's dispatcher is gone (stopped for maintenance, or died and
not back) is the dispatcher's loss, not the task's failure: the task goes back to the queue as
``stale``, uncounted, saying which host stopped passing. A claim that lapses on a host whose
dispatcher still passes is a failure of its worker, counted as before."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from agentboard.kernel import monitoring, runs


def _dispatch(ab) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTBOARD_HOME": str(ab.home), "AGENTBOARD_HOST_ID": "host-a"}
    if ab.settings.database_url:
        env["AGENTBOARD_DATABASE_URL"] = ab.settings.database_url
    return subprocess.run([sys.executable, "-m", "agentboard", "dispatch", "--max", "0"], env=env,
                          capture_output=True, text=True, timeout=120)


def _claimed_on_host_b(ab, board, *, last_pass: float) -> str:
    ab.add_profile("w", command="sh -c 'sleep 60'")
    t = board.create("runs on host b", assignee="w")["id"]
    runs.claim(ab.db, board.slug, t, host="host-b", pid=999_999, ttl=60)
    monitoring.mark_pass(ab.db, "host-b", last_pass, None)
    ab.db.write(lambda tx: tx.execute("UPDATE tasks SET claim_expires = 1 WHERE id = :id", {"id": t}))
    return t


def test_a_claim_lapsed_because_its_hosts_dispatcher_stopped_passing_goes_back_uncounted(ab, board):
    t = _claimed_on_host_b(ab, board, last_pass=time.time() - 3600)
    out = _dispatch(ab)
    assert out.returncode == 0, out.stderr
    run = board.runs(t)[0]
    assert run["outcome"] == "stale"
    assert "the dispatcher on host 'host-b' has not passed since" in run["error"]
    assert "not counted as a failure" in run["error"]
    task = board.show(t)
    assert task["status"] == "ready" and task["consecutive_failures"] == 0


def test_a_claim_lapsed_on_a_host_whose_dispatcher_still_passes_counts_as_its_workers_failure(ab, board):
    t = _claimed_on_host_b(ab, board, last_pass=time.time())
    out = _dispatch(ab)
    assert out.returncode == 0, out.stderr
    run = board.runs(t)[0]
    assert run["outcome"] == "reclaimed"
    assert "stopped heartbeating" in run["error"]
    assert board.show(t)["consecutive_failures"] == 1
