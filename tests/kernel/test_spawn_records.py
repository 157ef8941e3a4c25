"""A dispatcher records the workers it started in one transaction per group; each ``spawned``
event tells when its worker's process started, not when the group's record was written."""

from __future__ import annotations

import json
import time
from typing import Any

from agentboard.kernel import dispatching as kd
from agentboard.kernel import runs, tasks


def _spawned_at(db: Any, task_id: str) -> float:
    return float(db.read(lambda tx: tx.scalar(
        "SELECT created_at FROM task_events WHERE task_id = :t AND kind = 'spawned'", {"t": task_id})))


def test_a_spawned_event_carries_the_time_its_process_started(ab: Any) -> None:
    ab.add_profile("w", command="true")
    made = [tasks.create(ab.db, "default", f"t{i}", assignee="w")["id"] for i in range(3)]
    claimed = {c["id"]: c["run_id"] for c in runs.claim_next(ab.db, "default", limit=3, host="h")}
    started = time.time() - 0.25  # the group's first worker started a quarter of a second ago
    before = time.time()
    stale = kd.record_spawns(ab.db, "default", [
        {"task_id": made[0], "run_id": claimed[made[0]], "pid": 101, "host": "h", "started": started},
        # a start time from a clock ahead of the database's writer is taken as the record's
        {"task_id": made[1], "run_id": claimed[made[1]], "pid": 102, "host": "h", "started": time.time() + 3600},
        # a caller that does not know when its process started: the record's time
        {"task_id": made[2], "run_id": claimed[made[2]], "pid": 103, "host": "h"},
    ])
    after = time.time()
    assert stale == []
    assert abs(_spawned_at(ab.db, made[0]) - started) < 1e-3
    assert before <= _spawned_at(ab.db, made[1]) <= after
    assert before <= _spawned_at(ab.db, made[2]) <= after


def _written(db: Any, task_id: str) -> dict[str, Any]:
    """What a claim and a record wrote for a task: its row's claim and worker, its latest run,
    and its events (without the ids and times that differ between any two claims)."""
    def _r(tx: Any) -> dict[str, Any]:
        task = tx.one("SELECT status, worker_pid, worker_host, workspace_path, branch_name, current_run_id "
                      "FROM tasks WHERE id = :t", {"t": task_id})
        run = tx.one("SELECT id, attempt, status, profile, worker_pid, worker_host, log_path, workspace_path "
                     "FROM task_runs WHERE task_id = :t ORDER BY id DESC LIMIT 1", {"t": task_id})
        evs = tx.all("SELECT kind, payload, run_id, actor FROM task_events WHERE task_id = :t "
                     "AND kind IN ('claimed', 'spawned') ORDER BY id", {"t": task_id})
        return {"task": task, "run": run, "events": evs}
    out = db.read(_r)
    run_id = out["run"].pop("id")
    assert out["task"].pop("current_run_id") == run_id
    for e in out["events"]:
        e["same_run"] = e.pop("run_id") in (run_id, None)
        e["payload"] = json.loads(e["payload"])
    return out


def test_a_group_claimed_and_recorded_together_writes_what_one_by_one_writes(ab: Any) -> None:
    ab.add_profile("w", command="true")
    ab.add_profile("v", command="true")
    pairs = [(tasks.create(ab.db, "default", f"one {i}", assignee=who)["id"],
              tasks.create(ab.db, "default", f"group {i}", assignee=who)["id"]) for i, who in enumerate("wvw")]
    # the last pair ran once before: its next run is its second attempt
    for t in pairs[2]:
        runs.claim(ab.db, "default", t, host="h")
        runs.reclaim(ab.db, "default", t, reason="again")
    alone = {}
    for n, (t, _) in enumerate(pairs):
        c = runs.claim(ab.db, "default", t, host="h", actor="dispatcher")
        runs.record_spawn(ab.db, "default", t, c["run_id"], pid=200 + n, host="h", log_path=f"/logs/{n}",
                          workspace=f"/ws/{n}")
        alone[t] = _written(ab.db, t)
    group = kd.claim_batch(ab.db, "default", [g for _, g in pairs], host="h")
    assert [c["id"] for c in group] == [g for _, g in pairs]
    stale = kd.record_spawns(ab.db, "default", [
        {"task_id": g, "run_id": c["run_id"], "pid": 200 + n, "host": "h", "log_path": f"/logs/{n}",
         "workspace": f"/ws/{n}"} for n, (g, c) in enumerate(zip([g for _, g in pairs], group, strict=True))])
    assert stale == []
    for t, g in pairs:
        assert _written(ab.db, g) == alone[t]
    assert [_written(ab.db, g)["run"]["attempt"] for _, g in pairs] == [1, 1, 2]
