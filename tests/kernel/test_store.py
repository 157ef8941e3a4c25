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
    parent = tasks.create(client.db, "default", "parent", assignee="w")
    tasks.create(client.db, "default", "child", assignee="w", parents=[parent["id"]])  # two events
    with pytest.raises(NotFound):
        tasks.create(client.db, "default", "orphan", parents=["t_00000000"])  # rolled back
    heard = [n.payload for n in listener.notifies(timeout=1, stop_after=5)]
    assert heard == ["default", "default"]
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
