"""Races driven through the kernel's own verbs, a step at a time (no dispatcher, no agent): the
settle step (``kernel.races.settle_one``, what each dispatcher pass runs) starts and follows the
attempts, and the claims and reports are the ones a worker's would be. What is checked is what a
person sees: the attempts, the budgets, insights, diagnostics, the refusals and the REST answers."""

from __future__ import annotations

from typing import Any

import pytest

from agentboard.dispatch import finish
from agentboard.domain.errors import Conflict
from agentboard.kernel import budgets, dispatching, goals
from agentboard.kernel import races as kraces


def start_race(ab: Any, *entries: str, **fields: Any) -> tuple[Any, str, list[str]]:
    """A race of ``entries`` (profiles made here) started by one settle: its id and its attempts'
    task ids, in order."""
    for name in set(entries):
        ab.add_profile(name, command="true")
    board = ab.board()
    rid = board.create("Fix the notes", race=list(entries), **fields)["id"]
    assert kraces.settle_one(ab.db, board.slug, rid) is None
    return board, rid, attempt_tasks(ab, board, rid)


def attempt_tasks(ab: Any, board: Any, rid: str) -> list[str]:
    return [a["attempt_task_id"] for a in kraces.attempts(ab.db, board.slug, rid)["attempts"]]


def attempts_by_n(ab: Any, board: Any, rid: str) -> dict[int, dict[str, Any]]:
    return {int(a["n"]): a for a in kraces.attempts(ab.db, board.slug, rid)["attempts"]}


def run_and_finish(board: Any, task_id: str) -> int:
    """A worker's run of ``task_id`` that reports success; returns the run's id."""
    run_id = int(board.claim(task_id)["run_id"])
    board.complete(task_id, summary="wrote the good line", run_id=run_id)
    return run_id


def test_a_race_loser_stopped_by_the_race_is_no_failed_first_attempt_in_insights(ab):
    board, rid, (a1, a2) = start_race(ab, "slowpoke", "quick", race_until="first-pass")
    board.claim(a1)  # the slow attempt is still at work when the quick one passes
    run_and_finish(board, a2)
    won = kraces.settle_one(ab.db, board.slug, rid)
    assert won == 2
    finish.pick(ab.db, board.slug, rid, won, actor="dispatcher")
    by_n = attempts_by_n(ab, board, rid)
    assert (by_n[1]["state"], by_n[1]["outcome"]) == ("stopped", "stopped")
    # its run is closed as stopped by its race, not as a reclaimed (failed) run
    [run] = board.runs(a1)
    assert (run["status"], run["outcome"]) == ("closed", "stopped")
    groups = {g["key"]: g for g in board.insights(by="profile")["groups"]}
    slow = groups["slowpoke"]
    assert slow["runs"] == 1  # it ran: its run and spend count
    assert slow["first_attempts"] == 0 and slow["first_attempt_success_rate"] is None
    assert slow["failures"] == {}
    assert (slow["races_entered"], slow["races_won"]) == (1, 0)
    assert groups["quick"]["first_attempt_success_rate"] == 1.0 and groups["quick"]["races_won"] == 1
    by_model = board.insights(by="model", since="1d")["groups"]
    assert all(g["failures"] == {} for g in by_model)
    assert sum(g["first_attempts"] for g in by_model) == 1


def test_an_attempt_in_review_has_not_passed_and_is_put_away_when_the_race_ends(ab):
    board, rid, (a1, a2) = start_race(ab, "asker", "finisher")
    # attempt 1 hands its task to review instead of finishing (as a degraded result does)
    run = board.claim(a1)
    board.request_review(a1, summary="not sure", run_id=run["run_id"])
    run_and_finish(board, a2)
    assert kraces.settle_one(ab.db, board.slug, rid) is None
    race = kraces.attempts(ab.db, board.slug, rid)
    by_n = {a["n"]: a for a in race["attempts"]}
    assert (by_n[1]["state"], by_n[1]["outcome"]) == ("finished", "failed")
    assert "review" in by_n[1]["error"]
    assert (by_n[2]["state"], by_n[2]["outcome"]) == ("finished", "done")
    assert race["status"] == "review" and race["can_pick"] == [2]
    # the race is in review: attempt 1's task is not left in review for ever
    assert board.show(a1)["status"] == "archived"
    with pytest.raises(Conflict, match="has not passed"):
        kraces.check_pick(ab.db, board.slug, rid, 1)
    out = finish.pick(ab.db, board.slug, rid, 2)
    assert out["status"] == "done" and out["completed_at"] is not None
    assert attempts_by_n(ab, board, rid)[1]["outcome"] == "failed"  # it keeps how it finished


