"""The assignee index holds only the ready tasks (migration 0026): on SQLite a
completion writes none of its pages for its own task, a claim only removes the task's entry, and
the lookups by assignee among ready tasks still read it (their statements have the index's
condition, which SQLite's planner needs to use a partial index)."""

from __future__ import annotations

import re
import shutil
import sqlite3
import struct
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentboard.kernel import queries, runs, tasks
from agentboard.store import open_database

FRAME_HEADER = 24
WAL_HEADER = 32


def _pages_written(path: Path, op: Callable[[], Any]) -> Counter[str]:
    """The b-trees whose pages ``op``'s commit wrote to the log, read from the WAL's frames."""
    side = sqlite3.connect(path)
    side.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the log starts empty: every frame is op's
    op()
    page_size = side.execute("PRAGMA page_size").fetchone()[0]
    names = dict(side.execute("SELECT pageno, name FROM dbstat").fetchall())
    side.close()
    data = path.with_name(path.name + "-wal").read_bytes()[WAL_HEADER:]
    step = FRAME_HEADER + page_size
    return Counter(names.get(struct.unpack(">I", data[i:i + 4])[0], "?") for i in range(0, len(data), step))


def test_a_completion_writes_no_page_of_the_assignee_index_and_a_lookup_by_assignee_reads_it(
        sqlite_template: Path, tmp_path: Path) -> None:
    path = tmp_path / "agentboard.db"
    shutil.copy(sqlite_template, path)
    db = open_database(f"sqlite:///{path}")
    for i in range(300):  # enough tasks that waiting and finished ones sit on different pages
        tasks.create(db, "default", f"t{i}", assignee="a" if i % 2 else "b")
    ready = [t["id"] for t in queries.list_tasks(db, "default", status="ready", limit=300)]
    for task_id in ready[:150]:
        run = runs.claim(db, "default", task_id)
        runs.complete(db, "default", task_id, summary="ok", run_id=run["run_id"])

    run = runs.claim(db, "default", ready[150])
    done = _pages_written(path, lambda: runs.complete(db, "default", ready[150], summary="ok", run_id=run["run_id"]))
    assert done["tasks"] >= 1 and done["ix_tasks_board_status"] >= 1, done
    assert done["ix_tasks_board_assignee"] == 0, done
    claimed = _pages_written(path, lambda: runs.claim(db, "default", ready[151]))
    assert claimed["ix_tasks_board_assignee"] == 1, claimed

    # what the kernel sends for a claim of the next task by assignee and a list by assignee
    sent: list[str] = []
    with db._raw() as conn:
        conn.set_trace_callback(sent.append)
    try:
        mine = runs.claim_next(db, "default", limit=1, assignees=["a"])
        listed = queries.list_tasks(db, "default", assignee="b", status="ready", limit=5)
    finally:
        with db._raw() as conn:
            conn.set_trace_callback(None)
    assert mine and all(t["assignee"] == "b" for t in listed) and listed
    selects = [s for s in sent if s.startswith("SELECT") and re.search(r"assignee (IN \(|= ')", s)]
    assert len(selects) == 2, sent
    with db._raw() as conn:
        for sql in selects:
            plan = " ".join(str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql).fetchall())
            assert "ix_tasks_board_assignee" in plan, (sql, plan)
    # a list by assignee among finished tasks, which that index no longer holds, still finds them
    finished = queries.list_tasks(db, "default", assignee="a", status="done", limit=300)
    assert len(finished) == 75 and all(t["status"] == "done" for t in finished)
    db.close()
