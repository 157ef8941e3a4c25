"""PostgreSQL write transactions on libpq's pipeline (``store.pgwire``): all or nothing, the
database's own errors, prepared statements that survive failed verbs and schema changes, long
transactions that never stall, and listeners in other processes that hear of every commit."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from testenv import database_url, scratch_database

from agentboard.config import Settings
from agentboard.domain.errors import Conflict, NotFound
from agentboard.kernel import boards, queries, runs, tasks
from agentboard.store import Database, Tx, open_database


def _db(url: str, tmp_path: Path) -> Database:
    return open_database(url, settings=Settings(home=tmp_path), migrate=False)


def _counts(db: Database) -> tuple[int, int]:
    return (int(db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM tasks"))),
            int(db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM task_events"))))


def test_a_verb_that_raises_after_its_writes_leaves_nothing_behind(pg_url: str, tmp_path: Path) -> None:
    db = _db(pg_url, tmp_path)
    tasks.create(db, "default", "first", assignee="w")
    before = _counts(db)

    def half_done(tx: Tx) -> None:
        tx.execute("INSERT INTO tasks (id, board, title, body, status, priority, created_at, updated_at, "
                   "workspace_kind, skills, verify, consecutive_failures, protocol_violations, rework_count) "
                   "VALUES ('t_half', 'default', 'half', '', 'ready', 0, 0, 0, 'scratch', '[]', '[]', 0, 0, 0)")
        tx.event("default", "t_half", "created", {})
        assert tx.scalar("SELECT COUNT(*) FROM tasks WHERE id = 't_half'") == 1  # visible inside
        raise Conflict("changed my mind")

    with pytest.raises(Conflict):
        db.write(half_done)
    assert _counts(db) == before
    # the connection is usable at once, its prepared statements too
    again = tasks.create(db, "default", "second", assignee="w")
    assert _counts(db) == (before[0] + 1, before[1] + 1)
    assert queries.task_detail(db, "default", again["id"])["title"] == "second"
    db.close()


def test_a_failing_statement_in_the_middle_raises_the_databases_own_error_and_writes_nothing(
        pg_url: str, tmp_path: Path) -> None:
    db = _db(pg_url, tmp_path)
    before = _counts(db)

    def bad(tx: Tx) -> None:
        tx.event("default", None, "note", {})
        tx.execute("INSERT INTO no_such_table VALUES (1)")  # not read: fails at the commit
        tx.event("default", None, "note", {})

    with pytest.raises(psycopg.errors.UndefinedTable):
        db.write(bad)
    assert _counts(db) == before
    assert tasks.create(db, "default", "after", assignee="w")["status"] == "ready"
    db.close()


def test_failed_verbs_do_not_pile_up_prepared_statements_in_the_session(pg_url: str, tmp_path: Path) -> None:
    db = _db(pg_url, tmp_path)
    t = tasks.create(db, "default", "claimed once", assignee="w")
    runs.claim(db, "default", t["id"])

    def prepared(tx: Tx) -> int:
        return int(tx.scalar("SELECT COUNT(*) FROM pg_prepared_statements"))

    for _ in range(3):  # warm: every statement of the failing claim is prepared
        with pytest.raises(Conflict):
            runs.claim(db, "default", t["id"])
    first = db.write(prepared)
    for _ in range(50):
        with pytest.raises(Conflict):
            runs.claim(db, "default", t["id"])
    assert db.write(prepared) == first
    db.close()


def test_many_statements_in_one_transaction_never_stall_and_their_row_counts_add_up(
        pg_url: str, tmp_path: Path) -> None:
    db = _db(pg_url, tmp_path)
    ids = [tasks.create(db, "default", f"t{i}", assignee="w")["id"] for i in range(3)]

    def bulk(tx: Tx) -> int:
        for i in range(20_000):  # far more than fit in the socket buffers unread
            tx.event("default", None, "note", {"i": i, "pad": "x" * 200})
        tx.executemany("UPDATE tasks SET priority = :p WHERE id = :id",
                       [{"p": 7, "id": i} for i in ids] + [{"p": 7, "id": "t_missing"}])
        return tx.rowcount

    assert db.write(bulk) == 3
    assert db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM task_events WHERE kind = 'note'")) == 20_000
    assert {queries.task_detail(db, "default", i)["priority"] for i in ids} == {7}
    db.close()


def test_a_column_added_under_a_prepared_statement_does_not_break_the_next_verb(pg_url: str, tmp_path: Path) -> None:
    """A migration while dispatchers run: statements prepared before it (``SELECT t.*``) are
    prepared again and the verb goes through."""
    db = _db(pg_url, tmp_path)
    t = tasks.create(db, "default", "first", assignee="w")
    c = runs.claim(db, "default", t["id"])
    runs.complete(db, "default", t["id"], run_id=c["run_id"], summary="ok")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE tasks ADD COLUMN added_later TEXT")
    t2 = tasks.create(db, "default", "second", assignee="w")
    c2 = runs.claim(db, "default", t2["id"])
    assert runs.complete(db, "default", t2["id"], run_id=c2["run_id"], summary="ok")["status"] == "done"
    db.close()


def test_a_one_statement_verb_whose_session_lost_its_prepared_statements_prepares_them_again(
        pg_url: str, tmp_path: Path) -> None:
    """Once prepared, the claim of the next task goes to the server without the pipeline. A
    session that lost its prepared statements (psycopg deallocates them all when it rolls back a
    transaction in which it prepared its own) refuses the name; the verb prepares it again and
    goes through, once."""
    db = _db(pg_url, tmp_path)
    for i in range(4):
        tasks.create(db, "default", f"t{i}", assignee="w")
    assert len(runs.claim_next(db, "default", limit=1)) == 1  # prepared (through the pipeline)
    assert len(runs.claim_next(db, "default", limit=1)) == 1  # sent prepared, without it
    conn, token = db._acquire()
    conn.execute("DEALLOCATE ALL")
    db._release(token)
    assert len(runs.claim_next(db, "default", limit=1)) == 1
    assert len(runs.claim_next(db, "default", limit=1)) == 1
    assert db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM task_runs")) == 4
    db.close()


def test_errors_of_the_kernel_still_come_back_as_the_kernels_own(pg_url: str, tmp_path: Path) -> None:
    db = _db(pg_url, tmp_path)
    with pytest.raises(NotFound):
        tasks.create(db, "no-such-board", "x", assignee="w")
    boards.create(db, "gone")
    boards.archive(db, "gone")
    with pytest.raises(Exception, match="archived"):
        tasks.create(db, "gone", "x", assignee="w")
    assert _counts(db)[0] == 0
    out = tasks.create(db, "default", "to nobody", assignee="nobody-known")
    assert "no profile named 'nobody-known'" in out["warnings"][0]
    db.close()


def test_a_listener_in_another_process_hears_of_every_burst_of_commits(pg_url: str, tmp_path: Path) -> None:
    heard: list[float] = []
    ready = threading.Event()
    stop = threading.Event()

    def listen() -> None:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("LISTEN agentboard_events")
            ready.set()
            while not stop.is_set():
                for _n in conn.notifies(timeout=0.2, stop_after=1):
                    heard.append(time.monotonic())

    th = threading.Thread(target=listen, daemon=True)
    th.start()
    assert ready.wait(10)
    db = _db(pg_url, tmp_path)
    for burst in range(3):
        start = time.monotonic()
        for i in range(20):
            tasks.create(db, "default", f"b{burst}.{i}", assignee="w")
        deadline = time.monotonic() + 10
        while not [h for h in heard if h >= start] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [h for h in heard if h >= start], f"no notification after burst {burst}"
        time.sleep(0.05)
    # one process's commits share notifications: far fewer than one per commit
    assert len(heard) < 60
    db.close()
    stop.set()
    th.join(5)


def test_a_process_that_exits_right_after_its_commit_still_wakes_the_listeners(pg_url: str, tmp_path: Path) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("LISTEN agentboard_events")
        code = ("import sys; from pathlib import Path; from agentboard.config import Settings; "
                "from agentboard.kernel import tasks; from agentboard.store import open_database; "
                f"db = open_database({pg_url!r}, settings=Settings(home=Path({str(tmp_path)!r})), migrate=False); "
                "tasks.create(db, 'default', 'from a short-lived process', assignee='w'); sys.exit(0)")
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
        got = list(conn.notifies(timeout=5, stop_after=1))
    assert got and got[0].payload == "default"
    assert [t["title"] for t in queries.list_tasks(_db(pg_url, tmp_path), "default")] == ["from a short-lived process"]


def test_a_dispatchers_claims_and_records_wake_no_other_host_but_a_promotion_does(pg_url: str, tmp_path: Path) -> None:
    """In a burst, eight hosts' claims and spawn records would each wake the seven others for a
    glance that finds nothing new for them; this process's own listeners still hear of them."""
    from agentboard.kernel import dispatching as kd

    db = _db(pg_url, tmp_path)
    gate = tasks.create(db, "default", "gate", assignee="w")
    made = [tasks.create(db, "default", f"t{i}", assignee="w")["id"] for i in range(3)]
    child = tasks.create(db, "default", "child", assignee="w", parents=[gate["id"]])
    local: list[set[str]] = []
    db.add_listener(local.append)
    db._notifier.flush()  # the creations' notification is out before listening starts
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("LISTEN agentboard_events")
        claimed = kd.claim_batch(db, "default", made, host="host-a")
        kd.record_spawns(db, "default", [{"task_id": c["id"], "run_id": c["run_id"], "pid": 4242 + n, "host": "host-a"}
                                         for n, c in enumerate(claimed)])
        db._notifier.flush()  # anything they had marked goes out now
        with psycopg.connect(pg_url, autocommit=True) as other:  # commits after anything they sent
            other.execute("SELECT pg_notify('agentboard_events', 'marker')")
        heard = [n.payload for n in conn.notifies(timeout=10, stop_after=1)]
        assert heard == ["marker"]
        assert len(local) == 2  # the claim and the record, for this process's own dispatcher and API
        run = runs.claim(db, "default", gate["id"], host="host-a")
        runs.complete(db, "default", gate["id"], summary="ok", run_id=run["run_id"])
        heard = [n.payload for n in conn.notifies(timeout=10, stop_after=1)]
    assert heard == ["default"]  # the completion made the child ready: work for any host
    assert queries.task_detail(db, "default", child["id"])["status"] == "ready"
    db.close()