def test_unblocking_an_attempt_of_a_race_that_is_not_running_is_refused_and_diagnostics_do_not_suggest_it(ab):
    board, rid, (a1, a2) = start_race(ab, "breaker", "other")
    run = board.claim(a1)
    board.give_up(a1, "the agent keeps crashing", run_id=run["run_id"])
    kraces.settle_one(ab.db, board.slug, rid)
    assert attempts_by_n(ab, board, rid)[1]["outcome"] == "failed"
    # while the race runs, its failed attempt may be run again on its own
    assert [f["task_id"] for f in board.diagnostics() if f["kind"] == "gave_up"] == [a1]
    # a person blocks the race before a dispatcher pass settles it
    board.block(rid, "wait, I need to check something")
    with pytest.raises(Conflict) as refused:
        board.unblock(a1)
    assert f"attempt of race {rid}, which is blocked" in str(refused.value)
    assert f"agentboard unblock {rid}" in str(refused.value)
    assert board.show(a1)["status"] == "blocked"
    assert not [f for f in board.diagnostics() if f["task_id"] == a1]
    # the race's own unblock runs its failed attempt again
    board.unblock(rid)
    kraces.settle_one(ab.db, board.slug, rid)
    assert board.show(a1)["status"] == "ready" and board.show(rid)["status"] == "running"


def test_a_races_task_and_goal_budgets_count_its_attempts_runs(ab):
    board, rid, (a1, a2) = start_race(ab, "flaky", "flaky")
    budgets.set_budget(ab.db, "task", rid, budgets.Limits.build(max_runs=2))
    goal = board.goal("Ship the notes")
    budgets.set_budget(ab.db, "goal", goal["id"], budgets.Limits.build(max_runs=2))
    rid2 = board.create("Fix the notes again", race=["flaky", "flaky"], goal=goal["id"])["id"]
    assert kraces.settle_one(ab.db, board.slug, rid2) is None
    b1, b2 = attempt_tasks(ab, board, rid2)
    assert board.show(b1)["goal_id"] == goal["id"]  # an attempt carries its race's goal
    # every attempt's first run crashes (through the dispatcher's claim, which the budgets gate)
    for ids in ([a1, a2], [b1, b2]):
        claimed = dispatching.claim_batch(ab.db, board.slug, ids)
        assert sorted(c["task"]["id"] for c in claimed) == sorted(ids)
        for c in claimed:
            board.fail(c["task"]["id"], "crashed", run_id=c["run_id"], error="exit 3", cooldown_seconds=0)
    [task_budget] = budgets.show(ab.db, scope="task", ref=rid)
    assert task_budget["spent"]["runs"] == 2 and task_budget["exhausted"]
    [goal_budget] = budgets.show(ab.db, scope="goal", ref=goal["id"])
    assert goal_budget["spent"]["runs"] == 2 and goal_budget["exhausted"]
    shown_goal = goals.show(ab.db, board.slug, goal["id"])
    assert shown_goal["runs"] == 2
    # the goal's tasks are the race, once: its attempts are its runs, not more of the goal's work
    assert [t["id"] for t in shown_goal["tasks"]] == [rid2] and sum(shown_goal["counts"].values()) == 1
    # the retries are not started: the budgets are spent, and they say which
    assert dispatching.claim_batch(ab.db, board.slug, [a1, a2, b1, b2]) == []
    for t in (a1, a2):
        shown = board.show(t)
        assert shown["status"] == "blocked" and shown["block_kind"] == "budget"
        assert f"the task {rid} budget is spent" in shown["block_reason"]
    for t in (b1, b2):
        assert f"the goal {goal['id']} budget is spent" in board.show(t)["block_reason"]
    # the race waits for its budget: its attempts are paused, not failed
    assert kraces.settle_one(ab.db, board.slug, rid) is None
    assert board.show(rid)["status"] == "running"
    assert {a["state"] for a in attempts_by_n(ab, board, rid).values()} == {"running"}
    assert [e for e in board.events(0, limit=1000) if e["kind"] == "budget_exhausted" and e["task_id"] == rid]
    # raised, the budget lets them run again
    budgets.set_budget(ab.db, "task", rid, budgets.Limits.build(max_runs=4))
    assert {board.show(t)["status"] for t in (a1, a2)} == {"ready"}


def test_the_rest_pick_refuses_a_boolean_attempt_number_and_answers_the_race_as_it_is(ab):
    import httpx

    from agentboard.api import create_app
    from agentboard.api.serve import BackgroundServer
    from agentboard.kernel import tokens

    board, rid, (a1, a2) = start_race(ab, "one", "two")
    run_and_finish(board, a1)
    run_and_finish(board, a2)
    kraces.settle_one(ab.db, board.slug, rid)
    assert board.show(rid)["status"] == "review"
    admin = tokens.create(ab.db, "admin", role="admin")["token"]
    server = BackgroundServer(create_app(ab.settings, ab.db)).start()
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {admin}"}, timeout=30) as http:
            for bad in (True, "1", 1.0):
                refused = http.post(f"/api/tasks/{rid}/pick", json={"n": bad})
                assert refused.status_code == 422, (bad, refused.text)
            assert board.show(rid)["status"] == "review"
            picked = http.post(f"/api/tasks/{rid}/pick", json={"n": 2})
            assert picked.status_code == 200, picked.text
            out = picked.json()
            assert (out["status"], out["picked"]) == ("done", 2)
            assert out["completed_at"] == board.show(rid)["completed_at"] is not None
    finally:
        server.stop()
