"""A dispatcher pass reads its own host's running tasks and other hosts' lapsed claims, never
every running task of the fleet; the caps still count every host's."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from agentboard.kernel import boards, profiles, races, runs, schedules, tasks
from agentboard.kernel import dispatching as kd


def _claimed(ab: Any, claims: tuple[tuple[str, str, int], ...]) -> dict[str, str]:
    """A running task per ``(name, host, claim ttl)``: the task ids by name."""
    ab.add_profile("w", command="true")
    made = {}
    for name, host, ttl in claims:
        t = tasks.create(ab.db, "default", name, assignee="w")
        runs.claim(ab.db, "default", t["id"], ttl=ttl, host=host, pid=12345)
        made[name] = t["id"]
    return made


def test_a_pass_reads_its_own_running_tasks_and_only_the_lapsed_claims_of_other_hosts(ab: Any) -> None:
    db = ab.db
    made = _claimed(ab, (("mine", "host-a", 600), ("theirs", "host-b", 600), ("lapsed", "host-b", 1)))
    time.sleep(1.1)  # (lets the 1 s claim lapse; not a timing assertion)
    snap = kd.pass_snapshot(db, host="host-a")
    assert sorted(r["id"] for r in snap.running) == sorted([made["mine"], made["lapsed"]])
    assert snap.load == []  # no cap anywhere: no other host's running task is counted either
    every = kd.pass_snapshot(db)  # without a host: every running task, as before
    assert sorted(r["id"] for r in every.running) == sorted(made.values())


@pytest.mark.parametrize("cap", ["profile", "board", "folder"])
def test_a_cap_anywhere_has_every_hosts_running_tasks_counted_for_it(ab: Any, cap: str, tmp_path: Path) -> None:
    db = ab.db
    _claimed(ab, (("mine", "host-a", 600), ("theirs", "host-b", 600), ("more", "host-c", 600)))
    if cap == "profile":
        profiles.update(db, "w", max_concurrency=5)
    elif cap == "board":
        boards.update(db, "default", settings={"max_parallel": 4})
    else:  # another board's shared folder (one writer at a time there unless it is a git repository)
        ab.create_board("shared", workdir=str(tmp_path))
    load = kd.pass_snapshot(db, host="host-a").load
    assert sum(int(r["n"]) for r in load if r["board"] == "default" and r["assignee"] == "w") == 3


def test_a_pass_knows_when_the_next_claim_of_another_host_lapses(ab: Any) -> None:
    """So a host looks again as a dead host's claim lapses, not a dispatch interval later."""
    db = ab.db
    ids = _claimed(ab, (("mine", "host-a", 30), ("soon", "host-b", 300), ("later", "host-c", 900)))
    expires = {r["id"]: r["claim_expires"] for r in kd.pass_snapshot(db).running}
    expiry = {name: expires[i] for name, i in ids.items()}
    assert kd.pass_snapshot(db, host="host-a").next_lapse == expiry["soon"]  # its own claim is renewed, not awaited
    assert kd.pass_snapshot(db, host="host-b").next_lapse == expiry["mine"]
    assert kd.pass_snapshot(db).next_lapse is None  # without a host every running task is read anyway


def _entries_read(db: Any, sql: str, params: dict[str, Any]) -> int:
    """How much of the running tasks' index ``sql`` reads: on PostgreSQL the rows its index scans
    returned (``EXPLAIN ANALYZE``), on SQLite the virtual machine's steps."""
    if db.dialect == "sqlite":
        steps = [0]

        def count() -> int:
            steps[0] += 1
            return 0
        with db._raw() as conn:
            conn.set_progress_handler(count, 1)
            try:
                conn.execute(sql, params).fetchall()
            finally:
                conn.set_progress_handler(None, 1)
        return steps[0]

    def _plan(tx: Any) -> list[str]:
        return [str(next(iter(r.values()))) for r in tx.all("EXPLAIN ANALYZE " + sql, params)]
    read = 0
    for line in db.read(_plan):
        m = re.search(r"Index (?:Only )?Scan using ix_tasks_running .*actual time=\S+ rows=(\d+) loops=(\d+)", line)
        if m:
            read += int(m[1]) * int(m[2])
    return read


