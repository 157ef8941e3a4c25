"""Migrations: ``upgrade head`` on an empty database equals ``store/schema.py``; opening is idempotent
and safe when several processes open a fresh home at once."""

from __future__ import annotations

import importlib
import json
import multiprocessing as mp
import os
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

import agentboard
from agentboard.domain.errors import Conflict
from agentboard.kernel import queries, tasks
from agentboard.store import migrate
from agentboard.store.engine import Database
from agentboard.store.schema import metadata

# SQLite's full-text tables; PostgreSQL's event-order index and task count deltas
MIGRATION_ONLY_PREFIXES = ("wiki_fts", "ix_wiki_pages_fts", "wiki_pages_fts_", "ix_events_xid",
                           "task_count_deltas", "ix_count_deltas", "task_counts")


def _include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    return not (name or "").startswith(MIGRATION_ONLY_PREFIXES)


def _diff(url: str) -> list[Any]:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True, "include_object": _include})
            return list(compare_metadata(ctx, metadata))
    finally:
        engine.dispose()


@pytest.fixture
def empty_pg() -> Iterator[str]:
    """A PostgreSQL database with nothing in it (not the migrated template)."""
    from testenv import database_url, require_pg, scratch_database

    require_pg()
    with scratch_database(prefix="ab_fresh_") as name:
        yield database_url(name)


def _upgrade_fresh(url: str) -> Database:
    db = Database(url)
    assert migrate.current_revision(db) is None
    migrate.upgrade(db)
    return db


def test_sqlite_upgrade_head_matches_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    db = _upgrade_fresh(url)
    assert migrate.current_revision(db) == migrate.HEAD
    db.close()
    assert _diff(url) == []


@pytest.mark.postgres
def test_postgres_upgrade_head_matches_schema(empty_pg: str) -> None:
    db = _upgrade_fresh(empty_pg)
    assert migrate.current_revision(db) == migrate.HEAD
    db.close()
    assert _diff(empty_pg) == []


def test_head_constant_is_the_newest_revision() -> None:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrate._config())
    assert script.get_heads() == [migrate.HEAD]


def test_ensure_schema_is_idempotent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    client = agentboard.connect(str(home))
    t = tasks.create(client.db, "default", "survives", assignee="w")
    migrate.ensure_schema(client.db)
    migrate.upgrade(client.db)  # a second full upgrade is a no-op too
    client.close()
    again = agentboard.connect(str(home))
    assert [b["slug"] for b in again.boards()] == ["default"]
    assert again.board().show(t["id"])["title"] == "survives"
    again.close()


def _open_and_create(home: str, i: int, barrier: Any, out: Any) -> None:
    try:
        barrier.wait()
        client = agentboard.connect(home)
        tasks.create(client.db, "default", f"from process {i}", assignee="w")
        client.close()
        out.put(None)
    except BaseException:  # pragma: no cover - reported by the parent
        out.put(traceback.format_exc())


def test_eight_processes_open_a_fresh_home_at_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(8)
    out = ctx.Queue()
    procs = [ctx.Process(target=_open_and_create, args=(str(home), i, barrier, out)) for i in range(8)]
    for p in procs:
        p.start()
    errors = [e for e in (out.get(timeout=120) for _ in procs) if e]
    for p in procs:
        p.join(30)
    assert errors == []
    client = agentboard.connect(str(home))
    assert migrate.current_revision(client.db) == migrate.HEAD
    assert [b["slug"] for b in client.boards()] == ["default"]
    assert len(queries.list_tasks(client.db, "default")) == 8
    client.close()
    assert not [f for f in os.listdir(home) if f.endswith(".tmp")]


def test_upgrade_keeps_events_and_their_ids(tmp_path: Path) -> None:
    """0004 rebuilds task_events on SQLite; an existing log survives with the same ids."""
    db = Database(f"sqlite:///{tmp_path / 'old.db'}")
    migrate.upgrade(db, "0003")
    for i in range(5):
        db.write(lambda tx, i=i: tx.event("default", f"t_{i:08x}", "created", {"n": i}))
    before = db.read(lambda tx: tx.all("SELECT id, task_id, kind, payload FROM task_events ORDER BY id"))
    migrate.upgrade(db)
    after = db.read(lambda tx: tx.all("SELECT id, task_id, kind, payload FROM task_events ORDER BY id"))
    assert after == before
    table_sql = db.read(lambda tx: tx.scalar("SELECT sql FROM sqlite_master WHERE name = 'task_events'"))
    assert "AUTOINCREMENT" not in table_sql
    db.write(lambda tx: tx.event("default", None, "board_created", {}))
    assert db.read(lambda tx: tx.scalar("SELECT MAX(id) FROM task_events")) == before[-1]["id"] + 1
    db.close()


