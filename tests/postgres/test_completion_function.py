"""A worker's completion on PostgreSQL runs as one server-side function (migration 0027) where
the kernel's general path would write the same rows with several statements. The same boards,
completed once each way, end up with the same tasks, runs, events, insight rollups and task
counts; where the function cannot do the whole work (a budget, a child without an assignee, a
goal's last task, verify commands) the general path does it. A plain create is one statement
too, and answers and writes what the general path does."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import agentboard
from agentboard.domain.errors import InvalidInput, StaleRun
from agentboard.kernel import hooks, insights, runs
from agentboard.kernel.runs import completion
from agentboard.kernel.tasks import creation

pytestmark = pytest.mark.postgres

#: columns that differ between two runs of one scenario (ids, clocks) or that only say when
_VOLATILE = {"id", "task_id", "run_id", "goal_id", "created_at", "updated_at", "started_at", "completed_at",
             "ended_at", "claim_expires", "claim_lock", "last_heartbeat_at", "current_run_id", "worker_pid",
             "worker_host", "xid", "duration_s", "workspace_path", "log_path", "inbox_seen"}


@pytest.fixture
def two_boards(pg_database: str, pg_copies: Any) -> Iterator[tuple[Any, Any]]:
    """Two fresh databases: one completes through the function, the other through the general path."""
    other = pg_copies.take()
    from testenv import database_url

    a, b = agentboard.connect(pg_database), agentboard.connect(database_url(other))
    try:
        yield a, b
    finally:
        a.close()
        b.close()
        pg_copies.give_back(other)


def _general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hooks, "all_mirrored", lambda *points: False)


def _dump(ab: Any) -> dict[str, Any]:
    """Everything the completions wrote, with ids mapped to task titles and clocks left out: the
    runs pending for the insight rollups, then the rollups once they are folded."""
    pending = ab.db.read(lambda tx: sorted(
        (r["title"], r["attempt"], r["done"]) for r in tx.all(
            "SELECT t.title, r.attempt, g.done FROM run_rollups_pending g JOIN task_runs r ON r.id = g.run_id "
            "JOIN tasks t ON t.id = r.task_id")))
    insights.fold(ab.db)

    def read(tx: Any) -> dict[str, Any]:
        titles = {r["id"]: r["title"] for r in tx.all("SELECT id, title FROM tasks UNION ALL SELECT id, title FROM goals")}

        def clean(row: dict[str, Any]) -> dict[str, Any]:
            out = {}
            for k, v in row.items():
                if k in _VOLATILE:
                    continue
                if isinstance(v, str):
                    for tid, title in titles.items():
                        v = v.replace(tid, title)
                out[k] = v
            return out

        events = [(titles.get(e["task_id"]), clean(e)) for e in tx.all("SELECT * FROM task_events ORDER BY id")]
        # one statement promotes several children: their events come in the order its rows do
        for i in range(len(events)):
            j = i
            while j < len(events) and events[j][1]["kind"] == "promoted":
                j += 1
            events[i:j] = sorted(events[i:j], key=lambda e: str(e[0]))
        rollups: dict[tuple[str, str], dict[str, Any]] = {}
        for row in tx.all("SELECT * FROM run_rollups"):
            key = (row["profile"], row["model"])
            sums = rollups.setdefault(key, {})
            for k, v in row.items():
                if k not in ("board", "day", "profile", "model", "shard", "duration_s") and v:
                    sums[k] = sums.get(k, 0) + v
        counts = {r["status"]: r["n"] for r in tx.all("SELECT status, COUNT(*) AS n FROM tasks GROUP BY status")}
        return {
            "tasks": sorted((clean(r) for r in tx.all("SELECT * FROM tasks")), key=lambda r: r["title"]),
            "runs": sorted(((titles[r["task_id"]], clean(r)) for r in tx.all("SELECT * FROM task_runs")),
                           key=lambda x: (x[0], x[1]["attempt"])),
            "events": events,
            "pending": pending,
            "rollups": rollups,
            "counts": counts,
        }
    return ab.db.read(read)


def _answer(out: dict[str, Any], titles: dict[str, str]) -> dict[str, Any]:
    shown = {k: v for k, v in out.items() if k not in _VOLATILE}
    shown["promoted"] = sorted(titles[c] for c in out.get("promoted", []))
    return shown


def _scenario(ab: Any) -> dict[str, Any]:
    """A board with a plain task, one that requires review, a fan-out/fan-in graph, a goal with
    other open tasks and one whose last task completes, a child without an assignee, a budget
    on a second board and verify commands; every running task completed by its worker."""
    b = ab.board()
    t = {}
    t["plain"] = b.create("plain", assignee="w")["id"]
    t["review"] = b.create("review", assignee="w", review=True)["id"]
    t["root"] = b.create("root", assignee="w")["id"]
    t["left"] = b.create("left", assignee="w", parents=[t["root"]])["id"]
    t["right"] = b.create("right", assignee="x", parents=[t["root"]])["id"]
    t["join"] = b.create("join", assignee="w", parents=[t["left"], t["right"]])["id"]
    goal = b.goal("ship")["id"]
    t["g1"] = b.create("g1", assignee="w", goal=goal)["id"]
    t["g2"] = b.create("g2", assignee="w", goal=goal)["id"]
    t["orphan_parent"] = b.create("orphan_parent", assignee="w")["id"]
    t["orphan"] = b.create("orphan", parents=[t["orphan_parent"]])["id"]
    t["checked"] = b.create("checked", assignee="w", verify=["true"])["id"]
    ab.create_board("spend", name="Spend")
    s = ab.board("spend")
    s.set_budget(max_cost=5.0)
    t["spent"] = s.create("spent", assignee="w")["id"]
    titles = {v: k for k, v in t.items()}
    answers = {}
    types = {}

    def finish(board: Any, name: str, **kw: Any) -> None:
        run = board.claim(t[name])["run_id"]
        out = board.complete(t[name], run_id=run, summary=f"{name} done", result=f"{name}: ok",
                             metadata={"files": [name]}, **kw)
        answers[name] = _answer(out, titles)
        types[name] = {k: type(v).__name__ for k, v in out.items()}

    for name in ("plain", "review", "root", "left", "right", "join", "g1", "g2", "orphan_parent", "checked"):
        finish(b, name, usage={"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.01})
    finish(s, "spent", usage={"cost_usd": 1.5})
    return {"answers": answers, "types": types, "written": _dump(ab), "goal": b.goals()[0]["status"],
            "spent": s.budgets()[0]["spent"]}


def test_the_function_and_the_general_path_write_the_same_rows(two_boards: tuple[Any, Any],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    fast_ab, general_ab = two_boards
    fast = _scenario(fast_ab)
    _general_path(monkeypatch)
    general = _scenario(general_ab)
    assert fast["answers"] == general["answers"]
    # the function's answer (one JSON object) decodes every column to what the general path's does
    assert fast["types"] == general["types"]
    assert fast["written"]["tasks"] == general["written"]["tasks"]
    assert fast["written"]["runs"] == general["written"]["runs"]
    diff = [(f, g) for f, g in zip(fast["written"]["events"], general["written"]["events"], strict=False) if f != g]
    assert not diff and len(fast["written"]["events"]) == len(general["written"]["events"]), diff
    assert fast["written"]["rollups"] == general["written"]["rollups"]
    assert fast["written"]["counts"] == general["written"]["counts"]
    assert fast["goal"] == general["goal"] == "verifying"
    fast["spent"].pop("runtime"), general["spent"].pop("runtime")  # (a clock)
    assert fast["spent"] == general["spent"] and fast["spent"]["cost"] == 1.5
    # what a user sees: the graph ran through, the child without an assignee waits for one
    assert fast["answers"]["root"]["promoted"] == ["left", "right"]
    assert fast["answers"]["right"]["promoted"] == ["join"] and fast["answers"]["left"]["promoted"] == []
    assert fast["answers"]["review"]["status"] == "review"
    assert fast["answers"]["checked"]["pending_verification"] is True


def test_a_plain_completion_runs_the_function_and_a_budgeted_board_s_take_the_general_path(pg_url: str) -> None:
    ab = agentboard.connect(pg_url)
    try:
        b = ab.board()
        t = b.create("plain", assignee="w")["id"]
        run = b.claim(t)["run_id"]
        out = b.complete(t, run_id=run, summary="done")
        assert out["status"] == "done" and out["run_id"] == run and out["promoted"] == []
        assert isinstance(out["created_at"], float) and out["review_required"] is False
        assert "run__board" not in out
        b.set_budget(max_cost=1.0)
        t2 = b.create("budgeted", assignee="w")["id"]
        run2 = b.claim(t2)["run_id"]
        b.complete(t2, run_id=run2, usage={"cost_usd": 0.25})
        assert b.budgets()[0]["spent"]["cost"] == 0.25
        # the function declined (a budget may count the run) and rolled back what it wrote: the
        # board's next completions go straight to the general path, and each is counted once
        assert completion._budgeted_now(ab.db, b.slug)
        t3 = b.create("budgeted too", assignee="w")["id"]
        b.complete(t3, run_id=b.claim(t3)["run_id"], usage={"cost_usd": 0.5})
        assert b.budgets()[0]["spent"]["cost"] == 0.75
        assert ab.db.read(lambda tx: tx.scalar(
            "SELECT COUNT(*) FROM task_events WHERE kind = 'completed' AND task_id IN (:a, :b)",
            {"a": t2, "b": t3})) == 2
        assert ab.db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM run_rollups_pending WHERE run_id = :r",
                                               {"r": run2})) <= 1
    finally:
        ab.close()


#: the function of each version: this one's (0034) and the previous version's (0030, 0032), which
#: its processes still call during a rolling upgrade
_FUNCTIONS = {"agentboard_complete_running_json": "f.task", "agentboard_complete_running_row": "(f.task).id"}


@pytest.mark.parametrize("function", sorted(_FUNCTIONS))
def test_the_function_declines_a_budgeted_run_as_the_previous_version_expects_and_writes_nothing(
        pg_url: str, function: str) -> None:
    """Where a budget may count the run, the function's swap writes first and its checks roll
    everything back with SQLSTATE ABC01 (the previous version's processes, still running during a
    rolling upgrade, take the general path on that one only) and the detail ``budget``."""
    import psycopg

    ab = agentboard.connect(pg_url)
    try:
        b = ab.board()
        b.set_budget(max_cost=1.0)
        t = b.create("budgeted", assignee="w")["id"]
        run = b.claim(t)["run_id"]
        insights.fold(ab.db)
        before = _dump(ab)
        with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
            with pytest.raises(psycopg.Error) as raised:
                conn.execute(
                    f"SELECT {_FUNCTIONS[function]} FROM {function}(%s, 'default', %s, 1.0, 0, NULL, 1, 0, 0, "
                    "'done', NULL, NULL, NULL, NULL, NULL, NULL, '{}', '{}') f", (t, run))
        assert raised.value.sqlstate == "ABC01" and raised.value.diag.message_detail == "budget"
        assert _dump(ab) == before and b.show(t)["status"] == "running"
    finally:
        ab.close()


def test_a_stale_report_is_refused_with_the_same_error_and_nothing_written(pg_url: str) -> None:
    ab = agentboard.connect(pg_url)
    try:
        b = ab.board()
        t = b.create("x", assignee="w")["id"]
        first = b.claim(t)["run_id"]
        b.reclaim(t)
        b.claim(t)
        insights.fold(ab.db)
        before = _dump(ab)
        with pytest.raises(StaleRun):
            b.complete(t, run_id=first, summary="late")
        assert _dump(ab) == before
    finally:
        ab.close()


def test_a_completion_keeps_every_lock_it_takes_on_its_backend_s_fast_path(pg_url: str) -> None:
    """A backend holds 16 relation locks without the server's shared lock table, whose
    partitions every backend takes; a completion that holds more at once (the indexes of all the
    tables it writes) sends the rest there, and completions on all hosts contend for them. The
    function's locks, read in its own transaction before it commits, all stay on the fast path."""
    import psycopg

    ab = agentboard.connect(pg_url)
    try:
        b = ab.board()
        ids = [b.create(f"t{i}", assignee="w")["id"] for i in range(8)]
        claimed = [(t, b.claim(t)["run_id"]) for t in ids]
        call = ("SELECT f.task FROM agentboard_complete_running_json(%s, 'default', %s, 1.0, 0, NULL, 1, 0, 0, "
                "'done', NULL, NULL, NULL, NULL, NULL, NULL, '{}', '{}') f")
        with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
            # a session plans each of the function's statements anew five times, then keeps one plan
            # (planning locks every index of a table it reads): what follows is every completion's
            for t, run in claimed[:7]:
                assert conn.execute(call, (t, run)).fetchone()[0] is not None
            conn.execute("BEGIN")
            assert conn.execute(call, claimed[7]).fetchone()[0] is not None
            locks = conn.execute(
                "SELECT relation::regclass::text, fastpath FROM pg_locks WHERE pid = pg_backend_pid() "
                "AND locktype = 'relation' AND relation <> 'pg_locks'::regclass").fetchall()
            conn.execute("ROLLBACK")
        assert {"tasks", "task_runs", "task_events", "task_count_deltas"} <= {name for name, _ in locks}
        assert [name for name, fast in locks if not fast] == []
        assert b.show(ids[7])["status"] == "running"
    finally:
        ab.close()


