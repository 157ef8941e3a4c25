"""The supervisor end to end: real dispatchers start the fake supervisor agent (a real process
acting through the CLI with its run token) for the wakes the kernel enqueues."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentboard.kernel import goals, supervision

from .conftest import (
    ACTOR,
    RESULT_OK,
    events,
    gated_worker,
    spawns,
    supervise,
    supervision_tasks,
    wait_for,
    wakes,
)


def test_a_blocked_task_wakes_the_supervisor_once_and_it_comments_and_reprioritizes(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    log = tmp_path / "sup.log"
    supervise(ab, board, {"log": str(log), "priority": 7})
    t = board.create("pick the database")["id"]
    board.block(t, "which database: sqlite or postgres?", kind="needs_input", actor="alice")
    assert [(w["reason"], w["subject"], w["status"]) for w in wakes(ab, board)] == [("blocked", t, "pending")]

    dispatcher()
    wait_for(lambda: wakes(ab, board, "handled"), what="the wake handled")
    assert len(spawns(log)) == 1 and spawns(log)[0]["wakes"] == [[str(wakes(ab, board)[0]["id"]), "blocked", t]]
    assert len(wakes(ab, board)) == 1 and len(supervision_tasks(ab, board)) == 1
    task = board.show(t)
    assert task["priority"] == 7 and task["status"] == "blocked"
    assert [c["author"] for c in task["comments"]] == [ACTOR]
    assert [e["actor"] for e in events(board, t, "reprioritized")] == [ACTOR]
    assert wait_for(lambda: all(s["status"] == "done" for s in supervision_tasks(ab, board)), what="its task done")


def test_ten_blocks_in_one_pass_coalesce_into_one_wake_and_one_spawn_per_subject(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    log = tmp_path / "sup.log"
    supervise(ab, board, {"log": str(log)})
    ids = [board.create(f"task {i}")["id"] for i in range(10)]
    for tid in ids:
        board.block(tid, "waits for a person", actor="alice")
    for tid in ids[:5]:  # blocked again before the supervisor ran: still one wake each
        board.unblock(tid, actor="alice")
        board.block(tid, "waits again", actor="alice")
    assert len(events(board, kind="blocked")) == 15
    assert sorted(w["subject"] for w in wakes(ab, board, "pending")) == sorted(ids)

    dispatcher()
    wait_for(lambda: len(wakes(ab, board, "handled")) == 10, timeout=180, what="ten wakes handled")
    assert len(wakes(ab, board)) == 10
    assert sorted(s["wakes"][0][2] for s in spawns(log)) == sorted(ids)  # one spawn per subject
    assert len(supervision_tasks(ab, board)) == 10


def test_the_supervisors_own_unblock_does_not_wake_it_again(ab: Any, board: Any, dispatcher: Any,
                                                           tmp_path: Path) -> None:
    log = tmp_path / "sup.log"
    supervise(ab, board, {"log": str(log), "unblock": True})
    ab.add_profile("w", command=RESULT_OK)
    t = board.create("flaky step", assignee="w")["id"]
    board.block(t, "the staging server was down", actor="alice")
    d = dispatcher()
    wait_for(lambda: board.show(t)["status"] == "done", what="the task unblocked by the supervisor and done")
    # the event log is read below its horizon: wait for a transaction still open to end
    wait_for(lambda: [e["actor"] for e in events(board, t, "unblocked")] == [ACTOR], timeout=30,
             what="the supervisor's unblock in the event log")
    d.run_pass()
    assert len(wakes(ab, board)) == 1 and len(spawns(log)) == 1


def test_a_wake_enqueued_while_no_dispatcher_runs_is_handled_once_by_the_next(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    log = tmp_path / "sup.log"
    supervise(ab, board, {"log": str(log)})
    first = dispatcher()
    first.stop()
    t = board.create("needs a person")["id"]
    board.block(t, "what should the API return?", actor="alice")
    assert wakes(ab, board, "pending")  # persisted, nobody running
    dispatcher()
    wait_for(lambda: wakes(ab, board, "handled"), what="the wake handled")
    first_seen = len(spawns(log))
    assert first_seen == 1 and len(wakes(ab, board)) == 1


def test_a_wake_enqueued_while_a_dispatcher_idles_is_handled_without_waiting_for_its_interval(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    log = tmp_path / "sup.log"
    supervise(ab, board, {"log": str(log)})
    d = dispatcher(dispatch_interval=3600)  # only a wake-up can start the pass that handles it
    wait_for(lambda: d.passes >= 1, what="the dispatcher's first pass")
    t = board.create("needs a person")["id"]
    board.block(t, "what should the API return?", actor="alice")
    wait_for(lambda: wakes(ab, board, "handled"), what="the wake handled")
    assert len(spawns(log)) == 1


def test_a_wake_whose_task_was_unblocked_meanwhile_is_moot_and_spawns_nothing(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    log = tmp_path / "sup.log"
    supervise(ab, board, {"log": str(log)})
    t = board.create("blocked for a moment")["id"]
    board.block(t, "a question", actor="alice")
    board.unblock(t, actor="alice")
    d = dispatcher(start=False)
    d.run_pass()
    (w,) = wakes(ab, board)
    assert w["status"] == "moot" and "no longer blocked" in w["note"]
    assert supervision_tasks(ab, board) == [] and not log.exists()
    assert [e["payload"]["wake"] for e in events(board, t, "wake_moot")] == [w["id"]]


def test_the_breaker_giving_up_proposes_a_replan_the_supervisor_releases_and_the_caps_still_hold_it(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    ab.add_profile("crasher", command="sh -c 'echo boom >&2; exit 3'")
    ab.add_profile("w", command=gated_worker(gate), max_concurrency=1)
    supervise(ab, board, {"log": str(tmp_path / "sup.log"), "release": True}, default_assignee="w")
    g = board.goal("ship the importer")["id"]
    busy = board.create("long job", assignee="w")["id"]
    t = board.create("parse the legacy format", assignee="crasher", goal=g)["id"]
    d = dispatcher()
    wait_for(lambda: board.show(busy)["status"] == "running", what="the long job holding w's only slot")

    def proposal() -> dict[str, Any] | None:
        rows = ab.db.read(lambda tx: tx.all("SELECT * FROM tasks WHERE goal_id = :g AND created_by = 'replan'", {"g": g}))
        return rows[0] if rows else None

    p = wait_for(proposal, what="the replan proposal")
    assert p["title"] == "Replan: parse the legacy format" and p["goal_id"] == g
    assert "crashed" in board.show(p["id"])["body"] and "boom" in board.show(p["id"])["body"]
    assert [e["payload"]["proposal"] for e in events(board, t, "replan_proposed")] == [p["id"]]
    wait_for(lambda: board.show(p["id"])["status"] == "ready", what="the supervisor releasing the proposal")
    # (on PostgreSQL an event is read once every transaction begun before it has ended)
    released = wait_for(lambda: events(board, p["id"], "released"), what="the release event")
    assert [e["actor"] for e in released] == [ACTOR]
    # the gates do not care who created it: w's max_concurrency of 1 holds it while the long job runs
    d.run_pass()
    assert board.show(p["id"])["status"] == "ready" and board.runs(p["id"]) == []
    gate.write_text("go")
    wait_for(lambda: board.show(p["id"])["status"] == "done", what="the released proposal run once w is free")
    assert board.show(busy)["status"] == "done"


def test_a_goal_whose_verify_fails_stays_open_with_a_proposal_and_one_that_passes_is_done(
        ab: Any, board: Any, dispatcher: Any) -> None:
    ab.add_profile("w", command=RESULT_OK)
    bad = goals.create(ab.db, board.slug, "release 1.0", verify=["sh -c 'echo missing changelog; exit 1'"])["id"]
    good = goals.create(ab.db, board.slug, "release 0.9", verify=["true"])["id"]
    a = board.create("build", assignee="w", goal=bad)["id"]
    b = board.create("build too", assignee="w", goal=good)["id"]
    dispatcher()
    wait_for(lambda: goals.show(ab.db, board.slug, good)["status"] == "done", what="the passing goal done")
    wait_for(lambda: [x for x in board.list(goal=bad) if x["status"] == "triage"], what="the failing goal's proposal")
    shown = goals.show(ab.db, board.slug, bad)
    assert shown["status"] == "active"  # never done on task counts alone
    assert board.show(a)["status"] == "done" and board.show(b)["status"] == "done"
    assert "missing changelog" in shown["evidence"] and "FAILED" in shown["evidence"]
    (prop,) = [x for x in board.list(goal=bad) if x["status"] == "triage"]
    assert "missing changelog" in board.show(prop["id"])["body"]
    assert "ok: `true`" in goals.show(ab.db, board.slug, good)["evidence"]
    kinds = [e["kind"] for e in events(board) if e["kind"].startswith("goal_")]
    assert kinds.count("goal_completed") == 1 and "goal_verify_failed" in kinds


def test_a_supervised_goal_is_judged_by_the_supervisor(ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    supervise(ab, board, {"verdict": "pass"})
    ab.add_profile("w", command=RESULT_OK)
    g = board.goal("docs site")["id"]
    board.create("write it", assignee="w", goal=g)
    dispatcher()
    wait_for(lambda: goals.show(ab.db, board.slug, g)["status"] == "done", what="the supervisor's verdict")
    done = [e for e in events(board, kind="goal_completed")]
    assert done[0]["actor"] == ACTOR and "acceptance" in done[0]["payload"]["evidence"]
    wait_for(lambda: supervision.status(ab.db, board.slug)["wakes"]["handled"] == 1, what="the wake handled")
    assert [(w["reason"], w["subject"]) for w in wakes(ab, board)] == [("goal_verifying", g)]


def test_a_task_the_supervisor_proposes_and_releases_meets_the_breaker_like_any_other(
        ab: Any, board: Any, dispatcher: Any) -> None:
    from agentboard.kernel import supervision as ks

    ab.add_profile("crasher", command="sh -c 'exit 4'")
    supervise(ab, board, failure_limit=1)
    out = ks.release_proposal(ab.db, board.slug, board.create(
        "retry the import", assignee="crasher", triage=True, actor=ACTOR)["id"], actor=ACTOR)
    assert out["status"] == "ready"
    dispatcher()
    wait_for(lambda: board.show(out["id"])["status"] in ("blocked", "triage"), what="the breaker stopping it")
    assert board.show(out["id"])["block_kind"] == "gave_up"
    assert [r["outcome"] for r in board.runs(out["id"])] == ["crashed"]


def test_the_supervisor_runs_in_scratch_never_in_the_boards_repository(ab: Any, dispatcher: Any, tmp_path: Path) -> None:
    import subprocess

    from dispatch.test_workspaces import make_repo

    repo = make_repo(tmp_path / "repo")
    ab.create_board("code", workdir=str(repo), workdir_mode="linked-existing")
    board = ab.board("code")
    supervise(ab, board, {"priority": 2})
    t = board.create("needs a decision")["id"]
    board.block(t, "which license?", actor="alice")
    dispatcher()
    wait_for(lambda: wakes(ab, board, "handled"), what="the wake handled")
    branches = subprocess.run(["git", "-C", str(repo), "branch", "--list"], capture_output=True, text=True).stdout
    assert "ab/" not in branches and not (repo / ".worktrees").exists()
    (run,) = board.runs(supervision_tasks(ab, board)[0]["id"])
    assert str(ab.settings.home) in run["workspace_path"]


def test_a_replan_proposal_whose_task_got_done_is_withdrawn_by_the_sweep_and_no_longer_holds_its_goal_open(
        ab: Any, board: Any, dispatcher: Any) -> None:
    import time

    supervise(ab, board)
    ab.add_profile("w", command="true")
    g = board.goal("ship the importer")["id"]
    t = board.create("parse the legacy format", goal=g, assignee="w")["id"]
    task = board.show(t)
    p = ab.db.write(lambda tx: supervision.propose_replan(tx, board.slug, task, "it gave up", "alice"))
    board.complete(t, summary="fixed by hand")  # a person (or the supervisor) saw to the task itself
    assert board.show(p)["status"] == "triage" and goals.show(ab.db, board.slug, g)["status"] == "active"
    dispatcher(start=False).planner.supervising.sweep(board.slug, time.time())
    assert board.show(p)["status"] == "archived"
    assert [e["payload"]["reason"] for e in events(board, p, "archived")] == [f"moot: task {t} is done"]
    assert goals.show(ab.db, board.slug, g)["status"] == "verifying"
