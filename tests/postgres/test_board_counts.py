"""The board view's counts on PostgreSQL come from running counts kept by triggers (no pass over
a large board); they stay exact while writers and readers work at once."""

from __future__ import annotations

import random
import threading

from agentboard.domain.errors import AgentboardError
from agentboard.kernel import queries, runs, tasks
from agentboard.store import open_database


def test_counts_stay_exact_while_four_writers_and_a_reader_work_at_once(pg_url: str) -> None:
    db = open_database(pg_url)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        rnd = random.Random(seed)
        try:
            for i in range(60):
                t = tasks.create(db, "default", f"w{seed}-{i}", assignee="w" if rnd.random() < 0.8 else None)
                if t["status"] != "ready":
                    continue
                run = runs.claim(db, "default", t["id"])
                roll = rnd.random()
                if roll < 0.5:
                    runs.complete(db, "default", t["id"], run_id=run["run_id"], summary="ok")
                elif roll < 0.7:
                    runs.fail(db, "default", t["id"], "crashed", run_id=run["run_id"], error="boom")
                elif roll < 0.85:
                    tasks.archive(db, "default", t["id"])
        except AgentboardError as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        while not stop.is_set():
            queries.board_view(db, "default")  # folds the deltas when they pile up

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    look = threading.Thread(target=reader)
    look.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    stop.set()
    look.join(60)
    assert errors == []
    view = queries.board_view(db, "default", include_archived=True)
    counted = {c["status"]: c["count"] for c in view["columns"]}
    actual = {s: 0 for s in counted}
    for task in queries.list_tasks(db, "default", include_archived=True, limit=100_000):
        actual[task["status"]] += 1
    assert counted == actual
    assert view["total"] == 240
    # folded: a handful of rows per status, not one per change
    rows = db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM task_count_deltas WHERE board = 'default'"))
    assert rows < 600
    db.close()