def test_the_next_lapse_of_another_hosts_claim_is_found_per_host_not_by_reading_every_running_task(
        ab: Any) -> None:
    """Every pass of every host asks when another host's claim lapses next: its cost follows the
    number of hosts, not the number of their workers."""
    db = ab.db
    ab.add_profile("w", command="true")
    read = []
    for per_host in (10, 100):
        ids = [tasks.create(db, "default", f"t{i}", assignee="w")["id"] for i in range(3 * per_host)]
        for h in range(3):
            kd.claim_batch(db, "default", ids[h * per_host:(h + 1) * per_host], ttl=600 + h, host=f"host-{h}")
        if db.dialect == "postgresql":
            db.write(lambda tx: tx.execute("ANALYZE tasks"))
        now = time.time()
        read.append(_entries_read(db, kd.NEXT_LAPSE_SQL, {"h": "host-0", "now": now}))
        expected = min(r["claim_expires"] for r in kd.pass_snapshot(db).running if r["worker_host"] != "host-0")
        assert kd.pass_snapshot(db, host="host-0").next_lapse == expected
        db.write(lambda tx: tx.execute("UPDATE tasks SET status = 'done', current_run_id = NULL "
                                       "WHERE status = 'running'"))
    assert read[1] < read[0] * 2, read  # ten times the workers: about the same reads


def test_a_host_renews_its_claims_in_one_statement_that_wakes_no_dispatcher(ab: Any) -> None:
    db = ab.db
    ab.add_profile("w", command="true")
    claimed = []
    for i in range(3):
        t = tasks.create(db, "default", f"t{i}", assignee="w")
        claimed.append(("default", t["id"], runs.claim(db, "default", t["id"], ttl=60, host="host-a")["run_id"]))
    stale = claimed[2]
    runs.fail(db, "default", stale[1], "crashed", run_id=stale[2], error="gone")  # no longer its run
    woken: list[set[str]] = []
    db.add_listener(woken.append)
    try:
        before = {r["id"]: r["claim_expires"] for r in kd.pass_snapshot(db).running}
        renewed = kd.extend_claims(db, claimed, ttl=600)
    finally:
        db.remove_listener(woken.append)
    assert renewed == {claimed[0][2], claimed[1][2]}
    after = {r["id"]: r["claim_expires"] for r in kd.pass_snapshot(db).running}
    assert all(after[t] > before[t] + 300 for _, t, _ in claimed[:2])
    assert woken == []
    kinds = [e["kind"] for e in ab.board().events(0, limit=1000) if e["kind"] == "claim_extended"]
    assert len(kinds) == 2


def test_a_glance_sees_ready_work_a_lapsed_claim_and_any_change_to_this_hosts_running_tasks(ab: Any) -> None:
    from agentboard.kernel import comments

    db = ab.db
    ab.add_profile("w", command="true")
    empty = kd.glance(db, "host-a")
    assert (empty.ready, empty.lapsed, empty.mine) == (False, False, (0, 0, 0))
    t = tasks.create(db, "default", "mine", assignee="w")
    assert kd.glance(db, "host-a").ready
    run = runs.claim(db, "default", t["id"], ttl=600, host="host-a", pid=12345)["run_id"]
    a = kd.glance(db, "host-a")
    assert (a.ready, a.lapsed, a.mine) == (False, False, (1, run, 0))
    assert kd.glance(db, "host-b").mine == (0, 0, 0)  # another host's task is not its own
    comments.comment(db, "default", t["id"], "a question", author="alice")
    assert kd.glance(db, "host-a").mine == (1, run, 1)
    other = tasks.create(db, "default", "theirs", assignee="w")
    runs.claim(db, "default", other["id"], ttl=1, host="host-b", pid=12346)
    assert kd.glance(db, "host-a").mine == (1, run, 1)  # another host's claim changes nothing here
    time.sleep(1.1)  # (lets the 1 s claim lapse; not a timing assertion)
    assert kd.glance(db, "host-a").lapsed


