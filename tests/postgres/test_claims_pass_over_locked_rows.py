"""Hosts claiming from the same ready queue at once: a claim passes over the tasks another
transaction is claiming right now and takes the next ones in the queue's order."""

from __future__ import annotations

import psycopg

from agentboard.kernel import dispatching, tasks
from agentboard.store import open_database


def test_a_claim_takes_the_next_ready_tasks_while_another_host_holds_the_first(pg_url: str) -> None:
    db = open_database(pg_url)
    ids = [tasks.create(db, "default", f"t{i}", assignee="w", priority=10 - i)["id"] for i in range(6)]
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://")) as other:
        # another host's claim under way: the two first tasks of the queue locked, not committed
        other.execute("SELECT id FROM tasks WHERE id = ANY(%s) FOR UPDATE", (ids[:2],))
        got = dispatching.claim_batch(db, "default", ids, host="here", limit=2)
        assert [c["id"] for c in got] == ids[2:4]
        other.rollback()
    # the other host gave up its claim: the first two are still there for the next one
    assert [c["id"] for c in dispatching.claim_batch(db, "default", ids, host="here", limit=3)] == [ids[0], ids[1], ids[4]]
