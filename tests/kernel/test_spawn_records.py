"""A dispatcher records the workers it started in one transaction per group; each ``spawned``
event tells when its worker's process started, not when the group's record was written."""

from __future__ import annotations

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
