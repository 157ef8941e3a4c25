"""Block kinds that do something, the block loop, and wakes that expire, re-fire and escalate."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from agentboard.domain.errors import Conflict, InvalidInput
from agentboard.kernel import supervision

from .conftest import events, gated_worker, set_board, supervise, supervision_tasks, wait_for, wakes


def test_a_dependency_block_waits_in_todo_and_resumes_by_itself(ab: Any, board: Any, dispatcher: Any,
                                                                 tmp_path: Any) -> None:
    gate = tmp_path / "gate"
    ab.add_profile("w", command=gated_worker(gate))
    first = board.create("migrate the schema", assignee="w")["id"]
    later = board.create("backfill", assignee="w")["id"]
    out = subprocess.run(["agentboard", "block", later, "needs the new columns", "--on", first],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    task = board.show(later)
    assert (task["status"], task["block_kind"], task["block_on"]) == ("todo", "dependency", first)
    d = dispatcher()
    wait_for(lambda: board.show(first)["status"] == "running", what="the first task running")
    d.run_pass()
    assert board.show(later)["status"] == "todo" and board.runs(later) == []  # it waits
    gate.write_text("go")
    wait_for(lambda: board.show(later)["status"] == "done", what="the waiting task resuming by itself")
    task = board.show(later)
    assert (task["block_kind"], task["block_on"]) == (None, None)
    assert [e["payload"]["by"] for e in events(board, later, "promoted")] == [first]


def test_a_dependency_on_a_done_task_resumes_at_once_and_cycles_are_refused(ab: Any, board: Any) -> None:
    a = board.create("a", assignee="w")["id"]
    b = board.create("b", assignee="w")["id"]
    board.complete(a, summary="done")
    assert board.block(b, "wait for a", kind="dependency", on=a)["status"] == "ready"
    c = board.create("c", assignee="w")["id"]
    board.block(c, "wait for b", kind="dependency", on=b)
    with pytest.raises(Conflict, match="cycle"):
        board.block(b, "wait for c", kind="dependency", on=c)
    with pytest.raises(InvalidInput, match="--kind dependency"):
        board.block(b, "wrong kind", kind="manual", on=c)


def test_a_routine_dependency_wait_is_moot_for_the_supervisor(ab: Any, board: Any) -> None:
    supervise(ab, board)
    a = board.create("a", assignee="w")["id"]
    b = board.create("b", assignee="w")["id"]
    board.block(b, "needs a", kind="dependency", on=a, actor="alice")
    out = supervision.take_due(ab.db, board.slug)
    assert out["tasks"] == [] and len(out["moot"]) == 1
    assert "resumes by itself" in wakes(ab, board)[0]["note"]


def test_a_task_blocked_too_often_goes_to_triage_and_wakes_the_supervisor(ab: Any, board: Any) -> None:
    supervise(ab, board, block_loop_limit=3)
    t = board.create("flaky", assignee="w")["id"]
    for i in range(3):
        board.block(t, f"blocked {i}", actor="alice")
        board.unblock(t, actor="alice")
    assert board.show(t)["status"] == "ready"
    out = board.block(t, "blocked once more", actor="alice")
    assert out["status"] == "triage"
    (loop,) = events(board, t, "block_loop_detected")
    assert loop["payload"]["count"] == 4 and loop["payload"]["limit"] == 3
    assert {(w["reason"], w["status"]) for w in wakes(ab, board)} >= {("block_loop", "pending")}
    taken = supervision.take_due(ab.db, board.slug)
    assert [t2["subject"] for t2 in taken["tasks"]] == [t]


def test_an_unhandled_wake_expires_re_fires_once_then_goes_to_a_person(ab: Any, board: Any) -> None:
    supervise(ab, board, escalate_to="alice")
    t = board.create("stuck")["id"]
    board.block(t, "no idea", actor="bob")
    for attempt in (1, 2):
        taken = supervision.take_due(ab.db, board.slug)
        (sup,) = taken["tasks"]
        board.complete(sup["id"], summary="looked, did nothing")  # never marked its wake handled
        out = supervision.reconcile(ab.db, board.slug)
        assert out["expired"] == sup["wakes"]
        if attempt == 1:
            assert len(out["refired"]) == 1 and not out["escalated"]
    assert [w["status"] for w in wakes(ab, board)] == ["escalated", "expired"]
    task = board.show(t)
    assert (task["block_kind"], task["block_to"]) == ("needs_input", "alice")
    assert len(supervision_tasks(ab, board)) == 2
    assert supervision.panel(ab.db, board.slug)["escalations"][0]["id"] == t


def test_the_supervisors_own_actions_never_enqueue_a_wake(ab: Any, board: Any) -> None:
    supervise(ab, board)
    t = board.create("x", assignee="w")["id"]
    supervision.escalate(ab.db, board.slug, t, "a person decides the licence", to="carol", actor="supervisor:sup")
    board.block(board.create("y")["id"], "blocked by the supervisor", actor="supervisor:sup")
    assert wakes(ab, board) == []
    assert board.show(t)["block_to"] == "carol"


def test_disabling_the_supervisor_closes_its_pending_wakes_as_moot(ab: Any, board: Any) -> None:
    supervise(ab, board)
    board.block(board.create("x")["id"], "waits", actor="alice")
    supervision.set_supervisor(ab.db, board.slug, None, actor="alice")
    assert [w["status"] for w in wakes(ab, board)] == ["moot"]
    board.block(board.create("y")["id"], "waits", actor="alice")
    assert len(wakes(ab, board)) == 1  # no supervisor: no wake


def test_bad_supervisor_settings_are_refused_with_what_to_use(ab: Any, board: Any) -> None:
    with pytest.raises(InvalidInput, match="replan_after"):
        set_board(ab, board, replan_after=0)
    with pytest.raises(Exception, match="no profile"):
        supervision.set_supervisor(ab.db, board.slug, "ghost")


def test_a_verdict_needs_a_verifying_goal_and_evidence(ab: Any, board: Any) -> None:
    g = board.goal("g")["id"]
    with pytest.raises(Conflict, match="only a verifying goal"):
        supervision.goal_verdict(ab.db, board.slug, g, passed=True, evidence="looks fine")
    with pytest.raises(InvalidInput, match="evidence"):
        supervision.goal_verdict(ab.db, board.slug, g, passed=True, evidence=" ")


def test_the_sweep_wakes_for_what_the_hooks_missed_once(ab: Any, board: Any, dispatcher: Any) -> None:
    import time

    from agentboard.kernel import runs

    supervise(ab, board, stuck_after=5)
    ab.add_profile("w", command="true")
    blocked = board.create("blocked long ago", assignee="w")["id"]
    board.block(blocked, "waits", actor="alice")
    ghost = board.create("for a profile nobody has", assignee="ghost")["id"]
    lost = board.create("its worker died", assignee="w")["id"]
    gone = subprocess.Popen(["true"])
    gone.wait()
    g = board.goal("settled by the supervisor itself")["id"]
    last = board.create("the goal's last task", assignee="w", goal=g)["id"]
    board.complete(last, summary="done", actor="supervisor:sup")  # its own action: no wake
    assert [w for w in wakes(ab, board) if w["reason"] == "goal_verifying"] == []
    d = dispatcher(start=False)
    runs.claim(ab.db, board.slug, lost, host=d.host, pid=gone.pid)
    later = time.time() + 60  # as if the sweep ran a minute from now: the block is older than stuck_after
    added = d.planner.supervising.sweep(board.slug, later)
    found = {(w["reason"], w["subject"]) for w in wakes(ab, board, "pending")}
    assert {("stuck", blocked), ("unrunnable", ghost), ("run_lost", lost), ("goal_verifying", g)} <= found
    assert len(added) == 4
    assert d.planner.supervising.sweep(board.slug, later) == []  # already pending: coalesced


def _claim_and_review(board: Any, tid: str) -> None:
    from agentboard.kernel import runs

    runs.claim(board.db, board.slug, tid)
    runs.request_review(board.db, board.slug, tid, summary="please look")


def test_sent_back_for_the_nth_time_wakes_and_once_more_proposes_a_replan(ab: Any, board: Any) -> None:
    supervise(ab, board, replan_after=2)
    g = board.goal("g")["id"]
    t = board.create("the parser", assignee="w", goal=g, review=True)["id"]
    for i in range(4):
        _claim_and_review(board, t)
        board.request_changes(t, f"still wrong ({i})", actor="reviewer")
        reasons = {w["reason"] for w in wakes(ab, board)}
        assert ("sent_back" in reasons) == (i >= 1)
        assert ("replan_proposed" in reasons) == (i >= 2)
        # the supervisor saw to each wake: the send-backs after the limit's wake no more
        if pending := [w["id"] for w in wakes(ab, board, "pending")]:
            supervision.handle(ab.db, board.slug, pending, note="seen")
    assert [w["detail"].get("times") for w in wakes(ab, board) if w["reason"] == "sent_back"] == [2]
    proposals = [x for x in board.list(goal=g) if x["status"] == "triage"]
    assert len(proposals) == 1 and proposals[0]["title"] == "Replan: the parser"
    body = board.show(proposals[0]["id"])["body"]
    assert body.count("changes_requested") == 3 and "still wrong (2)" in body


def test_repeated_crashes_and_degraded_results_wake_the_supervisor(ab: Any, board: Any) -> None:
    from agentboard.kernel import runs

    supervise(ab, board)
    t = board.create("flaky", assignee="w", max_retries=5)["id"]
    runs.claim(ab.db, board.slug, t)
    runs.fail(ab.db, board.slug, t, "crashed", error="segfault")
    assert wakes(ab, board) == []  # once is not a pattern
    runs.claim(ab.db, board.slug, t)
    runs.fail(ab.db, board.slug, t, "crashed", error="segfault again")
    assert [(w["reason"], w["detail"]["failures"]) for w in wakes(ab, board)] == [("crashed", 2)]
    runs.record_telemetry(ab.db, board.slug, t, "result_degraded", {"reason": "no valid result.json"})
    assert {w["reason"] for w in wakes(ab, board)} == {"crashed", "degraded"}


def test_a_supervision_task_whose_wakes_went_elsewhere_is_archived_when_its_budget_allows_again(
        ab: Any, board: Any) -> None:
    from agentboard.kernel import budgets

    supervise(ab, board, escalate_to="alice")
    t = board.create("stuck")["id"]
    board.block(t, "no idea", actor="bob")
    sups = []
    for _ in (1, 2):  # the wake fires, its task is stopped by the budget, it re-fires, then a person decides
        (sup,) = supervision.take_due(ab.db, board.slug)["tasks"]
        sups.append(sup["id"])
        board.block(sup["id"], "the supervision budget is spent", kind="budget", actor="dispatcher")
        supervision.reconcile(ab.db, board.slug)
    assert [board.show(s)["status"] for s in sups] == ["blocked", "blocked"]  # seen while the budget is spent
    assert board.show(t)["block_to"] == "alice"
    # the budget allows runs again: neither runs (and spends) for a wake a person has now
    budgets.release(ab.db, [board.slug])
    assert [board.show(s)["status"] for s in sups] == ["archived", "archived"]
    assert "went to a person" in events(board, sups[0], "archived")[0]["payload"]["reason"]


def test_a_supervision_task_with_its_wake_still_open_runs_when_its_budget_allows_again(ab: Any, board: Any) -> None:
    from agentboard.kernel import budgets

    supervise(ab, board)
    t = board.create("stuck")["id"]
    board.block(t, "no idea", actor="bob")
    (sup,) = supervision.take_due(ab.db, board.slug)["tasks"]
    board.block(sup["id"], "the supervision budget is spent", kind="budget", actor="dispatcher")
    budgets.release(ab.db, [board.slug])
    assert board.show(sup["id"])["status"] == "ready"


def test_a_task_rate_limited_again_and_again_is_shown_to_the_supervisor_once(ab: Any, board: Any) -> None:
    """Each rate limit would be a paid supervision run that can only say what it said before;
    the dispatcher resumes the task after its cool-down by itself."""
    supervise(ab, board)
    t = board.create("call the model", assignee="w")["id"]
    taken = []
    for _ in range(3):
        board.block(t, "the provider said 429", kind="rate_limited")
        taken.append(supervision.take_due(ab.db, board.slug))
        board.unblock(t)
    assert [len(out["tasks"]) for out in taken] == [1, 0, 0]
    notes = [w["note"] for w in wakes(ab, board, "moot")]
    assert len(notes) == 2 and all("rate limit already" in n for n in notes)
    # a block that waits for someone still wakes it every time (its supervision task is still open:
    # the wake waits for it)
    board.block(t, "which endpoint?", actor="alice")
    out = supervision.take_due(ab.db, board.slug)
    assert out["moot"] == [] and out["waiting"] == 1


def test_a_spent_budget_holding_many_tasks_is_shown_to_the_supervisor_once(ab: Any, board: Any) -> None:
    supervise(ab, board)
    held = [board.create(f"spend {i}", assignee="w")["id"] for i in range(6)]
    for t in held:
        board.block(t, "budget of board default spent: cost $5.00 of $5.00", kind="budget")
    out = supervision.take_due(ab.db, board.slug)
    assert len(out["tasks"]) == 1 and len(out["moot"]) == 5
    assert all("spent budget once" in w["note"] for w in wakes(ab, board, "moot"))
    later = board.create("spend later", assignee="w")["id"]
    board.block(later, "budget of board default spent", kind="budget")
    out = supervision.take_due(ab.db, board.slug)
    assert out["tasks"] == [] and "spent budget already" in wakes(ab, board, "moot")[0]["note"]
