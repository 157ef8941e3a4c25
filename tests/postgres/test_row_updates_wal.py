"""What a claim and a completion write to the WAL for the task's and the run's rows on
PostgreSQL (``pg_walinspect``): an update whose new row stays on its page logs only the bytes
from the first column it changed to the last, and migration 0033 puts the columns these verbs
change side by side, so a task's checks and skills or a run's log and workspace paths, which
they do not change, are not written again."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from agentboard.kernel import runs, tasks
from agentboard.store import open_database

#: a task's checks and skills, and a worker's paths: long, and untouched by a claim or a completion
VERIFY = [f"python -m pytest tests/suite_{i}/ -q --maxfail=1 --timeout=600" for i in range(8)]
SKILLS = [f"skill-number-{i}-with-a-long-name" for i in range(8)]
LONG = "/srv/agentboard/workspaces/" + "a-rather-deep-folder/" * 8


def _lsn(conn: psycopg.Connection[Any]) -> str:
    """The WAL's end, once flushed (``pg_walinspect`` reads no further than the flushed WAL; the
    WAL writer flushes what an asynchronous commit left within its delay)."""
    row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    for _ in range(100):
        flushed = conn.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (row[0],)).fetchone()
        if flushed and flushed[0]:
            break
        time.sleep(0.05)
    return str(row[0])


def _same_page_updates(conn: psycopg.Connection[Any], table: str, start: str, end: str) -> list[int]:
    """The lengths of the update records of ``table``'s rows between two WAL positions whose new
    row stayed on its page (one block) and that carry no full-page image (a checkpoint just
    before makes the server log the whole page instead)."""
    node = conn.execute("SELECT pg_relation_filenode(%s::regclass)", (table,)).fetchone()
    assert node is not None
    rows = conn.execute(
        "SELECT record_length, fpi_length, block_ref FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn) "
        "WHERE resource_manager = 'Heap' AND record_type IN ('UPDATE', 'HOT_UPDATE')", (start, end)).fetchall()
    return [int(length) for length, fpi, ref in rows
            if f"/{node[0]} " in str(ref) and str(ref).count("blkref") == 1 and not fpi]


def test_a_claim_and_a_completion_do_not_write_the_columns_they_leave_alone_again(
        pg_url: str, walinspect: psycopg.Connection[Any]) -> None:
    db = open_database(pg_url)
    row_bytes = claim_logged = close_logged = done_logged = 0
    for _ in range(3):  # a checkpoint in between logs the whole page: try again
        t = tasks.create(db, "default", "a task with long checks", assignee="w", verify=VERIFY, skills=SKILLS)
        start = _lsn(walinspect)
        c = runs.claim(db, "default", t["id"], host="host-1")
        middle = _lsn(walinspect)
        runs.record_spawn(db, "default", t["id"], c["run_id"], pid=4242, host="host-1",
                          log_path=LONG + "worker.log", workspace=LONG)
        spawned = _lsn(walinspect)
        runs.complete(db, "default", t["id"], run_id=c["run_id"], summary="done", verified=True)
        end = _lsn(walinspect)
        claimed = _same_page_updates(walinspect, "tasks", start, middle)
        done = _same_page_updates(walinspect, "tasks", spawned, end)
        closed = _same_page_updates(walinspect, "task_runs", spawned, end)
        if claimed and done and closed:
            row = walinspect.execute("SELECT pg_column_size(t.*) FROM tasks t WHERE id = %s", (t["id"],)).fetchone()
            assert row is not None
            row_bytes, claim_logged, done_logged, close_logged = int(row[0]), claimed[0], done[0], closed[0]
            break
    db.close()
    assert row_bytes, "every try met a checkpoint"
    checks = len(" ".join(VERIFY)) + len(" ".join(SKILLS))
    assert row_bytes > checks
    # the record's own headers (about 75 bytes), then the claim's status, run, lock, host and times
    assert claim_logged < 220, (claim_logged, row_bytes)
    assert done_logged < 180, (done_logged, row_bytes)
    # the run's close: its outcome, end, summary and usage, not the paths its start recorded
    assert close_logged < 2 * len(LONG), (close_logged, len(LONG))
    assert close_logged < 180, close_logged