def _history_before_rollups(db: Database) -> None:
    """Two runs of a done task and one review, written as a database at 0017 held them."""
    def _w(tx: Any) -> None:
        tx.execute("INSERT INTO boards (slug, name, created_at) VALUES ('default', 'default', 0) "
                   "ON CONFLICT (slug) DO NOTHING")
        tx.execute("INSERT INTO profiles (name, command, model, created_at, updated_at) "
                   "VALUES ('alpha', 'true', 'm-a', 0, 0)")
        tx.execute("INSERT INTO tasks (id, board, title, status, assignee, created_at, updated_at, completed_at) "
                   "VALUES ('t_00000001', 'default', 'old', 'done', 'alpha', 1000, 1000, 1600)")
        for n, outcome, cost in ((1, "crashed", 0.25), (2, "completed", 0.5)):
            tx.execute("INSERT INTO task_runs (task_id, board, profile, attempt, status, outcome, started_at, "
                       "ended_at, cost_usd, synthetic) VALUES ('t_00000001', 'default', 'alpha', :n, 'closed', :o, "
                       "1100, 1200, :c, 0)", {"n": n, "o": outcome, "c": cost})
        tx.execute("INSERT INTO reviews (task_id, board, run_id, reviewer, verdict, created_at) "
                   "VALUES ('t_00000001', 'default', NULL, 'me', 'approved', 1600)")
    db.write(_w)


def _check_backfilled(db: Database) -> None:
    from agentboard.kernel import insights

    got = insights.read(db, "default", insights.Query.build("profile"))["groups"]
    alpha = next(g for g in got if g["key"] == "alpha")
    assert (alpha["runs"], alpha["tasks_done"], alpha["cost_usd"]) == (2, 1, 0.75)
    assert alpha["first_attempt_success_rate"] == 0.0 and alpha["failures"] == {"crashed": 1}


def test_the_rollups_migration_fills_them_from_the_runs_already_recorded(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'old.db'}")
    migrate.upgrade(db, "0017")
    _history_before_rollups(db)
    migrate.upgrade(db)
    _check_backfilled(db)
    db.close()


@pytest.mark.postgres
def test_the_rollups_migration_fills_them_on_postgres(empty_pg: str) -> None:
    db = Database(empty_pg)
    migrate.upgrade(db, "0017")
    _history_before_rollups(db)
    migrate.upgrade(db)
    _check_backfilled(db)
    db.close()


@pytest.mark.postgres
def test_a_board_keeps_its_counts_across_the_upgrade_that_records_a_move_in_one_row(empty_pg: str) -> None:
    from agentboard.kernel import runs

    db = Database(empty_pg)
    migrate.upgrade(db, "0020")

    def _w(tx: Any) -> None:  # five tasks, three claimed, one of them done, as 0020's triggers counted them
        tx.execute("INSERT INTO boards (slug, name, created_at) VALUES ('b', 'b', 0)")
        for i in range(5):
            tx.execute("INSERT INTO tasks (id, board, title, assignee, status, created_at, updated_at) "
                       "VALUES (:id, 'b', 't', 'w', 'ready', 0, 0)", {"id": f"t_0000000{i}"})
        tx.execute("UPDATE tasks SET status = 'running' WHERE id IN ('t_00000000', 't_00000001', 't_00000002')")
        tx.execute("UPDATE tasks SET status = 'done' WHERE id = 't_00000000'")

    db.write(_w)
    migrate.upgrade(db)
    assert migrate.current_revision(db) == migrate.HEAD
    run = runs.claim(db, "b", "t_00000003")
    runs.complete(db, "b", "t_00000003", run_id=run["run_id"], summary="ok")
    counted = {c["status"]: c["count"] for c in queries.board_view(db, "b")["columns"]}
    assert {s: n for s, n in counted.items() if n} == {"ready": 1, "running": 2, "done": 2}
    db.close()