def test_a_glance_sees_a_task_enter_review_or_triage_or_a_race_leave_running(ab: Any) -> None:
    """The work a pass does with no worker of its own (a reviewer to start, a triage task to
    decompose, a race archived) is never left to the interval by a skipped wake-up."""
    db = ab.db
    ab.add_profile("w", command="true")
    before = kd.glance(db, "host-a").waiting
    t = tasks.create(db, "default", "to sort out", triage=True)
    in_triage = kd.glance(db, "host-a").waiting
    assert in_triage != before and in_triage[0] == before[0] + 1
    tasks.archive(db, "default", t["id"])
    assert kd.glance(db, "host-a").waiting[0] == before[0]



def test_a_glance_reads_the_ready_running_and_waiting_tasks_through_indexes_never_the_whole_table(ab: Any) -> None:
    """A dispatcher glances at every wake-up (several a second per host in a burst): on a board
    with a long history, reading all of ``tasks`` each time would grow with every task ever done."""
    db = ab.db
    ab.add_profile("w", command="true")
    for i in range(40):
        t = tasks.create(db, "default", f"old {i}", assignee="w")
        runs.complete(db, "default", t["id"], summary="ok", run_id=runs.claim(db, "default", t["id"])["run_id"])
    tasks.create(db, "default", "ready one", assignee="w")
    if db.dialect == "postgresql":  # statistics as a dispatcher keeps them (not whatever autovacuum last saw)
        db.write(lambda tx: tx.execute("ANALYZE tasks"))
    params = {"h": "host-a", "now": time.time()}
    for unrecorded in (False, True):
        sql = kd.glance_sql(unrecorded=unrecorded)
        if db.dialect == "sqlite":
            with db._raw() as conn:
                plan = [str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()]
            whole = [p for p in plan if p.startswith("SCAN tasks") and "INDEX" not in p]
        else:
            def _plan(tx: Any, sql: str = sql) -> list[str]:
                tx.execute("SET enable_seqscan = off")  # a scan left in the plan has no index to use
                try:
                    return [str(next(iter(r.values()))) for r in tx.all("EXPLAIN " + sql, params)]
                finally:
                    tx.execute("RESET enable_seqscan")
            plan = db.read(_plan)
            # each read of tasks: one of the partial indexes (ready, running, waiting tasks only),
            # or a look-up by key (a comment's task); not a scan of the table or a whole index
            partial = ("ix_tasks_board_assignee", "ix_tasks_running", "ix_tasks_waiting")
            whole = []
            for i, line in enumerate(plan):
                m = re.search(r"(?:using|Bitmap Index Scan on) (\w+)", line)
                if "Seq Scan on tasks" in line or (
                        m and m[1].startswith(("tasks_", "ix_tasks_")) and m[1] not in partial
                        and not (m[1] == "tasks_pkey" and "Index Cond" in plan[i + 1])):
                    whole.append(line)
        assert not whole, plan
    assert kd.glance(db, "host-a").ready


