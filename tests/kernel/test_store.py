"""Store behaviour the other layers rely on: change notifications and per-thread connections."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

import agentboard
from agentboard.domain.errors import NotFound
from agentboard.kernel import tasks


@pytest.mark.postgres
def test_postgres_listeners_hear_each_committed_change_once(pg_database: str) -> None:
    import psycopg

    client = agentboard.connect(pg_database)
    listener = psycopg.connect(pg_database, autocommit=True)
    listener.execute("LISTEN agentboard_events")
    # each commit is heard (the process's notifier merges the commits of one moment into one
    # notification, so each is awaited before the next); a rolled-back one is not
    parent = tasks.create(client.db, "default", "parent", assignee="w")
    assert [n.payload for n in listener.notifies(timeout=5, stop_after=1)] == ["default"]
    tasks.create(client.db, "default", "child", assignee="w", parents=[parent["id"]])  # two events
    assert [n.payload for n in listener.notifies(timeout=5, stop_after=1)] == ["default"]
    with pytest.raises(NotFound):
        tasks.create(client.db, "default", "orphan", parents=["t_00000000"])  # rolled back
    assert [n.payload for n in listener.notifies(timeout=1, stop_after=1)] == []
    listener.close()
    client.close()


def test_in_process_listeners_hear_commits_not_rollbacks(ab: Any) -> None:
    heard: list[set[str]] = []
    ab.db.add_listener(heard.append)
    seq = ab.db.commit_seq
    ab.board().create("x", assignee="w")
    with pytest.raises(NotFound):
        ab.board().create("y", parents=["t_00000000"])
    assert heard == [{"default"}]
    assert ab.db.wait_for_commit(seq, timeout=0) == seq + 1


def test_threads_use_their_own_connections_and_survive_close(home: Any) -> None:
    client = agentboard.connect(str(home))
    ids: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for i in range(20):
                ids.append(tasks.create(client.db, "default", f"from a thread {i}", assignee="w")["id"])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and len(set(ids)) == 80
    client.db.close()  # every cached connection closes; the next call opens a new one
    assert len(client.board().list(limit=1000)) == 80
    client.close()
    assert not [f for f in os.listdir(home) if f.endswith("-journal")]


def test_a_pipelined_read_answers_what_a_plain_read_answers_and_a_bad_statement_loses_nothing(ab: Any) -> None:
    """Statements sent with ``Tx.later`` before any is read (one round trip on PostgreSQL)."""
    db = ab.db
    made = [tasks.create(db, "default", f"task {i}", assignee="w")["id"] for i in range(3)]

    def _sent(tx: Any) -> tuple[list[Any], list[Any]]:
        ids = tx.later("SELECT id FROM tasks WHERE board = :b ORDER BY id", {"b": "default"})
        n = tx.later("SELECT COUNT(*) AS n FROM tasks WHERE status = 'ready'")
        return [r["id"] for r in ids()], [r["n"] for r in n()]

    def _plain(tx: Any) -> tuple[list[Any], list[Any]]:
        return ([r["id"] for r in tx.all("SELECT id FROM tasks WHERE board = :b ORDER BY id", {"b": "default"})],
                [r["n"] for r in tx.all("SELECT COUNT(*) AS n FROM tasks WHERE status = 'ready'")])

    assert db.read_pipelined(_sent) == db.read(_plain) == (sorted(made), [3])

    def _bad(tx: Any) -> Any:
        first = tx.later("SELECT id FROM tasks")
        tx.later("SELECT no_such_column FROM tasks")
        return first()

    with pytest.raises(Exception, match="no_such_column"):
        db.read_pipelined(_bad)
    assert db.read_pipelined(_sent) == (sorted(made), [3])  # the connection is usable again
    tasks.create(db, "default", "one more", assignee="w")
    assert db.read_pipelined(_sent)[1] == [4]
