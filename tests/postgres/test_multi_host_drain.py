"""Dispatchers on several hosts (processes with their own home and ``AGENTBOARD_HOST_ID``) drain
one PostgreSQL board: each task runs once, no task runs on two hosts at a time, and a host
killed with ``kill -9`` mid-drain loses nothing."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from testenv import wait_for as _wait_for

import agentboard

HOSTS = 3
TASKS = 150
WORKER = "sh -c " + shlex.quote(
    "sleep 0.2; echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json")


def _host(url: str, root: Path, n: int) -> subprocess.Popen[bytes]:
    home = root / f"host-{n}"
    home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    env.update(AGENTBOARD_HOME=str(home), AGENTBOARD_DATABASE_URL=url, AGENTBOARD_HOST_ID=f"host-{n}",
               AGENTBOARD_CLAIM_TTL="3", AGENTBOARD_SPAWN_GRACE="0", AGENTBOARD_DISPATCH_INTERVAL="1")
    log = open(home / "dispatcher.log", "ab")
    return subprocess.Popen([sys.executable, "-m", "agentboard", "dispatcher"], env=env, stdout=log,
                            stderr=log, start_new_session=True)


def test_three_hosts_drain_one_board_and_a_killed_host_loses_nothing(pg_url: str, tmp_path: Path) -> None:
    ab = agentboard.connect(pg_url)
    ab.add_profile("w", command=WORKER)
    board = ab.board()
    ids = [board.create(f"t{i}", assignee="w")["id"] for i in range(TASKS)]
    db = ab.db

    def done() -> int:
        return sum(1 for t in board.list(status="done", limit=100000))

    procs = [_host(pg_url, tmp_path, n) for n in range(HOSTS)]
    try:
        # kill -9 host-0 while it has tasks running, a third of the way through
        _wait_for(lambda: done() >= TASKS // 3, 180, "a third of the tasks done")
        _wait_for(lambda: any(t["worker_host"] == "host-0" for t in board.list(status="running", limit=1000)),
                  60, "host-0 running a task")
        killed_at = time.time()
        os.killpg(procs[0].pid, signal.SIGKILL)
        procs[0].wait(30)
        orphaned = {t["id"] for t in board.list(status="running", limit=1000) if t["worker_host"] == "host-0"}
        _wait_for(lambda: done() == TASKS, 240, "every task done")
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait(60)

    runs = db.read(lambda tx: tx.all(
        "SELECT task_id, worker_host, outcome, error, started_at, ended_at FROM task_runs ORDER BY task_id, id"))
    ab.close()
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_task.setdefault(r["task_id"], []).append(r)
    assert sorted(by_task) == sorted(ids)
    for task_id, task_runs in by_task.items():
        outcomes = [r["outcome"] for r in task_runs]
        assert outcomes.count("completed") == 1, (task_id, outcomes)
        for before, after in zip(task_runs, task_runs[1:], strict=False):
            # a task runs on one host at a time: the next run starts after the previous closed
            assert before["ended_at"] is not None and before["ended_at"] <= after["started_at"], task_id
        for r in task_runs:
            if r["outcome"] != "completed":  # only the dead host's runs came back, by claim expiry
                assert r["worker_host"] == "host-0" and r["outcome"] == "reclaimed", (task_id, r)
                assert "claim expired" in (r["error"] or "")
    assert orphaned, "host-0 had no task running when it was killed"
    for task_id in orphaned:
        last = by_task[task_id][-1]
        assert last["outcome"] == "completed"
        if last["worker_host"] == "host-0":
            # a completion host-0 had sent when it died: its commit may land after the kill (the
            # task still read as running just after it); its time says it began before
            assert last["ended_at"] <= killed_at, (task_id, last)
    assert any(by_task[t][-1]["worker_host"] != "host-0" for t in orphaned), "no orphan ran again elsewhere"
    hosts = {r["worker_host"] for r in runs if r["outcome"] == "completed"}
    assert len(hosts) == HOSTS

