"""Lifecycle behaviour: stale runs, idempotency, promotion, reopen, synthesized runs, mentions, goals,
the circuit breaker."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kernelkit import check_invariants, reach, snapshot, status_of

import agentboard
from agentboard.config import Settings
from agentboard.domain.errors import Conflict, StaleRun
from agentboard.kernel import boards, goals, links, runs, supervision, tasks
from agentboard.store import open_database

B = "default"


def _run(board: Any, task_id: str) -> int:
    return int(board.claim(task_id)["run_id"])


# -- stale runs ---------------------------------------------------------------------------------


def test_after_a_reclaim_the_old_run_can_no_longer_report(board: Any) -> None:
    t = board.create("slow job", assignee="w")["id"]
    old = _run(board, t)
    board.reclaim(t, reason="worker hung")
    before = snapshot(board.db, t)
    with pytest.raises(StaleRun):
        board.complete(t, summary="late", run_id=old)
    with pytest.raises(StaleRun):
        board.block(t, "late block", run_id=old)
    with pytest.raises(StaleRun):
        board.heartbeat(t, run_id=old)
    assert snapshot(board.db, t) == before
    new = _run(board, t)
    with pytest.raises(StaleRun):
        board.complete(t, summary="still late", run_id=old)
    done = board.complete(t, summary="second attempt", run_id=new)
    assert done["status"] == "done"
    runs_ = board.show(t)["runs"]
    assert [(r["id"], r["outcome"]) for r in runs_] == [(old, "reclaimed"), (new, "completed")]


def test_after_the_breaker_trips_the_last_run_is_stale(board: Any) -> None:
    t = board.create("flaky", assignee="w")["id"]
    first = _run(board, t)
    board.fail(t, "crashed", run_id=first, error="segfault")
    second = _run(board, t)
    out = board.fail(t, "crashed", run_id=second, error="segfault again")
    assert out["status"] == "blocked" and out["block_kind"] == "gave_up"
    with pytest.raises(StaleRun):
        board.complete(t, summary="too late", run_id=second)
    with pytest.raises(StaleRun):
        board.heartbeat(t, run_id=second)
    assert status_of(board.db, t) == "blocked"


# -- idempotency keys -------------------------------------------------------------------------------


def test_idempotency_key_returns_the_existing_task_until_it_is_archived(board: Any) -> None:
    a = board.create("nightly report", assignee="w", idempotency_key="report-2026-11-30")
    again = board.create("nightly report (retry)", assignee="w", idempotency_key="report-2026-11-30")
    assert again["id"] == a["id"] and again.get("existing") is True
    assert again["title"] == "nightly report"
    board.archive(a["id"])
    fresh = board.create("nightly report", assignee="w", idempotency_key="report-2026-11-30")
    assert fresh["id"] != a["id"]
    with pytest.raises(Conflict, match="idempotency key"):
        board.restore(a["id"])
    assert status_of(board.db, a["id"]) == "archived"


def test_racing_creators_with_one_key_get_one_task(ab: Any) -> None:
    barrier = threading.Barrier(8)
    got: list[str] = []
    errors: list[BaseException] = []

    def creator(i: int) -> None:
        barrier.wait()
        try:
            got.append(tasks.create(ab.db, B, f"deploy {i}", assignee="w", idempotency_key="deploy-42")["id"])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=creator, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert len(got) == 8 and len(set(got)) == 1
    assert len(ab.board().list(search="deploy")) == 1


_OTHER_CREATOR = (
    "INSERT INTO tasks (id, board, title, status, created_at, updated_at, idempotency_key) "
    "VALUES ('t_00000000', NEW.board, 'the other creator', 'todo', 0, 0, NEW.idempotency_key)"
)


def _race_on_first_insert(ab: Any, key: str) -> Callable[[], int]:
    """Make the first insert of a task with ``key`` collide with another creator's row inside the
    same statement (as when two creators race past the idempotency check). Returns a function
    telling how many inserts with that key the race hook saw."""
    if ab.db.dialect == "sqlite":
        seen: list[int] = []

        def first_time() -> int:
            seen.append(1)
            return 1 if len(seen) == 1 else 0

        def install(tx: Any) -> None:
            tx.conn.create_function("race_first_time", 0, first_time)
            tx.execute(
                f"CREATE TEMP TRIGGER race BEFORE INSERT ON tasks WHEN NEW.idempotency_key = '{key}' "
                f"AND race_first_time() BEGIN {_OTHER_CREATOR}; END"
            )

        ab.db.write(install)
        return lambda: len(seen)

    def install_pg(tx: Any) -> None:
        tx.execute("CREATE SEQUENCE race_seq")
        tx.execute(
            "CREATE FUNCTION race() RETURNS trigger AS $$ BEGIN "
            f"IF NEW.idempotency_key = '{key}' AND nextval('race_seq') = 1 THEN {_OTHER_CREATOR}; END IF; "
            "RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        tx.execute("CREATE TRIGGER race BEFORE INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION race()")

    ab.db.write(install_pg)
    # nextval is not rolled back: one call per insert the hook saw (the other creator's own
    # insert included, which the trigger sees too)
    return lambda: int(ab.db.read(lambda tx: tx.scalar("SELECT last_value FROM race_seq"))) - 1


def test_a_create_retried_after_an_idempotency_race_keeps_every_field(ab: Any) -> None:
    board = ab.board()
    fields: dict[str, Any] = dict(assignee="w", tenant="", max_retries=3, verify=["pytest -q", "  "],
                                  review=True, priority=4)
    plain = board.create("report", idempotency_key="plain", skills=iter(["python", "sql"]), **fields)
    inserts = _race_on_first_insert(ab, "raced")

    raced = board.create("report", idempotency_key="raced", skills=iter(["python", "sql"]), **fields)

    assert inserts() == 2, "the first insert collided and the create ran a second time"
    keep = ("title", "assignee", "status", "tenant", "skills", "max_retries", "verify", "review_required",
            "priority", "workspace_kind")
    assert {k: raced[k] for k in keep} == {k: plain[k] for k in keep}
    assert (raced["skills"], raced["tenant"], raced["max_retries"]) == (["python", "sql"], None, 3)
    stored = board.show(raced["id"])
    assert {k: stored[k] for k in keep} == {k: board.show(plain["id"])[k] for k in keep}


# -- promotion ----------------------------------------------------------------------------------


def test_chain_of_ten_completes_in_order(board: Any) -> None:
    ids = [board.create(f"step {i}", assignee="w")["id"] for i in range(10)]
    for p, c in zip(ids, ids[1:], strict=False):
        board.link(p, c)
    for i, t in enumerate(ids):
        ready = [r["id"] for r in board.list(status="ready")]
        assert ready == [t], f"before step {i} only it is ready"
        out = board.complete(t, summary=f"step {i} done", run_id=_run(board, t))
        assert out["promoted"] == ids[i + 1:i + 2]
    assert {r["status"] for r in board.list()} == {"done"}


def test_fan_in_child_waits_for_every_parent_and_archived_counts(board: Any) -> None:
    parents = [board.create(f"part {i}", assignee="w")["id"] for i in range(3)]
    child = board.create("assemble", assignee="w", parents=parents)["id"]
    assert status_of(board.db, child) == "todo"
    board.complete(parents[0], summary="a")
    assert status_of(board.db, child) == "todo"
    board.archive(parents[1])
    assert status_of(board.db, child) == "todo"
    board.complete(parents[2], summary="c", run_id=_run(board, parents[2]))
    assert status_of(board.db, child) == "ready"
    promoted = [e for e in board.events(0, task_id=child) if e["kind"] == "promoted"]
    assert len(promoted) == 1 and promoted[0]["payload"]["by"] == parents[2]


def test_a_parent_done_promotes_its_assigned_children_and_the_unassigned_ones_only_with_a_fallback(
        ab: Any, board: Any) -> None:
    parent = board.create("parent", assignee="w")["id"]
    assigned = sorted(board.create(f"kid {i}", assignee="w", parents=[parent])["id"] for i in range(40))
    lone = board.create("nobody's", parents=[parent])["id"]
    out = board.complete(parent, summary="done", run_id=_run(board, parent))
    assert sorted(out["promoted"]) == assigned, "each assigned child once; the unassigned one waits"
    assert {status_of(board.db, c) for c in assigned} == {"ready"} and status_of(board.db, lone) == "todo"
    assert sorted(e["task_id"] for e in board.events(0, limit=1000) if e["kind"] == "promoted") == assigned

    # with a fallback assignee on the board, the unassigned child is promoted to it
    parent2 = board.create("second parent", assignee="w")["id"]
    lone2 = board.create("nobody's either", parents=[parent2])["id"]
    kid2 = board.create("kid of the second", assignee="w", parents=[parent2])["id"]
    assert board.show(lone2)["assignee"] is None
    boards.update(ab.db, "default", settings={"default_assignee": "helper"})
    out = board.complete(parent2, summary="done", run_id=_run(board, parent2))
    assert sorted(out["promoted"]) == sorted([lone2, kid2])
    assert board.show(lone2)["assignee"] == "helper" and status_of(board.db, lone2) == "ready"


def test_claim_refuses_and_demotes_a_ready_task_whose_parent_is_not_done(board: Any) -> None:
    p = board.create("parent", assignee="w")["id"]
    c = board.create("child", assignee="w")["id"]
    assert status_of(board.db, c) == "ready"
    board.link(p, c)
    assert status_of(board.db, c) == "todo", "linking a pending parent demotes the ready child"


def test_reopen_demotes_ready_children(board: Any) -> None:
    p = board.create("parent", assignee="w")["id"]
    kids = [board.create(f"kid {i}", assignee="w", parents=[p])["id"] for i in range(2)]
    board.complete(p, summary="done")
    assert [status_of(board.db, k) for k in kids] == ["ready", "ready"]
    running_kid = kids[1]
    _run(board, running_kid)
    out = board.reopen(p, reason="bug found")
    assert out["status"] == "ready"
    assert status_of(board.db, kids[0]) == "todo"
    assert status_of(board.db, running_kid) == "running", "a running child keeps its worker"
    check_invariants(board.db)


# -- synthesized runs ----------------------------------------------------------------------------


@pytest.mark.parametrize("start", ["ready", "blocked", "review"])
def test_closing_by_hand_synthesizes_a_zero_duration_run(ab: Any, start: str) -> None:
    t = reach(ab.db, B, start)
    out = runs.complete(ab.db, B, t, summary="closed by a person", actor="alice")
    assert out["status"] == "done"
    last = ab.board().show(t)["runs"][-1]
    if start == "review":
        assert last["outcome"] == "completed" and last["synthetic"]
    else:
        assert len(ab.board().show(t)["runs"]) == 1
    assert last["synthetic"] is True and last["status"] == "closed"
    assert last["started_at"] == last["ended_at"]
    assert last["summary"] == "closed by a person"
    completed = [e for e in ab.board().events(0, task_id=t) if e["kind"] == "completed"]
    assert completed[-1]["payload"]["synthetic"] is True
    assert completed[-1]["payload"]["summary"] == "closed by a person"


def test_completed_event_carries_the_first_summary_line_capped(board: Any) -> None:
    t = board.create("x", assignee="w")["id"]
    board.complete(t, summary="A" * 600 + "\nsecond line", run_id=_run(board, t))
    ev = [e for e in board.events(0, task_id=t) if e["kind"] == "completed"][0]
    assert ev["payload"]["summary"] == "A" * 400


# -- mentions -------------------------------------------------------------------------------------


def test_mention_creates_a_follow_up_for_known_profiles_only(ab: Any) -> None:
    ab.add_profile("alice", command="echo hi")
    board = ab.board()
    t = board.create("design", assignee="w")["id"]
    c = board.comment(t, "@alice please review, and @ghost too")
    assert c["skipped_mentions"] == ["ghost"]
    assert len(c["spawned_subtasks"]) == 1
    child = board.show(c["spawned_subtasks"][0])
    assert child["assignee"] == "alice"
    assert [p["id"] for p in child["parents"]] == [t]
    assert "@alice please review" in child["body"]
    ev = [e for e in board.events(0, task_id=t) if e["kind"] == "commented"][0]
    assert ev["payload"]["spawned_subtasks"] == c["spawned_subtasks"]
    assert ev["payload"]["skipped_mentions"] == ["ghost"]
    quiet = board.comment(t, "@alice no follow-up", mentions=False)
    assert quiet["spawned_subtasks"] == [] and len(board.list()) == 2


# -- goals ----------------------------------------------------------------------------------------


def _accept(board: Any, goal_id: str) -> None:
    supervision.goal_verdict(board.db, B, goal_id, passed=True, evidence="checked by hand", actor="alice")


def test_goal_is_verified_when_its_tasks_are_done_and_reopens(board: Any) -> None:
    g = board.goal("launch")["id"]
    a = board.create("a", assignee="w", goal=g)["id"]
    b = board.create("b", assignee="w", goal=g)["id"]
    board.complete(a, summary="a done")
    assert goals.show(board.db, B, g)["status"] == "active"
    board.archive(b)
    shown = goals.show(board.db, B, g)
    assert shown["status"] == "verifying"  # never done on task counts alone
    assert [e["payload"]["goal_id"] for e in board.events(0) if e["kind"] == "goal_verifying"] == [g]
    assert not [e for e in board.events(0) if e["kind"] == "goal_completed"]
    _accept(board, g)
    assert goals.show(board.db, B, g)["status"] == "done"
    assert [e["payload"]["goal_id"] for e in board.events(0) if e["kind"] == "goal_completed"] == [g]
    board.reopen(a)
    assert goals.show(board.db, B, g)["status"] == "active"
    board.complete(a, summary="again")
    assert goals.show(board.db, B, g)["status"] == "verifying"


def test_a_done_goal_that_gains_an_open_task_is_active_again(board: Any) -> None:
    g = board.goal("launch")["id"]
    a = board.create("a", assignee="w", goal=g)["id"]
    board.complete(a, summary="a done")
    _accept(board, g)
    assert goals.show(board.db, B, g)["status"] == "done"
    board.create("one more thing", assignee="w", goal=g)
    assert goals.show(board.db, B, g)["status"] == "active"
    other = board.goal("second")["id"]
    x = board.create("x", assignee="w", goal=other)["id"]
    board.complete(x, summary="x done")
    assert goals.show(board.db, B, other)["status"] == "verifying"
    y = board.create("y", assignee="w")["id"]
    board.edit(y, goal_id=other)
    assert goals.show(board.db, B, other)["status"] == "active"


def test_restoring_an_archived_task_reopens_its_verifying_goal(board: Any) -> None:
    g = board.goal("g")["id"]
    a = board.create("a", assignee="w", goal=g)["id"]
    b = board.create("b", assignee="w", goal=g)["id"]
    board.archive(b)
    board.complete(a, summary="done")
    assert goals.show(board.db, B, g)["status"] == "verifying"
    board.restore(b)
    assert goals.show(board.db, B, g)["status"] == "active"


# -- drag on the dashboard -------------------------------------------------------------------------


def test_drag_to_ready_with_pending_parents_is_refused_and_changes_nothing(board: Any) -> None:
    parent = board.create("parent", assignee="w")["id"]
    t = board.create("child", assignee="w", parents=[parent])["id"]
    board.archive(t)
    before = snapshot(board.db, t)
    with pytest.raises(Conflict, match=parent):
        board.set_status(t, "ready")
    assert snapshot(board.db, t) == before


def test_drag_moves_map_to_verbs(board: Any) -> None:
    t = board.create("x")["id"]
    assert status_of(board.db, t) == "todo"
    with pytest.raises(Conflict, match="no assignee"):
        board.set_status(t, "ready")
    board.assign(t, "w")
    assert board.set_status(t, "blocked", reason="waiting")["status"] == "blocked"
    assert board.set_status(t, "ready")["status"] == "ready"
    with pytest.raises(Conflict, match="running by hand"):
        board.set_status(t, "running")
    assert board.set_status(t, "todo")["status"] == "todo"
    with pytest.raises(Conflict):
        board.set_status(t, "done")
    board.set_status(t, "ready")
    assert board.set_status(t, "done")["status"] == "done"
    assert board.set_status(t, "archived")["status"] == "archived"


def test_an_edit_with_a_refused_status_change_leaves_nothing_behind(board: Any) -> None:
    parent = board.create("parent", assignee="w")["id"]
    t = board.create("child", assignee="w", parents=[parent])["id"]
    before = snapshot(board.db, t)
    with pytest.raises(Conflict, match=parent):
        board.update(t, fields={"title": "renamed", "priority": 9}, assign=True, assignee="x", status="ready")
    assert snapshot(board.db, t) == before


def test_an_edit_an_assignee_and_a_status_apply_together(board: Any) -> None:
    t = board.create("draft")["id"]
    out = board.update(t, fields={"title": "final"}, assign=True, assignee="w", status="blocked", reason="legal")
    assert (out["title"], out["assignee"], out["status"], out["block_reason"]) == ("final", "w", "blocked", "legal")
    assert board.show(t)["title"] == "final"


# -- circuit breaker ------------------------------------------------------------------------------


def _crash(board: Any, t: str, outcome: str = "crashed") -> dict[str, Any]:
    return dict(board.fail(t, outcome, run_id=_run(board, t), error="boom"))


def test_breaker_default_limit_is_two(board: Any) -> None:
    t = board.create("x", assignee="w")["id"]
    assert _crash(board, t)["status"] == "ready"
    out = _crash(board, t)
    assert out["status"] == "blocked" and out["block_kind"] == "gave_up"
    assert "2 consecutive failures" in out["block_reason"]
    assert [e["kind"] for e in board.events(0, task_id=t)][-2:] == ["crashed", "gave_up"]


def test_breaker_honours_max_retries_and_board_setting(ab: Any) -> None:
    board = ab.board()
    t = board.create("x", assignee="w", max_retries=3)["id"]
    assert [_crash(board, t)["status"] for _ in range(3)] == ["ready", "ready", "blocked"]
    boards.update(ab.db, B, settings={"failure_limit": 4})
    u = board.create("y", assignee="w")["id"]
    assert [_crash(board, u)["status"] for _ in range(4)] == ["ready"] * 3 + ["blocked"]
    assert "board failure_limit" in status_row(board, u)["block_reason"]


def status_row(board: Any, t: str) -> dict[str, Any]:
    return dict(board.show(t))


def test_settings_given_to_connect_reach_the_verbs(home: Path) -> None:
    with agentboard.connect(str(home), claim_ttl=60, failure_limit=3, default_assignee="w") as ab:
        assert ab.db.settings is ab.settings
        board = ab.board()
        t = board.create("x")
        assert (t["status"], t["assignee"]) == ("ready", "w")
        run = board.claim(t["id"])
        assert 55 < run["claim_expires"] - time.time() <= 60
        board.fail(t["id"], "crashed", run_id=run["run_id"], error="boom")
        assert [_crash(board, t["id"])["status"] for _ in range(2)] == ["ready", "blocked"]
        assert "global failure_limit of 3" in board.show(t["id"])["block_reason"]


def test_a_database_opened_without_settings_follows_the_defaults(home: Path) -> None:
    db = open_database(f"sqlite:///{home / 'agentboard.db'}")
    try:
        assert db.settings == Settings(home=home, host_id=db.settings.host_id)
        t = tasks.create(db, B, "x", assignee="w")
        run = runs.claim(db, B, t["id"])
        assert Settings(home=home).claim_ttl - 5 < run["claim_expires"] - time.time() <= Settings(home=home).claim_ttl
    finally:
        db.close()


def test_three_protocol_violations_in_a_row_trip_the_breaker(board: Any) -> None:
    t = board.create("x", assignee="w", max_retries=10)["id"]
    assert _crash(board, t, "protocol_violation")["status"] == "ready"
    assert _crash(board, t, "protocol_violation")["status"] == "ready"
    out = _crash(board, t, "protocol_violation")
    assert out["status"] == "blocked" and "3 protocol violations" in out["block_reason"]


def test_rate_limits_do_not_count_towards_the_breaker(board: Any) -> None:
    t = board.create("x", assignee="w")["id"]
    for _ in range(3):
        assert _crash(board, t, "rate_limited")["status"] == "ready"


@pytest.mark.parametrize("reset", ["complete", "unblock", "person_reclaim"])
def test_failure_counter_resets(board: Any, reset: str) -> None:
    t = board.create("x", assignee="w")["id"]
    _crash(board, t)
    assert status_row(board, t)["consecutive_failures"] == 1
    if reset == "complete":
        board.complete(t, summary="ok", run_id=_run(board, t))
        board.reopen(t)
    elif reset == "unblock":
        board.block(t, "hold on")
        board.unblock(t)
    else:
        _run(board, t)
        board.reclaim(t)
    assert status_row(board, t)["consecutive_failures"] == 0
    assert _crash(board, t)["status"] == "ready", "one failure after a reset does not trip the breaker"


def test_unlink_re_evaluates_the_child(board: Any) -> None:
    p = board.create("p", assignee="w")["id"]
    c = board.create("c", assignee="w", parents=[p])["id"]
    assert status_of(board.db, c) == "todo"
    links.unlink(board.db, B, p, c)
    assert status_of(board.db, c) == "ready"
    board.link(p, c)
    with pytest.raises(Conflict, match="cycle"):
        board.link(c, p)
    with pytest.raises(Conflict, match="already"):
        board.link(p, c)


# -- event ids are never handed out twice --------------------------------------------------------


def _max_event(db: Any) -> int:
    return int(db.read(lambda tx: tx.scalar("SELECT COALESCE(MAX(id), 0) FROM task_events")))


def test_event_ids_keep_increasing_after_the_newest_events_are_deleted(ab: Any) -> None:
    """A reader that saw the newest id must still see the next event, whatever was deleted."""
    ab.create_board("scratch")
    ab.board("scratch").create("short-lived", assignee="w")
    seen = _max_event(ab.db)  # the newest event belongs to the board about to go
    boards.delete(ab.db, "scratch")
    t = ab.board().create("after the delete", assignee="w")["id"]
    assert [e["task_id"] for e in ab.board().events(seen)] == [t]

    ab.board().complete(t, summary="done")
    seen = _max_event(ab.db)
    assert ab.prune_events(retention_days=-1) > 0  # everything of done tasks, newest included
    u = ab.board().create("after the prune", assignee="w")["id"]
    assert [e["task_id"] for e in ab.board().events(seen)] == [u]


def test_clearing_a_task_goal_settles_the_goal_it_left(board: Any) -> None:
    g = board.goal("g")["id"]
    a = board.create("a", assignee="w", goal=g)["id"]
    b = board.create("b", assignee="w", goal=g)["id"]
    board.complete(a, summary="done")
    out = board.edit(b, goal_id="")
    assert out["goal_id"] is None
    assert [t["id"] for t in board.list(goal=g)] == [a]
    assert goals.show(board.db, B, g)["status"] == "verifying"


# -- timed blocks (a rate limit) -----------------------------------------------------------------


def test_a_rate_limited_block_ends_at_its_time_and_only_then_the_task_is_resumed(board: Any) -> None:
    from agentboard.domain.errors import InvalidInput
    from agentboard.kernel import dispatching

    t = board.create("limited", assignee="w")["id"]
    run = _run(board, t)
    before = snapshot(board.db, t)
    with pytest.raises(InvalidInput, match="ends at a set time"):
        tasks.block(board.db, B, t, "waiting", kind="manual", run_id=run, until=time.time() + 60)
    assert snapshot(board.db, t) == before
    until = time.time() + 3600
    blocked = tasks.block(board.db, B, t, "rate limit", kind="rate_limited", run_id=run, until=until)
    assert (blocked["status"], blocked["block_kind"]) == ("blocked", "rate_limited")
    assert [r["outcome"] for r in board.show(t)["runs"]] == ["rate_limited"]
    assert dispatching.resume_timed_blocks(board.db, [B]) == []  # not yet
    assert board.show(t)["status"] == "blocked"
    resumed = dispatching.resume_timed_blocks(board.db, [B], now=until + 1)
    assert [r["id"] for r in resumed] == [t]
    task = board.show(t)
    assert task["status"] == "ready" and task["cooldown_until"] is None and task["block_kind"] is None


def test_a_task_keeps_its_own_model_until_it_is_cleared(board: Any) -> None:
    from agentboard.domain.errors import InvalidInput

    t = board.create("bigger model", assignee="w", model=" claude-opus-4-1 ")
    assert t["model"] == "claude-opus-4-1" and board.show(t["id"])["model"] == "claude-opus-4-1"
    before = snapshot(board.db, t["id"])
    with pytest.raises(InvalidInput, match="invalid model"):
        board.edit(t["id"], model="two words")
    assert snapshot(board.db, t["id"]) == before
    assert board.edit(t["id"], model="openai/gpt-5")["model"] == "openai/gpt-5"
    assert board.edit(t["id"], model="")["model"] is None
