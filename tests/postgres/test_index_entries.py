"""Which indexes a claim and a completion add entries to on PostgreSQL, read from the WAL they
wrote (``pg_walinspect``): a task's status change is never a HOT update, so every index whose
condition its new row meets gets an entry (migration 0025 keeps them few), and the queries those
indexes serve still use them."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import psycopg

from agentboard.kernel import dispatching, runs, tasks
from agentboard.store import open_database


def _index_entries(conn: psycopg.Connection[Any], start: str, end: str) -> Counter[str]:
    """Leaf entries added between two WAL positions, per index of this database."""
    names = {int(oid): str(name) for oid, name in conn.execute(
        "SELECT pg_relation_filenode(c.oid), c.relname FROM pg_class c WHERE c.relkind = 'i' "
        "AND pg_relation_filenode(c.oid) IS NOT NULL").fetchall()}
    rows = conn.execute(
        "SELECT block_ref FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn) "
        # one record per new leaf entry: a plain insert, one into a posting list, or the insert
        # that splits its page (a split record carries the new entry; the tests' indexes are far
        # too small for a split of an inner page)
        "WHERE resource_manager = 'Btree' AND record_type IN ('INSERT_LEAF', 'INSERT_POST', 'SPLIT_L', 'SPLIT_R')",
        (start, end)).fetchall()
    row = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()
    assert row is not None
    out: Counter[str] = Counter()
    for (ref,) in rows:
        # "blkref #0: rel 1663/16384/24601 fork main blk 1": tablespace, database, file
        _, db_oid, node = str(ref).split("rel ", 1)[1].split()[0].split("/")
        if int(db_oid) == int(row[0]) and int(node) in names:
            out[names[int(node)]] += 1
    return out


def _lsn(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def test_a_claim_and_a_completion_add_no_entry_to_the_assignee_index(
        pg_url: str, walinspect: psycopg.Connection[Any]) -> None:
    db = open_database(pg_url)
    made = [tasks.create(db, "default", f"t{i}", assignee="w") for i in range(3)]
    start = _lsn(walinspect)
    claimed = runs.claim_next(db, "default", limit=3, host="h1")
    middle = _lsn(walinspect)
    for c in claimed:
        runs.complete(db, "default", c["id"], run_id=c["run_id"], summary="done")
    end = _lsn(walinspect)
    db.close()
    assert sorted(c["id"] for c in claimed) == sorted(t["id"] for t in made)
    claim, complete = _index_entries(walinspect, start, middle), _index_entries(walinspect, middle, end)
    # a claimed task's new row: its key, the board's status index, the running tasks' index
    assert claim["tasks_pkey"] == 3 and claim["ix_tasks_board_status"] == 3
    assert claim["ix_tasks_running"] == 3
    assert claim["ix_tasks_board_assignee"] == 0
    # a done task's new row: only its key and the board's status index
    assert complete["tasks_pkey"] == 3 and complete["ix_tasks_board_status"] == 3
    assert complete["ix_tasks_board_assignee"] == 0 and complete["ix_tasks_running"] == 0


def test_the_dispatchers_lookups_still_go_through_their_indexes(pg_url: str) -> None:
    db = open_database(pg_url)
    for i in range(40):
        tasks.create(db, "default", f"t{i}", assignee="a" if i % 2 else "b")
    mine = runs.claim_next(db, "default", limit=3, host="h1", assignees=["a"])
    runs.claim_next(db, "default", limit=2, host="h2")
    snap = dispatching.pass_snapshot(db, host="h1")
    assert sorted(r["id"] for r in snap.running) == sorted(c["id"] for c in mine)
    # a board's history of finished tasks, as a board in use has: beside it the running tasks'
    # own index is the cheap one by far (on 40 tasks alone the planner's choice is a coin toss)
    now = time.time()
    db.write(lambda tx: tx.executemany(
        "INSERT INTO tasks (id, board, title, body, status, priority, created_at, updated_at) "
        "VALUES (:id, 'default', :t, '', 'done', 0, :at, :at)",
        [{"id": f"t_d{i:07x}", "t": f"old {i}", "at": now - 5000 + i} for i in range(3000)]))

    def plans(tx: Any) -> dict[str, str]:
        tx.execute("ANALYZE tasks")
        tx.execute("SET LOCAL enable_seqscan = off")
        out = {}
        for name, sql in {
            "own host": "SELECT id FROM tasks WHERE status = 'running' AND worker_host = 'h1'",
            "lapsed": "SELECT id FROM tasks WHERE status = 'running' AND claim_expires < 1 AND worker_host <> 'h1'",
            "ready by assignee": "SELECT id FROM tasks WHERE board = 'default' AND status = 'ready' "
                                 "AND assignee IN ('a') ORDER BY priority DESC, created_at, id LIMIT 5",
        }.items():
            out[name] = "\n".join(str(r["QUERY PLAN"]) for r in tx.all("EXPLAIN " + sql))
        return out

    found = db.write(plans)
    db.close()
    assert "ix_tasks_running" in found["own host"], found["own host"]
    assert "ix_tasks_running" in found["lapsed"], found["lapsed"]
    assert "ix_tasks_board_assignee" in found["ready by assignee"], found["ready by assignee"]