def test_a_pass_snapshot_finds_cooldowns_timed_blocks_races_and_the_load_through_their_own_indexes(
        ab: Any) -> None:
    """Every pass reads when the next cooldown and the next timed block end, which races are
    under way and how many tasks run per assignee. On a board with a long history or a long
    queue, reading every ready task or the whole table for them made each pass grow with the
    board (14 ms at 100,000 done tasks, 42 ms at 100,000 ready ones, on PostgreSQL; the count
    10 ms on SQLite): each reads a partial index holding only its own tasks."""
    db = ab.db
    ab.add_profile("w", command="true")
    for i in range(40):
        t = tasks.create(db, "default", f"old {i}", assignee="w")
        runs.complete(db, "default", t["id"], summary="ok", run_id=runs.claim(db, "default", t["id"])["run_id"])
    for i in range(40):
        tasks.create(db, "default", f"queued {i}", assignee="w")
    if db.dialect == "postgresql":  # statistics as a dispatcher keeps them: on none (or autovacuum's
        # of a moment ago), the empty cooldown index and the ready queue's index look the same size
        db.write(lambda tx: tx.execute("ANALYZE tasks"))
    own = {kd.COOLDOWNS_SQL: "ix_tasks_cooldown", kd.TIMED_BLOCKS_SQL: "ix_tasks_timed_block",
           races.UNDER_WAY_SQL: "ix_tasks_ready_race", kd.load_sql(db.dialect): "ix_tasks_running",
           schedules.NEXT_DUE_SQL: "ix_tasks_not_before"}
    for sql, index in own.items():
        if db.dialect == "sqlite":
            with db._raw() as conn:
                plan = [str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, {"now": time.time(), **kd.CAPPED_PARAMS}).fetchall()]
            reads = [p for p in plan if re.match(r"(SCAN|SEARCH) (tasks|t)\b", p)]
        else:
            def _plan(tx: Any, sql: str = sql) -> list[str]:
                tx.execute("SET enable_seqscan = off")  # a scan left in the plan has no index to use
                try:
                    return [str(next(iter(r.values()))) for r in tx.all("EXPLAIN " + sql, {"now": time.time(), **kd.CAPPED_PARAMS})]
                finally:
                    tx.execute("RESET enable_seqscan")
            plan = db.read(_plan)
            # a bitmap scan names its index on the line below its heap scan
            reads = [p for p in plan if (" on tasks" in p and "Bitmap Heap Scan" not in p)
                     or "Bitmap Index Scan on " in p]
        assert reads and all(index in p for p in reads), plan
    # and they answer: a cooldown ahead, a timed block, a race of two attempts
    now = time.time()
    cooling, blocked = (tasks.create(db, "default", n, assignee="w")["id"] for n in ("cooling", "limited"))
    db.write(lambda tx: tx.execute("UPDATE tasks SET cooldown_until = :u WHERE id = :id", {"u": now + 600, "id": cooling}))
    tasks.block(db, "default", blocked, "rate limited", kind="rate_limited", until=now + 900)
    race = tasks.create(db, "default", "raced", race=["w", "w"])["id"]
    waiting = tasks.create(db, "default", "later", assignee="w", not_before=now + 1200)
    assert waiting["status"] == "todo"
    snap = kd.pass_snapshot(db, now=now, host="host-a")
    assert snap.timers_at == pytest.approx(now + 1200)
    assert snap.cooldowns == {"default": pytest.approx(now + 600)}
    assert snap.timed_blocks == {"default": pytest.approx(now + 900)}
    assert race in snap.races.get("default", [])


def test_a_pass_learns_from_its_snapshot_when_the_schedules_races_and_supervisors_have_work(ab: Any) -> None:
    """So a pass with none of them reads nothing more for them: its snapshot and the ready queue."""
    from agentboard.kernel import schedules

    ab.add_profile("w", command="true")
    board = ab.board()
    now = time.time()
    snap = kd.pass_snapshot(ab.db, now, host="host-a")
    assert (snap.timers_at, snap.races, snap.supervision) == (None, {}, {})
    (ab.settings.home / "templates").mkdir(parents=True, exist_ok=True)
    (ab.settings.home / "templates" / "t.toml").write_text('[[task]]\ntitle = "nightly"\nassignee = "w"\n')
    sched = schedules.add(ab.db, "default", "0 3 * * *", template="t", home=ab.settings.home, now=now)
    assert kd.pass_snapshot(ab.db, now, host="host-a").timers_at == sched["next_at"]
    waiting = board.create("later", assignee="w", not_before=now + 60)
    assert waiting["status"] == "todo"
    assert kd.pass_snapshot(ab.db, now, host="host-a").timers_at == pytest.approx(now + 60)
    race = board.create("two ways", race=["w", "w"])["id"]
    assert kd.pass_snapshot(ab.db, now, host="host-a").races == {"default": [race]}
