"""SQLite keeps running task counts too (triggers on ``tasks``, migration 0020): the board view
and ``/metrics`` read them, and they stay exact through creates, claims, completions, failures,
archives and purges, and when the migration counts the tasks already there."""

from __future__ import annotations

import random
from pathlib import Path

from agentboard.kernel import monitoring, queries, runs, tasks
from agentboard.store import open_database


def _actual(db, board: str) -> dict[str, int]:  # type: ignore[no-untyped-def]
    rows = db.read(lambda tx: tx.all("SELECT status, COUNT(*) AS n FROM tasks WHERE board = :b GROUP BY status",
                                     {"b": board}))
    return {r["status"]: int(r["n"]) for r in rows}


def test_sqlite_counts_stay_exact_through_every_kind_of_change(sqlite_template: Path, tmp_path: Path) -> None:
    import shutil

    shutil.copy(sqlite_template, tmp_path / "agentboard.db")
    db = open_database(f"sqlite:///{tmp_path / 'agentboard.db'}")
    rnd = random.Random(7)
    for i in range(80):
        t = tasks.create(db, "default", f"t{i}", assignee="w" if rnd.random() < 0.8 else None)
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
    db.write(lambda tx: tx.execute("DELETE FROM tasks WHERE id IN (SELECT id FROM tasks WHERE status = 'archived' "
                                   "LIMIT 3)"))
    actual = _actual(db, "default")
    view = queries.board_view(db, "default", include_archived=True)
    assert {c["status"]: c["count"] for c in view["columns"] if c["count"]} == actual
    snap = monitoring.snapshot(db)
    assert {s: n for (b, s), n in snap.tasks.items() if b == "default" and n} == actual
    assert sum(actual.values()) == 80 - 3


def test_the_migration_counts_the_tasks_already_there(sqlite_template: Path, tmp_path: Path) -> None:
    import shutil

    from agentboard.store import migrate

    shutil.copy(sqlite_template, tmp_path / "agentboard.db")
    db = open_database(f"sqlite:///{tmp_path / 'agentboard.db'}")
    for i in range(5):
        tasks.create(db, "default", f"t{i}", assignee="w")
    from alembic import command

    cfg = migrate._config()
    with db.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0019")
    assert not db.read(lambda tx: tx.all("SELECT name FROM sqlite_master WHERE name = 'task_counts'"))
    tasks.create(db, "default", "made before the counts existed", assignee="w")
    migrate.upgrade(db)
    view = queries.board_view(db, "default")
    assert {c["status"]: c["count"] for c in view["columns"] if c["count"]} == _actual(db, "default") == {"ready": 6}