def test_the_claim_of_the_next_task_keeps_one_plan_on_a_board_of_thousands_of_ready_tasks(
        pg_url: str, tmp_path: Path) -> None:
    """A prepared statement is planned once for any parameters only while that plan looks no
    dearer than planning anew; a ``LIMIT`` bound as a parameter is priced at a tenth of the rows,
    so on a board of thousands of ready tasks every claim planned its whole statement again
    (three times the server's CPU per claim)."""
    db = _db(pg_url, tmp_path)
    first = tasks.create(db, "default", "t0", assignee="w")
    with psycopg.connect(pg_url, autocommit=True) as conn:  # 10,000 more like it, at once
        conn.execute("INSERT INTO tasks SELECT r.* FROM tasks t, generate_series(1, 10000) g, "
                     "LATERAL jsonb_populate_record(NULL::tasks, to_jsonb(t) || "
                     "jsonb_build_object('id', 't_' || g, 'created_at', t.created_at + g)) r "
                     "WHERE t.id = %s", (first["id"],))
        conn.execute("ANALYZE")
    for _ in range(15):
        assert runs.claim_next(db, "default", limit=1)

    def plans(tx: Tx) -> list[dict[str, object]]:
        return tx.all("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                      "WHERE statement LIKE '%INSERT INTO task_runs%' AND statement LIKE '%SKIP LOCKED%' "
                      "AND statement NOT LIKE '%pg_prepared_statements%'")

    (claim,) = db.write(plans)
    assert claim["generic_plans"] >= 10 and claim["custom_plans"] <= 5, claim
    db.close()


