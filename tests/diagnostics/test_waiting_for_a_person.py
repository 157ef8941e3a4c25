"""Work that waits for a person while nothing else says so: a task the supervisor escalated after
its breaker tripped (its ``gave_up`` became ``needs_input``), and an agent CLI that could not sign
in (its runs block ``needs_input``; on the board's supervisor profile no supervision runs). Real
dispatcher, real worker processes: a crashing script, and Claude Code's recorded "Not logged in"
replayed by tests/fakes/replay_cli."""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

from dispatch.test_recordings import replay_cli, task_row
from testenv import wait_for

from agentboard.kernel import profiles as kprofiles
from agentboard.kernel import supervision
from agentboard.kernel import tasks as ktasks
from agentboard.kernel.diagnostics import diagnose


def _of(found: list[dict[str, Any]], kind: str, task: str | None = None) -> list[dict[str, Any]]:
    return [f for f in found if f["kind"] == kind and (task is None or f["task_id"] == task)]


def test_a_tripped_task_the_supervisor_escalated_is_found_waiting_for_a_person_and_unblocking_clears_it(
        ab: Any, board: Any, dispatcher: Any) -> None:
    ab.add_profile("crashy", command="sh -c 'exit 3'")
    t = board.create("always crashes", assignee="crashy")["id"]
    dispatcher(failure_limit=1)
    wait_for(lambda: task_row(board, t)["status"] == "blocked", timeout=120, what="the breaker to trip")
    assert task_row(board, t)["block_kind"] == "gave_up"
    assert _of(diagnose(ab.db, ["default"]), "gave_up", t)
    supervision.escalate(ab.db, "default", t, "decide whether the crash is the spec's fault", to="alice",
                         actor="supervisor:boss")
    assert task_row(board, t)["block_kind"] == "needs_input"  # the trip no longer shows as gave_up
    found = diagnose(ab.db, ["default"])
    assert not _of(found, "gave_up", t)
    (f,) = _of(found, "escalated", t)
    assert f["message"].startswith(f"{t} waits for a person (alice): the supervisor escalated it: ")
    assert "decide whether the crash is the spec's fault" in f["message"]
    assert "it had tripped its circuit breaker" in f["message"]
    assert f["fix"] == f"agentboard unblock {t}" and f["facts"]["tripped"] is True
    assert f["action"] == {"method": "PATCH", "path": f"/api/tasks/{t}", "body": {"status": "ready"}}
    # a task's own view says so too, and a long block is not reported twice
    assert _of(diagnose(ab.db, ["default"], task_id=t), "escalated", t)
    ab.settings.blocked_alert_hours = 0
    assert not _of(diagnose(ab.db, ["default"], now=time.time() + 10), "blocked_long", t)
    ktasks.unblock(ab.db, "default", t)
    assert not _of(diagnose(ab.db, ["default"]), "escalated", t)


def test_an_escalated_task_blocked_again_since_is_its_new_blocks_not_the_escalations(ab: Any, board: Any) -> None:
    ab.add_profile("w", command="true")
    t = board.create("asks", assignee="w")["id"]
    ktasks.block(ab.db, "default", t, "which region?", kind="manual")
    supervision.escalate(ab.db, "default", t, "a person must pick the region")
    (f,) = _of(diagnose(ab.db, ["default"]), "escalated", t)
    assert "waits for a person: the supervisor escalated it: " in f["message"] and "circuit breaker" not in f["message"]
    ktasks.unblock(ab.db, "default", t)
    ktasks.block(ab.db, "default", t, "the region is eu; now waiting for the key", kind="needs_input")
    assert not _of(diagnose(ab.db, ["default"]), "escalated", t)


