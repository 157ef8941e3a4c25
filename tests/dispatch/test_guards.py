"""Paths of the dispatcher each covered by one focused test with real worker processes: the
review hand-off after a CLI completion, the stale rule, the free-memory guard and the respawn
guard for a task an agent reopened right after it completed.

(The repair path through the dispatcher is covered by tests/protocol/test_live_path.py.)
"""

from __future__ import annotations

import shlex

from agentboard.dispatch import liveness

from .conftest import RESULT_OK, all_in, events, wait_for


def _reviews(db, task_id):
    return int(db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM reviews WHERE task_id = :t", {"t": task_id})))


def test_cli_completion_of_a_review_task_hands_off_to_review_once(ab, board, dispatcher):
    ab.settings.reviewer_agent = "auto"
    ab.settings.llm_base_url = None  # no LLM: peer review is unavailable, a person must review
    ab.add_profile("cli", command="sh -c " + shlex.quote("agentboard complete --summary 'did it via the CLI'"))
    t = board.create("reviewed work", assignee="cli", review=True)
    d = dispatcher()
    wait_for(lambda: events(board, t["id"], "review_unavailable"), what="the review hand-off")
    assert d.wait_idle()
    d.run_pass()  # later passes do not hand off again
    assert d.wait_idle()
    assert board.show(t["id"])["status"] == "review"
    runs = board.runs(t["id"])
    assert [r["outcome"] for r in runs] == ["review_requested"]
    assert runs[0]["exit_code"] == 0  # the exit was recorded on the closed run
    unavailable = events(board, t["id"], "review_unavailable")
    assert len(unavailable) == 1
    assert unavailable[0]["payload"]["message"] == "peer review unavailable"
    # nothing approved it
    assert not events(board, t["id"], "approved") and not events(board, t["id"], "completed")
    assert _reviews(ab.db, t["id"]) == 0


def test_stale_worker_is_stopped_and_requeued_without_counting_a_failure(ab, board, dispatcher, tmp_path):
    mark, pidfile = tmp_path / "second", tmp_path / "pid"
    # run 1 never heartbeats and hangs; run 2 reports at once
    ab.add_profile("quiet", command="sh -c " + shlex.quote(
        f"if [ -f {mark} ]; then echo '{{\"success\": true, \"summary\": \"ok\"}}' > .board/result.json; "
        f"else touch {mark}; echo $$ > {pidfile}; sleep 600; fi"))
    # max_retries 1: had the stale run counted as a failure, the task would be blocked (gave_up)
    t = board.create("goes quiet", assignee="quiet", max_retries=1)
    dispatcher(stale_timeout=1, stale_heartbeat=1)
    wait_for(lambda: all_in(board, [t["id"]], {"done", "blocked"}), what="the task settles")
    task = board.show(t["id"])
    assert task["status"] == "done"
    runs = board.runs(t["id"])
    assert [r["outcome"] for r in runs] == ["stale", "completed"]
    assert "no heartbeat" in runs[0]["error"]
    ev = events(board, t["id"], "stale")
    assert len(ev) == 1 and ev[0]["payload"]["failures"] == 0
    assert not events(board, t["id"], "gave_up")
    assert not liveness.pid_alive(int(pidfile.read_text()))


def test_free_memory_guard_spawns_nothing_and_says_why(ab, board, dispatcher):
    ab.add_profile("w", command=RESULT_OK)
    t = board.create("waits for memory", assignee="w")
    d = dispatcher(start=False, min_free_memory_mb=10**9)
    report = d.run_pass()
    d.run_pass()
    assert report["spawned"] == []
    assert any("free memory" in s["reason"] and "below" in s["reason"] for s in report["skipped"])
    assert board.show(t["id"])["status"] == "ready"
    assert board.runs(t["id"]) == []
    guarded = [e for e in events(board, kind="respawn_guarded") if "free memory" in e["payload"]["reason"]]
    assert len(guarded) == 1  # one event, not one per pass
    assert "not spawning" in guarded[0]["payload"]["reason"]
    # the guard, and only the guard, held it back
    ab.settings.min_free_memory_mb = 0
    d.start()
    wait_for(lambda: all_in(board, [t["id"]], {"done"}))


def test_task_reopened_by_an_agent_right_after_completing_waits_for_a_human_signal(ab, board, dispatcher):
    ab.add_profile("w", command=RESULT_OK)
    t = board.create("done once", assignee="w")
    d = dispatcher(start=False)
    wait_for(lambda: d.run_pass() and d.wait_idle() and all_in(board, [t["id"]], {"done"}))
    board.reopen(t["id"], reason="looks unfinished", actor="w")  # an agent (a profile) reopens it
    assert board.show(t["id"])["status"] == "ready"
    report = d.run_pass()
    d.run_pass()
    assert report["spawned"] == []
    assert any("reopened by an agent" in s.get("reason", "") for s in report["skipped"])
    guarded = events(board, t["id"], "respawn_guarded")
    assert len(guarded) == 1 and "without a new human signal" in guarded[0]["payload"]["reason"]
    assert len(board.runs(t["id"])) == 1
    # a person's comment is the new signal: it runs again
    from agentboard.kernel import comments

    comments.comment(ab.db, board.slug, t["id"], "yes, please run it again", author="alice")
    wait_for(lambda: d.run_pass() is not None and d.wait_idle() and all_in(board, [t["id"]], {"done"})
             and len(board.runs(t["id"])) == 2)
    assert [r["outcome"] for r in board.runs(t["id"])] == ["completed", "completed"]
