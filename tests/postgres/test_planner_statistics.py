"""A dispatcher keeps PostgreSQL's planner statistics current: tables changed far past what their
statistics know are analyzed within a second or two, by one host at a time, so a graph created
in bulk and then released is claimed on plans that know its rows; other changes, at most once a
minute."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg

from agentboard.config import Settings
from agentboard.dispatch.dispatcher import Dispatcher
from agentboard.kernel import maintenance, tasks
from agentboard.store import Database, open_database


def _db(url: str, tmp_path: Path) -> Database:
    return open_database(url, settings=Settings(home=tmp_path), migrate=False)


def _bulk_tasks(url: str, n: int) -> list[str]:
    """``n`` ready tasks inserted at once on a connection of its own, its activity counters
    handed to the server before it returns (as a backend does when it goes idle)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE tasks SET (autovacuum_enabled = false)")  # only the code under test analyzes
        conn.execute("VACUUM ANALYZE")  # the statistics of an empty board
        conn.execute(
            "INSERT INTO tasks (id, board, title, body, assignee, status, priority, created_at, updated_at) "
            "SELECT 't_' || g, 'default', 'task ' || g, '', 'w', 'ready', 0, g, g FROM generate_series(1, %s) g",
            (n,))
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT 1")
    return [f"t_{g}" for g in range(1, n + 1)]


def _plan(db: Database, sql: str) -> str:
    return "\n".join(str(next(iter(r.values()))) for r in db.read(lambda tx: tx.all("EXPLAIN " + sql)))


def test_tables_that_grew_since_their_statistics_are_analyzed_and_then_read_by_key(
        pg_url: str, tmp_path: Path) -> None:
    db = _db(pg_url, tmp_path)
    ids = _bulk_tasks(pg_url, 2000)
    by_key = "SELECT * FROM tasks WHERE id IN (" + ", ".join(f"'{i}'" for i in ids[:8]) + ")"
    _plan(db, by_key)  # (a plan made on the statistics of an empty board; its shape varies with the pages)
    assert maintenance.stale_statistics(db) == ["tasks"]

    assert maintenance.refresh_statistics(db) == ["tasks"]
    assert "tasks_pkey" in _plan(db, by_key)
    assert maintenance.stale_statistics(db) == []
    assert maintenance.refresh_statistics(db) == []  # nothing lags: nothing is analyzed again
    db.close()


def test_a_table_whose_rows_changed_in_place_is_analyzed_again_only_after_a_while(
        pg_url: str, tmp_path: Path) -> None:
    """A burst of claims changes the same rows one after another: its statistics know the
    table's size, so no host analyzes it again every few seconds while the burst runs."""
    db = _db(pg_url, tmp_path)
    _bulk_tasks(pg_url, 2000)
    assert maintenance.refresh_statistics(db) == ["tasks"]  # grown past its statistics: at once
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE tasks SET status = 'running', updated_at = updated_at + 1")
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT 1")
    changed = db.read(lambda tx: tx.scalar(
        "SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = 'tasks' AND schemaname = current_schema()"))
    assert changed >= 2000  # past the floor and share that would have analyzed it before
    assert maintenance.stale_statistics(db) == [] and maintenance.refresh_statistics(db) == []
    time.sleep(1.1)  # (not a timing assertion: lets a one-second interval pass)
    assert maintenance.stale_statistics(db, every=1) == ["tasks"]
    db.close()


def test_a_host_that_finds_another_analyzing_leaves_it_the_work(pg_url: str, tmp_path: Path) -> None:
    db = _db(pg_url, tmp_path)
    _bulk_tasks(pg_url, 1000)
    with psycopg.connect(pg_url) as other:  # another host, in the middle of its own refresh
        other.execute("SELECT pg_advisory_xact_lock(%s)", (maintenance._ANALYZE_LOCK,))
        assert maintenance.refresh_statistics(db) == []
        assert maintenance.stale_statistics(db) == ["tasks"]
    assert maintenance.refresh_statistics(db) == ["tasks"]
    db.close()


def test_a_running_dispatcher_analyzes_a_board_that_grew_under_it(pg_url: str, tmp_path: Path) -> None:
    db = _db(pg_url, tmp_path)
    settings = Settings(home=tmp_path, dispatch_interval=0.2)
    d = Dispatcher(db, settings, host_id="host-a", boards=["nowhere"])  # its passes start nothing here
    d.start()
    try:
        _bulk_tasks(pg_url, 1000)

        def analyzed() -> Any:
            return db.read(lambda tx: tx.scalar(
                "SELECT last_analyze FROM pg_stat_user_tables WHERE relname = 'tasks' "
                "AND schemaname = current_schema()"))

        before = analyzed()
        deadline = time.monotonic() + 15
        while analyzed() == before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert analyzed() != before
        assert maintenance.stale_statistics(db) == []
    finally:
        d.stop()
        db.close()


def test_sqlite_has_no_statistics_to_keep(tmp_path: Path) -> None:
    import agentboard

    client = agentboard.connect(str(tmp_path / "home"))
    try:
        tasks.create(client.db, "default", "one", assignee="w")
        assert maintenance.stale_statistics(client.db) == [] and maintenance.refresh_statistics(client.db) == []
    finally:
        client.close()


def test_a_role_that_may_not_analyze_the_tables_leaves_them_to_autovacuum(pg_url: str, tmp_path: Path) -> None:
    """For a role that does not own them, ``ANALYZE`` only warns: it would, every second."""
    import secrets

    role = "ab_reader_" + secrets.token_hex(3)
    _bulk_tasks(pg_url, 1000)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
    try:
        base, _, name = pg_url.rpartition("/")
        scheme, _, rest = base.partition("://")
        as_reader = _db(f"{scheme}://{role}@{rest.split('@', 1)[-1]}/{name}", tmp_path)
        assert maintenance.stale_statistics(as_reader) == [] and maintenance.refresh_statistics(as_reader) == []
        as_reader.close()
        owner = _db(pg_url, tmp_path)
        assert maintenance.stale_statistics(owner) == ["tasks"]
        owner.close()
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')