@pytest.mark.postgres
def test_the_rollups_keep_their_counts_when_postgres_reorders_their_columns_and_back(empty_pg: str) -> None:
    from alembic import command

    db = Database(empty_pg)
    migrate.upgrade(db, "0022")
    db.write(lambda tx: tx.execute(
        "INSERT INTO run_rollups (board, day, profile, model, shard, runs, done, d3, c5, cost_usd) "
        "VALUES ('b', 20000, 'p', 'm', 3, 7, 2, 4, 1, 0.5)"))
    cols = "board, day, profile, model, shard, runs, done, d3, c5, cost_usd, firsts"
    before = db.read(lambda tx: tx.all(f"SELECT {cols} FROM run_rollups"))
    migrate.upgrade(db)
    assert db.read(lambda tx: tx.all(f"SELECT {cols} FROM run_rollups")) == before
    # the key still holds: the same key adds to its row
    db.write(lambda tx: tx.execute(
        "INSERT INTO run_rollups (board, day, profile, model, shard, runs) VALUES ('b', 20000, 'p', 'm', 3, 1) "
        "ON CONFLICT (board, day, profile, model, shard) DO UPDATE SET runs = run_rollups.runs + excluded.runs"))
    cfg = migrate._config()
    with db.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0022")
    assert migrate.current_revision(db) == "0022"
    assert db.read(lambda tx: tx.all(f"SELECT {cols} FROM run_rollups")) == [{**before[0], "runs": 8}]
    db.close()


def _ledger_with_runs(db: Database) -> None:
    """Three closed runs and an LLM call, each with its row of the ledger as 0023 wrote them: the
    third run's worker has not exited yet (its row is pending)."""
    import time

    now = float(int(time.time()))  # whole seconds: every duration below is exact

    def _w(tx: Any) -> None:
        tx.execute("INSERT INTO boards (slug, name, created_at) VALUES ('default', 'default', 0) "
                   "ON CONFLICT (slug) DO NOTHING")
        tx.execute("INSERT INTO tasks (id, board, title, status, assignee, created_at, updated_at) "
                   "VALUES ('t_00000001', 'default', 'old', 'done', 'alpha', :now, :now)", {"now": now - 100})
        for n, cost, pid in ((1, 0.25, None), (2, 0.5, None), (3, 1.0, 4242)):
            rid = tx.scalar(
                "INSERT INTO task_runs (task_id, board, profile, attempt, status, outcome, started_at, ended_at, "
                "output_tokens, cost_usd, worker_pid, synthetic) VALUES ('t_00000001', 'default', 'alpha', :n, "
                "'closed', 'completed', :s, :e, :tok, :c, :pid, 0) RETURNING id",
                {"n": n, "s": now - 90 + n, "e": now - 80 + n, "tok": 10 * n, "c": cost, "pid": pid})
            tx.execute("INSERT INTO budget_usage (board, task_id, profile, run_id, source, at, runs, runtime, tokens, "
                       "cost_usd, pending) VALUES ('default', 't_00000001', 'alpha', :r, 'run', :at, 1, 10, :tok, "
                       ":c, :p)", {"r": rid, "at": now - 80 + n, "tok": 10 * n, "c": cost, "p": 1 if pid else 0})
        tx.execute("INSERT INTO budget_usage (board, task_id, source, at, tokens, cost_usd) "
                   "VALUES ('default', 't_00000001', 'llm', :at, 7, 0.07)", {"at": now - 50})
    db.write(_w)


def _runs_leave_the_ledger_and_come_back(db: Database) -> None:
    from alembic import command

    from agentboard.kernel import budgets

    migrate.upgrade(db, "0023")
    _ledger_with_runs(db)
    ledger = "SELECT source, run_id, runs, runtime, tokens, cost_usd, pending FROM budget_usage ORDER BY source, run_id"
    before = db.read(lambda tx: tx.all(ledger))
    migrate.upgrade(db)
    run3 = before[-1]["run_id"]
    assert db.read(lambda tx: tx.all(ledger)) == [
        {"source": "llm", "run_id": None, "runs": 0, "runtime": 0, "tokens": 7, "cost_usd": 0.07, "pending": 0},
        {"source": "pending", "run_id": run3, "runs": 0, "runtime": 0, "tokens": 0, "cost_usd": 0, "pending": 1}]
    # what the board spent reads the same: the runs from their rows, the call from the ledger
    spent = budgets.spending(db, "default")["work"]["spent"]
    assert (spent["runs"], spent["runtime"], spent["tokens"], round(spent["cost"], 6)) == (3, 30, 67, 1.82)
    cfg = migrate._config()
    with db.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0023")
    assert db.read(lambda tx: tx.all(ledger)) == before