def test_the_ready_queue_read_keeps_one_plan_on_a_board_of_thousands_of_ready_tasks(tmp_path: Path) -> None:
    """A pass reads its ready queue with its room as the limit: bound as a parameter, that limit
    was priced at a tenth of the rows and every pass planned the read anew."""
    from agentboard.kernel import dispatching

    with scratch_database(prefix="ab_ready_") as name:  # a database of its own, migrated here
        _ready_queue_keeps_one_plan(database_url(name), tmp_path, dispatching)


def _ready_queue_keeps_one_plan(pg_url: str, tmp_path: Path, dispatching: Any) -> None:
    import agentboard

    agentboard.connect(pg_url).close()  # migrated, as a person's first command does
    # one connection: every read on the one session whose prepared statements are looked at
    db = open_database(pg_url, settings=Settings(home=tmp_path, pg_pool_size=1, pg_max_overflow=0), migrate=False)
    first = tasks.create(db, "default", "t0", assignee="w")
    with psycopg.connect(pg_url, autocommit=True) as conn:  # 10,000 more like it, one in ten ready
        conn.execute("INSERT INTO tasks SELECT r.* FROM tasks t, generate_series(1, 10000) g, "
                     "LATERAL jsonb_populate_record(NULL::tasks, to_jsonb(t) || "
                     "jsonb_build_object('id', 't_' || g, 'created_at', t.created_at + g, "
                     "'status', CASE WHEN g %% 10 = 0 THEN 'ready' ELSE 'done' END)) r "
                     "WHERE t.id = %s", (first["id"],))
        conn.execute("ANALYZE")
    for _ in range(25):
        got = dispatching.ready_batch(db, "default", 7)
        assert len(got) == 7 and got[0]["id"] == first["id"]  # the oldest first, the limit kept
    (read,) = db.read(lambda tx: tx.all(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
        "WHERE statement LIKE '%last_run_id%' AND statement NOT LIKE '%pg_prepared_statements%'"))
    assert read["generic_plans"] >= 10 and read["custom_plans"] <= 5, read
    db.close()


def test_a_read_writes_its_limit_rounded_up_to_three_significant_bits() -> None:
    from agentboard.kernel.dispatching import limit_in_statement

    assert [limit_in_statement(n) for n in (1, 7, 8, 9, 17, 100, 160, 161)] == [1, 7, 8, 10, 20, 112, 160, 192]
    assert all(n <= limit_in_statement(n) <= n * 1.25 for n in range(1, 5000))
    assert len({limit_in_statement(n) for n in range(1, 513)}) == 32
