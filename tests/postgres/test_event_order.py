"""The event log on PostgreSQL without a global write lock: writers commit concurrently and out
of id order, and every follower still sees every committed event exactly once, in one order."""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import threading
import time
from pathlib import Path
from typing import Any

from agentboard.kernel import queries, tasks
from agentboard.store import Tx, open_database

FORK = mp.get_context("fork")
WRITERS = 8
FOLLOWERS = 3
TXNS_PER_WRITER = 40


class Abort(Exception):
    """Raised inside a transaction on purpose: its events must never reach a follower."""


def _writer(url: str, n: int, seed: int) -> None:
    db = open_database(url)
    rnd = random.Random(seed)

    def txn(tx: Tx, k: int, events: int, hold: float, abort: bool) -> None:
        for e in range(events):
            tx.event(f"b{k % 2}", None, "order_probe", {"writer": n, "txn": k, "e": e, "aborted": abort})
        time.sleep(hold)  # keep the transaction open: later ids commit before this one
        if abort:
            raise Abort()

    for k in range(TXNS_PER_WRITER):
        abort = rnd.random() < 0.1
        try:
            db.write(txn, k, rnd.randint(1, 3), rnd.uniform(0, 0.03), abort)
        except Abort:
            pass
    db.close()


def _follower(url: str, out: str, batch: int) -> None:
    db = open_database(url)
    seen: list[int] = []
    aborted: list[int] = []
    cursor = 0
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        rows = queries.events_after(db, None, cursor, kinds=["order_probe", "order_end"], limit=batch)
        for r in rows:
            if r["kind"] == "order_end":
                Path(out).write_text(json.dumps({"seen": seen, "aborted": aborted}))
                db.close()
                return
            seen.append(int(r["id"]))
            if r["payload"].get("aborted"):
                aborted.append(int(r["id"]))
        if rows:
            cursor = int(rows[-1]["id"])
        else:
            time.sleep(0.005)
    Path(out).write_text(json.dumps({"seen": seen, "aborted": aborted, "timed_out": True}))


def _one_pair_out_of_id_order(db: Any) -> None:
    """Interleave two transactions for certain (the random writers very likely do too, but a
    loaded machine may run them one after another): the first writes an event, the second writes
    one and commits, then the first writes another and commits, so in the order followers read
    (transaction, then id) a larger id comes before a smaller one."""
    later_committed = threading.Event()

    def first(tx: Tx) -> None:
        tx.event("b0", None, "order_probe", {"writer": -1, "txn": 0, "e": 0, "aborted": False})
        tx.all("SELECT 1")  # a read waits for the pipelined insert: its id is taken now
        threading.Thread(target=lambda: (db.write(lambda t2: t2.event(
            "b1", None, "order_probe", {"writer": -1, "txn": 1, "e": 0, "aborted": False})),
            later_committed.set())).start()
        assert later_committed.wait(60), "the later transaction did not commit"
        tx.event("b0", None, "order_probe", {"writer": -1, "txn": 0, "e": 1, "aborted": False})

    db.write(first)


def test_eight_writers_out_of_id_order_reach_three_followers_exactly_once_in_one_order(
    pg_url: str, tmp_path: Path,
) -> None:
    db = open_database(pg_url)
    outs = [str(tmp_path / f"follower{i}.json") for i in range(FOLLOWERS)]
    followers = [FORK.Process(target=_follower, args=(pg_url, outs[i], (3, 17, 500)[i])) for i in range(FOLLOWERS)]
    for p in followers:
        p.start()
    writers = [FORK.Process(target=_writer, args=(pg_url, n, 1000 + n)) for n in range(WRITERS)]
    for p in writers:
        p.start()
    _one_pair_out_of_id_order(db)
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    db.write(lambda tx: tx.event("b0", None, "order_end", {}))
    for p in followers:
        p.join(120)
        assert p.exitcode == 0

    committed = [int(r["id"]) for r in db.read(lambda tx: tx.all(
        "SELECT id FROM task_events WHERE kind = 'order_probe' ORDER BY xid, id"))]
    db.close()
    assert len(committed) > WRITERS * TXNS_PER_WRITER * 0.8
    results = [json.loads(Path(o).read_text()) for o in outs]
    for res in results:
        assert not res.get("timed_out"), "a follower never reached the end marker"
        assert res["aborted"] == [], "a rolled-back transaction's event reached a follower"
        assert len(res["seen"]) == len(set(res["seen"])), "a follower saw an event twice"
        assert res["seen"] == committed, "a follower missed an event or saw them in another order"
    # the writers really committed out of id order: followers got larger ids before smaller ones
    seen = results[0]["seen"]
    assert any(b < a for a, b in zip(seen, seen[1:], strict=False))


def test_a_writer_never_waits_for_another_writers_open_transaction(pg_url: str) -> None:
    db = open_database(pg_url)
    start = queries.last_event_id(db)
    holding = threading.Event()
    release = threading.Event()

    def slow(tx: Tx) -> None:
        tx.event("default", None, "order_probe", {"who": "slow"})
        tx.scalar("SELECT 1")  # the event row is on the server, its id taken, before the wait
        holding.set()
        assert release.wait(60)

    slow_thread = threading.Thread(target=lambda: db.write(slow))
    slow_thread.start()
    assert holding.wait(30)
    # with the slow transaction still open, another writer commits a whole verb
    done: list[dict[str, Any]] = []
    fast_thread = threading.Thread(target=lambda: done.append(tasks.create(db, "default", "fast")))
    fast_thread.start()
    fast_thread.join(30)
    try:
        assert done, "the second writer waited for the first one's transaction"
        # the follower does not get the later commit ahead of the open, earlier transaction
        assert queries.events_after(db, "default", start) == []
    finally:
        release.set()
        slow_thread.join(30)
    kinds = [e["kind"] for e in queries.events_after(db, "default", start)]
    assert kinds[0] == "order_probe" and "created" in kinds
    db.close()


def test_a_commit_that_wrote_events_wakes_listeners_on_other_connections(pg_url: str) -> None:
    import psycopg

    db = open_database(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as listener:
        listener.execute("LISTEN agentboard_events")
        tasks.create(db, "default", "wake them", assignee="w")
        heard = list(listener.notifies(timeout=30, stop_after=1))
        assert [(n.channel, n.payload) for n in heard] == [("agentboard_events", "default")]
        # the notification's own transaction leaves no setting behind on the pooled connection
        assert db.read(lambda tx: tx.scalar("SELECT current_setting('synchronous_commit')")) == "on"
    db.close()