def test_the_runs_leave_the_usage_ledger_and_a_downgrade_writes_them_back(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'old.db'}")
    _runs_leave_the_ledger_and_come_back(db)
    db.close()


@pytest.mark.postgres
def test_the_runs_leave_the_usage_ledger_and_a_downgrade_writes_them_back_on_postgres(empty_pg: str) -> None:
    db = Database(empty_pg)
    _runs_leave_the_ledger_and_come_back(db)
    db.close()


@pytest.mark.postgres
def test_the_completion_answers_columns_and_the_previous_versions_function_stays_for_a_rolling_upgrade(
        empty_pg: str) -> None:
    from alembic import command

    from agentboard.kernel import runs

    db = Database(empty_pg)
    migrate.upgrade(db)

    def finish(title: str) -> dict[str, Any]:
        parent = tasks.create(db, "default", title, assignee="w")["id"]
        child = tasks.create(db, "default", f"{title} child", assignee="w", parents=[parent])["id"]
        out = runs.complete(db, "default", parent, summary="done", run_id=runs.claim(db, "default", parent)["run_id"])
        assert out["status"] == "done" and out["promoted"] == [child]
        return out

    out = finish("at head")
    assert isinstance(out["completed_at"], float) and out["review_required"] is False
    functions = ("SELECT proname, pg_get_function_result(oid) AS answer FROM pg_proc "
                 "WHERE proname LIKE 'agentboard_complete_running%' ORDER BY 1")
    # the previous version's processes, still running during a rolling upgrade, call the first
    assert db.read(lambda tx: tx.all(functions)) == [
        {"proname": "agentboard_complete_running", "answer": "json"},
        {"proname": "agentboard_complete_running_json", "answer": "record"},
        {"proname": "agentboard_complete_running_row", "answer": "record"}]
    old = tasks.create(db, "default", "the previous version's", assignee="w")["id"]
    run = runs.claim(db, "default", old)["run_id"]
    answer = db.write(lambda tx: tx.scalar(
        "SELECT agentboard_complete_running(:id, 'default', CAST(:run AS bigint), 1.0, 0, NULL, 1, 0, 0, 'done', "
        "NULL, NULL, NULL, NULL, NULL, NULL, '{}', '{}')", {"id": old, "run": run}))
    answer = json.loads(answer) if isinstance(answer, str) else answer
    assert answer["task"]["status"] == "done" and answer["promoted"] == []
    # and the version before this one's (migration 0030): the task as a row of ``tasks``
    old = tasks.create(db, "default", "the version before's", assignee="w")["id"]
    run = runs.claim(db, "default", old)["run_id"]
    answer = db.write(lambda tx: tx.one(
        "SELECT (f.task).status, f.promoted FROM agentboard_complete_running_row(:id, 'default', CAST(:run AS bigint), "
        "1.0, 0, NULL, 1, 0, 0, 'done', NULL, NULL, NULL, NULL, NULL, NULL, '{}', '{}') f", {"id": old, "run": run}))
    assert answer["status"] == "done" and list(answer["promoted"]) == []
    cfg = migrate._config()
    with db.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0029")
    assert [r["proname"] for r in db.read(lambda tx: tx.all(functions))] == ["agentboard_complete_running"]
    migrate.upgrade(db)
    finish("upgraded again")
    db.close()