def test_a_profile_whose_agent_cli_cannot_sign_in_is_found_with_its_key_and_check_and_a_good_login_clears_it(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    ab.add_profile("claude", adapter="claude", command=replay_cli(tmp_path, "claude", "claude-auth.jsonl"))
    supervision.set_supervisor(ab.db, "default", "claude")
    t = board.create("needs a login", assignee="claude")["id"]
    d = dispatcher(start=False)

    def blocked() -> bool:
        d.run_pass()
        return task_row(board, t)["status"] == "blocked"

    wait_for(blocked, timeout=120, what="the task to block")
    assert task_row(board, t)["block_kind"] == "needs_input"
    found = diagnose(ab.db, ["default"])
    (f,) = _of(found, "sign_in_failed")
    assert (f["concerns"], f["subject"], f["severity"]) == ("profile", "claude", "error")
    assert f["message"].startswith("profile 'claude': its agent CLI could not sign in on its last run")
    assert "Not logged in" in f["message"] and f"1 task(s) blocked by it: {t}" in f["message"]
    assert "supervisor profile of board(s) default: no supervision runs until it signs in" in f["message"]
    assert "set ANTHROPIC_API_KEY in its env (`agentboard profiles set claude --env ANTHROPIC_API_KEY=…`)" in f["fix"]
    assert "`agentboard profiles check claude --turn`" in f["fix"] and f"`agentboard unblock {t}`" in f["fix"]
    assert f["facts"]["key"] == "ANTHROPIC_API_KEY" and f["facts"]["tasks"] == [t]
    # the task's view holds its profile's finding
    assert _of(diagnose(ab.db, ["default"], task_id=t), "sign_in_failed")
    # signed in (here: a CLI that answers), the task unblocked and run again: nothing to report
    kprofiles.update(ab.db, "claude", command=replay_cli(tmp_path, "claude", "claude-success.jsonl"))
    ktasks.unblock(ab.db, "default", t)

    def done() -> bool:
        d.run_pass()
        return task_row(board, t)["status"] == "done"

    wait_for(done, timeout=120, what="the task to complete")
    assert not _of(diagnose(ab.db, ["default"]), "sign_in_failed")


def test_a_profile_that_signed_in_is_no_finding_and_a_plain_script_never_is(ab: Any, board: Any, dispatcher: Any,
                                                                             tmp_path: Path) -> None:
    ab.add_profile("script", command="sh -c " + shlex.quote("echo 'Not logged in'; exit 0"))
    t = board.create("says not logged in", assignee="script")["id"]
    dispatcher(failure_limit=1)
    wait_for(lambda: task_row(board, t)["status"] == "blocked", timeout=120, what="the task to block")
    assert not _of(diagnose(ab.db, ["default"]), "sign_in_failed")


def test_a_task_rate_limited_again_and_again_is_found_with_who_to_give_it_to(
        ab: Any, board: Any, dispatcher: Any) -> None:
    """The dispatcher resumes a rate-limited task by itself, later each time: a plan that is spent
    waits for a person, and diagnostics says so instead of "nothing wrong found"."""
    ab.add_profile("limited", command="sh -c " + shlex.quote("echo '429 usage limit reached' >&2; exit 75"))
    t = board.create("hits its plan's limit", assignee="limited")["id"]
    d = dispatcher(rate_limit_cooldown=0.5)  # waits of 0.5, 1 and 2 s
    wait_for(lambda: sum(r["outcome"] == "rate_limited" for r in board.runs(t)) >= 2, timeout=60,
             what="two rate limits")
    assert not _of(diagnose(ab.db, ["default"]), "rate_limited_again", t)  # two may be a passing limit
    wait_for(lambda: sum(r["outcome"] == "rate_limited" for r in board.runs(t)) >= 3
             and task_row(board, t)["block_kind"] == "rate_limited", timeout=60, what="a third, and its wait")
    d.stop()
    (f,) = _of(diagnose(ab.db, ["default"]), "rate_limited_again", t)
    n = f["facts"]["in_a_row"]
    assert n >= 3 and f"{t} was rate-limited {n} times in a row (limited)" in f["message"]
    assert f"agentboard assign {t} PROFILE" in f["message"] and f["fix"] == "agentboard profiles check limited --turn"
    ktasks.unblock(ab.db, "default", t)
    assert not _of(diagnose(ab.db, ["default"]), "rate_limited_again", t)
