"""Statements that find their rows by key on a board whose planner statistics come from a quiet
spell: a long history, nothing ready or running when it was last analyzed, then a queue of
ready tasks and a fleet's workers. Through the partial indexes of ready or running tasks (priced
as empty), each claim read the whole ready queue, and each pass every host's running tasks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg

from agentboard.config import Settings
from agentboard.kernel import dispatching as kd
from agentboard.kernel.runs import claims
from agentboard.store import Database, open_database


def _quiet_then_queued(url: str, tmp_path: Path, done: int, ready: int) -> Database:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO tasks (id, board, title, body, assignee, status, priority, created_at, updated_at) "
            "SELECT 'd_' || g, 'default', 'old', '', 'w', 'done', 0, g, g FROM generate_series(1, %s) g", (done,))
        conn.execute("VACUUM ANALYZE")  # the statistics of the quiet spell: nothing ready
        conn.execute(
            "INSERT INTO tasks (id, board, title, body, assignee, status, priority, created_at, updated_at) "
            "SELECT 'r_' || g, 'default', 'queued', '', 'w', 'ready', 0, %s + g, %s + g "
            "FROM generate_series(1, %s) g", (done, done, ready))
    return open_database(url, settings=Settings(home=tmp_path), migrate=False)


def _reads_of_tasks(db: Database, sql: str, params: dict[str, Any]) -> list[str]:
    """How the plan reads ``tasks``: the indexes of ``tasks`` it uses, and ``Seq Scan`` for a scan
    of the table (the statement is explained, not run)."""
    plan = db.read(lambda tx: [str(next(iter(r.values()))) for r in tx.all("EXPLAIN " + sql, params)])
    reads = []
    for line in plan:
        if re.search(r"Seq Scan on tasks\b", line):
            reads.append("Seq Scan")
        m = re.search(r"(?:using|Index Scan on) ((?:ix_)?tasks_?\w*)", line)
        if m:
            reads.append(m[1])
    return reads


def test_a_claim_reads_its_chosen_tasks_and_swaps_each_by_key_whatever_the_statistics_say(
        pg_url: str, tmp_path: Path) -> None:
    db = _quiet_then_queued(pg_url, tmp_path, done=20_000, ready=2_000)
    params: dict[str, Any] = {"b": "default", "lim": 8}
    ids = [f"r_{g}" for g in range(500, 532)]
    from agentboard.store.engine import in_list, values_list

    chosen = kd.claim_candidates_sql(in_list("i", ids, params), limited=True, dialect="postgresql")
    swap_params: dict[str, Any] = {"lock": "x", "exp": 0.0, "host": "h", "now": 0.0}
    swap = kd.CLAIM_SWAP_MANY_SQL.format(values=values_list("s", [(i, n) for n, i in enumerate(ids)], swap_params))
    claim_one = {"id": "r_701", "b": "default", "lock": "x", "exp": 0.0, "pid": None, "host": "h", "now": 0.0,
                 "actor": None}
    for sql, p in ((chosen, params), (swap, swap_params), (claims._CLAIM_PG, claim_one)):
        reads = _reads_of_tasks(db, sql, p)
        assert reads and set(reads) == {"tasks_pkey"}, (sql, reads)
    db.close()


def test_claims_by_key_still_take_only_ready_tasks(pg_url: str, tmp_path: Path) -> None:
    db = _quiet_then_queued(pg_url, tmp_path, done=50, ready=20)
    got = kd.claim_batch(db, "default", ["d_1", "r_1", "r_2", "d_2"], host="h")
    assert sorted(c["id"] for c in got) == ["r_1", "r_2"]
    again = kd.claim_batch(db, "default", ["r_1", "r_3"], host="h", limit=5)
    assert [c["id"] for c in again] == ["r_3"]
    db.close()


def test_a_pass_reads_its_own_running_tasks_by_key_whatever_the_statistics_say(pg_url: str, tmp_path: Path) -> None:
    db = _quiet_then_queued(pg_url, tmp_path, done=20_000, ready=1_000)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # eight hosts' workers, none when analyzed
        conn.execute("UPDATE tasks SET status = 'running', worker_host = 'host-' || (substr(id, 3)::int % 8), "
                     "claim_expires = 4e9 WHERE id LIKE 'r_%'")
    for sql, p in ((kd.RUNNING_OWN_SQL, {"h": "host-3"}), (kd.RUNNING_UNRECORDED_SQL, {}),
                   (kd.RUNNING_LAPSED_SQL, {"h": "host-3", "now": 1.0})):
        plan = db.read(lambda tx, sql=sql, p=p: [str(next(iter(r.values()))) for r in tx.all("EXPLAIN " + sql, p)])
        scan = [i for i, line in enumerate(plan) if "Scan using ix_tasks_running on tasks" in line]
        # the index of running tasks, entered by its key (not walked whole with the rows filtered)
        assert scan and "Index Cond" in plan[scan[0] + 1], plan
    # when another host's claim lapses next: each look into the index by its key, one row each
    plan = db.read(lambda tx: [str(next(iter(r.values()))) for r in tx.all(
        "EXPLAIN ANALYZE " + kd.NEXT_LAPSE_SQL, {"h": "host-3", "now": 1.0})])
    scans = [i for i, line in enumerate(plan) if "Scan using ix_tasks_running on tasks" in line]
    assert len(scans) == 3, plan
    assert all("Index Cond" in plan[i + 1] and re.search(r"actual time=\S+ rows=1 loops", plan[i]) for i in scans), plan
    snap = kd.pass_snapshot(db, host="host-3")
    assert len(snap.running) == 125 and {r["worker_host"] for r in snap.running} == {"host-3"}
    assert snap.next_lapse == 4e9
    db.close()
