"""The board view's counts on PostgreSQL come from running counts kept by triggers (no pass over
a large board); they stay exact while writers and readers work at once."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest
from testenv import wait_for

import agentboard
from agentboard.domain.errors import AgentboardError
from agentboard.kernel import boards, maintenance, queries, runs, tasks
from agentboard.kernel.maintenance import COUNT_DELTAS_FOLD_AT
from agentboard.store import open_database
from agentboard.store.engine import Database


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


def _deltas(db: Database, board: str) -> int:
    return int(db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM task_count_deltas WHERE board = :b",
                                            {"b": board})))


def test_a_board_nobody_looks_at_has_its_count_deltas_folded_and_its_counts_kept(pg_url: str) -> None:
    db = open_database(pg_url)
    boards.create(db, "quiet", name="Quiet")
    made = [tasks.create(db, "quiet", f"q{i}", assignee="w") for i in range(COUNT_DELTAS_FOLD_AT + 40)]
    assert _deltas(db, "quiet") == len(made)  # one per new task
    queries.board_view(db, "default")  # another board's view folds them
    assert _deltas(db, "quiet") == 1  # all of them ready
    for t in made[:30]:
        run = runs.claim(db, "quiet", t["id"])
        runs.complete(db, "quiet", t["id"], run_id=run["run_id"], summary="ok")
    for t in made[30:40]:
        tasks.archive(db, "quiet", t["id"])
    assert maintenance.fold_task_counts(db) == []  # not piled up: left alone
    assert _deltas(db, "quiet") == 1 + 60 + 10
    # a statement that sets a task's status or board to what it was changes no count
    db.write(lambda tx: tx.execute("UPDATE tasks SET status = status, board = board WHERE board = 'quiet'"))
    assert _deltas(db, "quiet") == 1 + 60 + 10
    for i in range(COUNT_DELTAS_FOLD_AT):
        tasks.create(db, "quiet", f"more{i}")
    assert maintenance.fold_task_counts(db) == ["quiet"]  # what a running dispatcher calls
    assert _deltas(db, "quiet") == 4  # ready, todo, done, archived
    counted = {c["status"]: c["count"] for c in queries.board_view(db, "quiet", include_archived=True)["columns"]}
    actual: dict[str, int] = {s: 0 for s in counted}
    for task in queries.list_tasks(db, "quiet", include_archived=True, limit=100_000):
        actual[task["status"]] += 1
    assert counted == actual
    assert (counted["done"], counted["archived"], counted["todo"]) == (30, 10, COUNT_DELTAS_FOLD_AT)
    db.close()


def test_a_running_dispatcher_folds_the_deltas_of_a_board_nobody_looks_at(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentboard.dispatch import dispatcher

    monkeypatch.setattr(dispatcher, "FOLD_COUNTS_EVERY", 0.2)
    ab = agentboard.connect(pg_url)
    ab.settings.home = tmp_path
    ab.settings.dispatch_interval = 0.1
    for i in range(COUNT_DELTAS_FOLD_AT + 10):
        tasks.create(ab.db, "default", f"t{i}")  # no assignee: nothing for the dispatcher to start
    d = dispatcher.Dispatcher(ab.db, ab.settings)
    d.start()
    try:
        wait_for(lambda: _deltas(ab.db, "default") == 1, what="the deltas folded")
    finally:
        d.stop()
    ab.close()