def _in_threads(n: int, fn: Callable[[int], None]) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def work(i: int) -> None:
        try:
            barrier.wait()
            fn(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_parents_completing_at_once_promote_their_child_once(pg_url: str) -> None:
    ab = agentboard.connect(pg_url, pg_pool_size=8)
    try:
        b = ab.board()
        for round_ in range(5):
            parents = [b.create(f"p{round_}.{i}", assignee="w")["id"] for i in range(4)]
            child = b.create(f"c{round_}", assignee="w", parents=parents)["id"]
            claims = [b.claim(p)["run_id"] for p in parents]
            _in_threads(4, lambda i, ps=parents, cs=claims: runs.complete(ab.db, "default", ps[i], run_id=cs[i],
                                                                          summary="ok"))
            assert b.show(child)["status"] == "ready"
            promoted = [e for e in b.events(task_id=child) if e["kind"] == "promoted"]
            assert len(promoted) == 1, promoted
            payload = promoted[0]["payload"]
            assert (json.loads(payload) if isinstance(payload, str) else payload)["by"] in parents
    finally:
        ab.close()


def _plain_creates(ab: Any) -> list[dict[str, Any]]:
    b = ab.board()
    ab.add_profile("w", command="true")
    out = [b.create("known", assignee="w", body="b", priority=3, skills=["py"], verify=["true"], review=True,
                    max_runtime=60, max_retries=2, tenant="acme", model="m1"),
           b.create("unknown", assignee="nobody")]
    return [{k: v for k, v in o.items() if k not in _VOLATILE} for o in out]


def test_a_plain_create_answers_and_writes_what_the_general_path_does(two_boards: tuple[Any, Any],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    fast_ab, general_ab = two_boards
    fast = _plain_creates(fast_ab)
    monkeypatch.setattr(creation, "_plain", lambda db, new: False)
    general = _plain_creates(general_ab)
    assert fast == general
    assert "warnings" in fast[1] and "warnings" not in fast[0]
    f, g = _dump(fast_ab), _dump(general_ab)
    assert (f["tasks"], f["events"], f["counts"]) == (g["tasks"], g["events"], g["counts"])


def test_a_plain_create_on_an_archived_board_is_refused_and_writes_nothing(pg_url: str) -> None:
    ab = agentboard.connect(pg_url)
    try:
        ab.create_board("old", name="Old")
        ab.board("old").create("first", assignee="w")
        ab.db.write(lambda tx: tx.execute("UPDATE boards SET archived = 1 WHERE slug = 'old'"))
        before = _dump(ab)
        with pytest.raises(InvalidInput, match="archived"):
            ab.board("old").create("second", assignee="w")
        assert _dump(ab) == before
    finally:
        ab.close()


def test_the_one_statement_verbs_are_traced_under_their_kernel_names(pg_url: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentboard import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "tracer", provider.get_tracer("test"))
    tracing._trace_transactions()
    ab = agentboard.connect(pg_url)
    try:
        b = ab.board()
        t = b.create("traced", assignee="w")["id"]
        run = b.claim_next()[0]["run_id"]
        b.complete(t, run_id=run, summary="done")
    finally:
        ab.close()
    names = [s.name for s in exporter.get_finished_spans()]
    assert {"kernel.tasks.create", "kernel.runs.claim_next", "kernel.runs.complete"} <= set(names), names


def test_the_times_the_function_answers_as_json_are_the_tasks_double_precision_columns() -> None:
    import sqlalchemy as sa

    from agentboard.store import schema

    doubles = {c.name for c in schema.tasks.c if isinstance(c.type, sa.Double)}
    assert completion.TASK_FLOATS == doubles
    # a whole number of seconds comes back a float, as the column's own decoding gives it
    task = completion._task_of_json('{"id": "t_1", "created_at": 1700000000, "priority": 3, "completed_at": null}')
    assert task == {"id": "t_1", "created_at": 1700000000.0, "priority": 3, "completed_at": None}
    assert type(task["created_at"]) is float and type(task["priority"]) is int


def _stale_fan_out(ab: Any, pg_url: str, n: int) -> tuple[str, list[str]]:
    """A parent of ``n`` waiting children, all created after the planner's statistics were taken
    on an empty board (a fan-out made and released at once: nothing has analyzed it yet)."""
    import psycopg

    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        for table in ("tasks", "task_links", "task_events"):  # only the code under test plans on them
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        conn.execute("VACUUM ANALYZE")
    b = ab.board()
    parent = b.create("gate", assignee="w")["id"]
    return parent, [b.create(f"c{i}", assignee="w", parents=[parent])["id"] for i in range(n)]


def test_a_completion_that_unblocks_many_children_reads_the_board_once_whatever_its_statistics_say(
        pg_url: str) -> None:
    """On statistics that know no waiting task and no link (a fan-out created and released at
    once, before anything analyzed it), the joins that find a parent's children scan a whole
    table once per child: a completion that releases a fan-out of a thousand then takes a time
    that grows with the board times its children. Both paths — the function a worker's
    completion runs and the general path a person's close takes — read the children by key: a
    few reads of each table at most (one per statement), where a scan per child read them 200
    times."""
    import psycopg

    ab = agentboard.connect(pg_url)
    try:
        parent, children = _stale_fan_out(ab, pg_url, 200)
        run = ab.board().claim(parent)["run_id"]
        call = ("SELECT f.task, f.promoted FROM agentboard_complete_running_json(%s, 'default', %s, 1.0, 0, NULL, "
                "1, 0, 0, 'done', NULL, NULL, NULL, NULL, NULL, NULL, '{}', '{}') f")
        # rows read by scans of the tasks and of the links, in this session
        read = ("SELECT pg_stat_get_xact_tuples_returned('tasks'::regclass) "
                "+ pg_stat_get_xact_tuples_returned('task_links'::regclass)")
        with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
            before = conn.execute(read).fetchone()[0]  # (a session's counts since it last reported them)
            task, promoted = conn.execute(call, (parent, run)).fetchone()
            seen = conn.execute(read).fetchone()[0] - before
            conn.rollback()
        assert task is not None and sorted(promoted) == sorted(children)
        rows = 2 * len(children) + 1  # (the tasks, and the links)
        assert seen <= 20 * rows, f"the function read {seen} rows of tables of {rows}"

        def by_hand(tx: Any) -> tuple[Any, int]:
            before = int(tx.scalar(read))
            done = completion.complete_in(tx, "default", parent, completion.Report.build(summary="closed"),
                                          force_done=True)
            return done, int(tx.scalar(read)) - before

        done, seen = ab.db.write(by_hand)
        assert sorted(done["promoted"]) == sorted(children)
        assert seen <= 20 * rows, f"the general path read {seen} rows of tables of {rows}"
    finally:
        ab.close()
