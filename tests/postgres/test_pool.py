"""The pool of a process's PostgreSQL connections: the verbs reuse a few warm connections; what
one caller left behind (an open transaction, a session setting of a migration, a dead
connection) never reaches the next; the pool's counts are what the metrics show."""

from __future__ import annotations

import threading
from pathlib import Path

from agentboard.config import Settings
from agentboard.kernel import queries, tasks
from agentboard.store import open_database


def _backend_pid(db: object) -> int:
    return int(db.read(lambda tx: tx.scalar("SELECT pg_backend_pid()")))  # type: ignore[attr-defined]


def test_verbs_one_after_another_reuse_one_connection(pg_url: str, tmp_path: Path) -> None:
    db = open_database(pg_url, settings=Settings(home=tmp_path))
    first = _backend_pid(db)
    for i in range(5):
        tasks.create(db, "default", f"t{i}")
    assert _backend_pid(db) == first
    assert db.pool_state() == (0, 1)
    db.close()


def test_a_transaction_left_open_is_rolled_back_before_the_next_caller(pg_url: str, tmp_path: Path) -> None:
    db = open_database(pg_url, settings=Settings(home=tmp_path))
    with db._raw() as conn:  # a caller that begins a transaction, writes, and gives it back open
        conn.autocommit = False
        conn.execute("INSERT INTO task_events (board, task_id, kind, payload, created_at) "
                     "VALUES ('default', NULL, 'left-open', '{}', 0)")
    assert db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM task_events WHERE kind = 'left-open'")) == 0
    assert db.read(lambda tx: tx.scalar("SELECT now() = statement_timestamp()"))  # a transaction of its own
    db.close()


def test_a_connection_killed_by_the_server_is_replaced(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    db = open_database(pg_url, settings=Settings(home=tmp_path))
    old = _backend_pid(db)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (old,))
    # the idle connection the server ended is never handed out: the next verb runs on a new one
    made = tasks.create(db, "default", "after the kill")
    assert queries.task_detail(db, "default", made["id"])["title"] == "after the kill"
    assert [t["title"] for t in queries.list_tasks(db, "default")] == ["after the kill"]
    assert _backend_pid(db) != old
    assert db._pool is not None and db._pool.dead == 1
    db.close()


def test_after_the_server_ends_every_idle_connection_no_verb_fails(pg_url: str, tmp_path: Path) -> None:
    # what a restart or a failover of the server does to a long-running API or dispatcher: every
    # connection it kept idle is ended; each verb after it runs on a connection that works
    import psycopg

    db = open_database(pg_url, settings=Settings(home=tmp_path, pg_pool_size=4, pg_max_overflow=0))
    inside, go = threading.Barrier(5), threading.Event()

    def hold(tx: object) -> int:
        pid = int(tx.scalar("SELECT pg_backend_pid()"))  # type: ignore[attr-defined]
        inside.wait(30)
        go.wait(30)
        return pid

    pids: list[int] = []
    threads = [threading.Thread(target=lambda: pids.append(db.read(hold))) for _ in range(4)]
    for t in threads:
        t.start()
    inside.wait(30)
    go.set()
    for t in threads:
        t.join(30)
    assert db.pool_state() == (0, 4) and len(set(pids)) == 4
    with psycopg.connect(pg_url, autocommit=True) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    for i in range(6):
        tasks.create(db, "default", f"after the restart {i}")
    assert {t["title"] for t in queries.list_tasks(db, "default", limit=10)} == {
        f"after the restart {i}" for i in range(6)}
    assert _backend_pid(db) not in pids
    assert db._pool is not None and db._pool.dead == 4
    db.close()


def test_an_idle_connection_with_nothing_from_the_server_is_handed_out_again(pg_url: str, tmp_path: Path) -> None:
    db = open_database(pg_url, settings=Settings(home=tmp_path))
    first = _backend_pid(db)
    tasks.create(db, "default", "one")
    assert _backend_pid(db) == first
    assert db._pool is not None and db._pool.dead == 0
    db.close()


def test_a_migrations_session_settings_never_reach_a_verb(pg_url: str, tmp_path: Path) -> None:
    # the migration sets statement_timeout = 0 for its transaction: a verb keeps the board's own
    db = open_database(pg_url, settings=Settings(home=tmp_path, pg_statement_timeout=7))
    from agentboard.store.migrate import upgrade

    upgrade(db)  # what a process that finds the schema behind does at its start
    assert {db.read(lambda tx: tx.scalar("SHOW statement_timeout")) for _ in range(4)} == {"7s"}
    db.close()


def test_threads_share_the_pool_up_to_its_size_and_keep_that_many_idle(pg_url: str, tmp_path: Path) -> None:
    db = open_database(pg_url, settings=Settings(home=tmp_path, pg_pool_size=2, pg_max_overflow=2))
    inside, go = threading.Barrier(5), threading.Event()

    def hold(_tx: object) -> None:
        inside.wait(30)
        go.wait(30)

    threads = [threading.Thread(target=lambda: db.read(hold)) for _ in range(4)]
    for t in threads:
        t.start()
    inside.wait(30)
    assert db.pool_state() == (4, 0)  # size 2 and 2 more
    go.set()
    for t in threads:
        t.join(30)
    assert db.pool_state() == (0, 2)  # the overflow's connections closed as they came back
    db.close()