@pytest.mark.postgres
def test_postgres_reorders_the_tasks_and_runs_columns_keeping_rows_keys_triggers_and_the_completion(
        empty_pg: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from alembic import command

    from agentboard.kernel import hooks, runs

    hot = importlib.import_module("agentboard.store.migrations.versions.0033_pg_hot_columns_last")
    db = Database(empty_pg)
    migrate.upgrade(db, "0032")
    with monkeypatch.context() as m:  # this version's completion function comes with 0034
        m.setattr(hooks, "all_mirrored", lambda *points: False)
        done = tasks.create(db, "default", "finished", assignee="w", verify=["true"])["id"]
        runs.complete(db, "default", done, summary="ok", verified=True,
                      run_id=runs.claim(db, "default", done, host="h")["run_id"])
    running = tasks.create(db, "default", "at work", assignee="w")["id"]
    run = runs.claim(db, "default", running, host="h")["run_id"]
    runs.record_spawn(db, "default", running, run, pid=77, host="h", log_path="/l/w.log", workspace="/w")
    tasks.create(db, "default", "waiting", assignee="w", parents=[running])

    def columns(table: str) -> list[str]:
        return [r["attname"] for r in db.read(lambda tx: tx.all(
            "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) AND attnum > 0 "
            "AND NOT attisdropped ORDER BY attnum", {"t": table}))]

    def contents() -> tuple[Any, ...]:
        def _r(tx: Any) -> tuple[Any, ...]:
            return (tx.all("SELECT * FROM tasks ORDER BY id"), tx.all("SELECT * FROM task_runs ORDER BY id"),
                    # the same indexes on the same columns; a partial index's condition comes back
                    # spelled by the server (an IN list as an array of casts), which plans the same
                    tx.all("SELECT indexname, split_part(indexdef, ' WHERE ', 1) AS d, indexdef LIKE '% WHERE %' AS p "
                           "FROM pg_indexes WHERE tablename IN ('tasks', 'task_runs') ORDER BY 1"),
                    tx.all("SELECT tgname, pg_get_triggerdef(oid) AS d FROM pg_trigger WHERE NOT tgisinternal "
                           "AND tgrelid = 'tasks'::regclass ORDER BY 1"),
                    tx.all("SELECT relname, reloptions FROM pg_class WHERE relname IN ('tasks', 'task_runs') "
                           "ORDER BY 1"))
        return db.read(_r)

    before = contents()
    assert columns("tasks") == list(hot.TASKS_OLD) and columns("task_runs") == list(hot.RUNS_OLD)
    migrate.upgrade(db)
    assert columns("tasks") == list(hot.TASKS_NEW) and columns("task_runs") == list(hot.RUNS_NEW)
    assert contents() == before
    # the run ids go on from the same sequence, the completion function answers, the counts follow
    out = runs.complete(db, "default", running, run_id=run, summary="done")
    assert out["status"] == "done" and len(out["promoted"]) == 1
    child = runs.claim(db, "default", out["promoted"][0], host="h")
    assert child["run_id"] > run
    counted = {c["status"]: c["count"] for c in queries.board_view(db, "default")["columns"] if c["count"]}
    assert counted == {"done": 2, "running": 1}
    after = contents()
    cfg = migrate._config()
    with db.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0032")
    assert columns("tasks") == list(hot.TASKS_OLD) and columns("task_runs") == list(hot.RUNS_OLD)
    assert contents() == after
    monkeypatch.setattr(hooks, "all_mirrored", lambda *points: False)
    runs.complete(db, "default", out["promoted"][0], run_id=child["run_id"], summary="done")
    migrate.upgrade(db)
    db.close()


@pytest.mark.postgres
def test_a_process_that_prepared_its_statements_before_the_tables_were_rebuilt_keeps_working(
        empty_pg: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentboard.kernel import dispatching, hooks, runs

    old = Database(empty_pg)
    migrate.upgrade(old, "0032")
    # statements that read every column of a task (``t.*``, ``RETURNING *``), prepared on the
    # connection of this process, as a dispatcher of the previous version has them
    first = tasks.create(old, "default", "before", assignee="w")["id"]
    got = runs.claim_next(old, "default", limit=1, host="h")
    with monkeypatch.context() as m:  # this version's completion function comes with 0034
        m.setattr(hooks, "all_mirrored", lambda *points: False)
        runs.complete(old, "default", first, run_id=got[0]["run_id"], summary="done")
    dispatching.pass_snapshot(old, host="h")
    queued = [tasks.create(old, "default", f"after {i}", assignee="w")["id"] for i in range(2)]

    new = Database(empty_pg)
    migrate.upgrade(new)
    new.close()

    got = runs.claim_next(old, "default", limit=1, host="h")
    assert got and got[0]["id"] in queued
    out = runs.complete(old, "default", got[0]["id"], run_id=got[0]["run_id"], summary="done")
    assert out["status"] == "done"
    assert [r["id"] for r in dispatching.pass_snapshot(old, host="h").running] == []
    detail = queries.task_detail(old, "default", first)
    assert detail["status"] == "done" and [r["outcome"] for r in detail["runs"]] == ["completed"]
    old.close()


@pytest.fixture
def scratch_role(empty_pg: str) -> Iterator[str]:
    """A role of the test's own (roles belong to the server), dropped at its end with what was
    granted to it."""
    import secrets

    name = "ab_role_" + secrets.token_hex(4)
    db = Database(empty_pg)
    db.write(lambda tx: tx.execute(f"CREATE ROLE {name}"))
    try:
        yield name
    finally:
        db.write(lambda tx: tx.execute(f"DROP OWNED BY {name}"))
        db.write(lambda tx: tx.execute(f"DROP ROLE {name}"))
        db.close()


def _sixth_column(db: Database) -> str:
    """The tasks' sixth column: ``status`` before migration 0033, ``priority`` after."""
    return str(db.read(lambda tx: tx.scalar(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'tasks'::regclass AND attnum = 6")))


@pytest.mark.postgres
def test_the_rebuilt_tables_keep_their_privileges_and_comments(empty_pg: str, scratch_role: str) -> None:
    db = Database(empty_pg)
    migrate.upgrade(db, "0032")

    def grants(tx: Any) -> Any:
        return (tx.all("SELECT table_name, privilege_type FROM information_schema.role_table_grants "
                       "WHERE grantee = :r ORDER BY 1, 2", {"r": scratch_role}),
                tx.all("SELECT obj_description('tasks'::regclass, 'pg_class') AS t, "
                       "col_description('tasks'::regclass, (SELECT attnum FROM pg_attribute "
                       "WHERE attrelid = 'tasks'::regclass AND attname = 'status')) AS c"))

    def setup(tx: Any) -> None:
        tx.execute(f"GRANT SELECT ON tasks, task_runs TO {scratch_role}")
        tx.execute(f"GRANT UPDATE ON tasks TO {scratch_role}")
        tx.execute("COMMENT ON TABLE tasks IS 'the board''s work'")
        tx.execute("COMMENT ON COLUMN tasks.status IS 'see domain/states.py'")

    db.write(setup)
    before = db.read(grants)
    assert len(before[0]) == 3 and before[1] == [{"t": "the board's work", "c": "see domain/states.py"}]
    migrate.upgrade(db)
    assert _sixth_column(db) == "priority"  # rebuilt
    assert db.read(grants) == before
    db.close()


@pytest.mark.postgres
def test_a_view_on_the_tasks_stops_the_rebuild_with_what_to_do_and_changes_nothing(empty_pg: str) -> None:
    db = Database(empty_pg)
    migrate.upgrade(db, "0032")
    tasks.create(db, "default", "kept", assignee="w")
    db.write(lambda tx: tx.execute("CREATE VIEW open_work AS SELECT id, title FROM tasks WHERE status <> 'done'"))
    with pytest.raises(Conflict, match=r"cannot carry view open_work over: drop it, run the upgrade again"):
        migrate.upgrade(db)
    assert migrate.current_revision(db) == "0032" and _sixth_column(db) == "status"
    assert [r["title"] for r in db.read(lambda tx: tx.all("SELECT title FROM open_work"))] == ["kept"]
    db.write(lambda tx: tx.execute("DROP VIEW open_work"))
    migrate.upgrade(db)
    assert migrate.current_revision(db) == migrate.HEAD
    db.close()


@pytest.mark.postgres
def test_a_privilege_on_one_column_stops_the_rebuild_too(empty_pg: str, scratch_role: str) -> None:
    db = Database(empty_pg)
    migrate.upgrade(db, "0032")
    db.write(lambda tx: tx.execute(f"GRANT SELECT (id, title) ON tasks TO {scratch_role}"))
    with pytest.raises(Conflict, match=r"cannot carry the privileges on column id, the privileges on column "
                                         r"title over: drop them"):
        migrate.upgrade(db)
    assert migrate.current_revision(db) == "0032" and _sixth_column(db) == "status"
    db.close()


def _as_first_released(db: Database) -> None:
    """A home migrated to 0035 by releases whose 0031 had no ``ix_tasks_not_before`` and whose
    0035 wrote the completion function without its probes (0034's body)."""
    migrate.upgrade(db, "0035")
    _0034 = importlib.import_module("agentboard.store.migrations.versions.0034_pg_completion_narrow_answer")

    def _w(tx: Any) -> None:
        tx.execute("DROP INDEX ix_tasks_not_before")
        if db.dialect == "postgresql":
            tx.execute(_0034._function().replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    db.write(_w)


def _repaired(db: Database) -> None:
    assert migrate.current_revision(db) == migrate.HEAD
    plan = ("EXPLAIN QUERY PLAN " if db.dialect == "sqlite" else "EXPLAIN ") + (
        "SELECT board, MIN(not_before) FROM tasks WHERE status = 'todo' AND not_before IS NOT NULL GROUP BY board")
    shown = " ".join(str(r) for r in db.read(lambda tx: tx.all(plan)))
    if db.dialect == "sqlite":
        assert "ix_tasks_not_before" in shown, shown
    else:
        assert db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'ix_tasks_not_before'")) == 1
        body = db.read(lambda tx: tx.scalar("SELECT pg_get_functiondef('agentboard_complete_running_json'::regproc)"))
        assert "one probe each first" in body


def test_a_home_migrated_by_the_first_releases_of_0031_and_0035_gets_what_they_gained_since(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'old.db'}")
    _as_first_released(db)
    migrate.upgrade(db)
    _repaired(db)
    db.close()


@pytest.mark.postgres
def test_a_postgres_home_migrated_by_the_first_releases_of_0031_and_0035_gets_what_they_gained_since(
        empty_pg: str) -> None:
    db = Database(empty_pg)
    _as_first_released(db)
    migrate.upgrade(db)
    _repaired(db)
    db.close()


def _stamped_by_the_first_0020(db: Database) -> str:
    """A home the first release of 0020 migrated: its parent was 0016, so 0017–0019 never ran;
    on SQLite it made the task counts (with one task there), on PostgreSQL nothing."""
    migrate.upgrade(db, "0016")
    _0020 = importlib.import_module("agentboard.store.migrations.versions.0020_sqlite_task_counts")

    def _w(tx: Any) -> None:
        tx.execute("INSERT INTO boards (slug, name, created_at) VALUES ('default', 'default', 0) "
                   "ON CONFLICT (slug) DO NOTHING")
        tx.execute("INSERT INTO tasks (id, board, title, status, created_at, updated_at) "
                   "VALUES ('t_00000001', 'default', 'kept', 'todo', 1000, 1000)")
        if db.dialect == "sqlite":
            tx.execute("CREATE TABLE task_counts (board VARCHAR(64) NOT NULL, status VARCHAR(16) NOT NULL, "
                       "n INTEGER NOT NULL, PRIMARY KEY (board, status)) WITHOUT ROWID")
            tx.execute("INSERT INTO task_counts (board, status, n) SELECT board, status, COUNT(*) FROM tasks "
                       "GROUP BY board, status")
            new = _0020._UP.format(b="NEW.board", s="NEW.status")
            tx.execute(f"CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks BEGIN {new} END")
        tx.execute("UPDATE alembic_version SET version_num = '0020'")
    db.write(_w)
    return "t_00000001"


def _upgraded_whole(db: Database, kept: str) -> None:
    migrate.ensure_schema(db)
    assert migrate.current_revision(db) == migrate.HEAD
    t = tasks.create(db, "default", "after the upgrade")
    titles = {r["title"] for r in db.read(lambda tx: tx.all("SELECT title FROM tasks"))}
    assert titles == {"kept", "after the upgrade"} and t["id"] != kept
    for table in ("run_rollups", "attempts", "chat_links"):  # what 0017–0019 make
        assert db.read(lambda tx, table=table: tx.scalar(f"SELECT COUNT(*) FROM {table}")) == 0  # noqa: S608
    if db.dialect == "sqlite":
        assert db.read(lambda tx: tx.scalar("SELECT SUM(n) FROM task_counts")) == 2


def test_a_home_stamped_by_the_first_release_of_0020_gets_0017_to_0019_and_upgrades(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'fleet.db'}")
    _upgraded_whole(db, _stamped_by_the_first_0020(db))
    db.close()


@pytest.mark.postgres
def test_a_postgres_home_stamped_by_the_first_release_of_0020_gets_0017_to_0019_and_upgrades(empty_pg: str) -> None:
    db = Database(empty_pg)
    _upgraded_whole(db, _stamped_by_the_first_0020(db))
    db.close()
