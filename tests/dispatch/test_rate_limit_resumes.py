"""A rate limit is the dispatcher's own timed block: it is not a failure, it does not wipe out the
failures before it, and it never counts towards a block loop (the task stays in the unattended
flow, resumed by the dispatcher each time its cool-down ends)."""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

from agentboard.kernel import dispatching, tasks

from .conftest import events, wait_for

B = "default"


def _outcomes(board: Any, task_id: str) -> list[str | None]:
    return [r["outcome"] for r in board.runs(task_id)]


def test_a_task_rate_limited_again_and_again_is_resumed_every_time_and_never_parked_in_triage(
        ab: Any, board: Any, dispatcher: Any) -> None:
    ab.add_profile("limited", command="sh -c " + shlex.quote(
        "echo 'Error: 429 rate limit exceeded, usage limit reached' >&2; exit 75"))
    t = board.create("hits its plan's limit", assignee="limited")["id"]
    d = dispatcher(rate_limit_cooldown=0.3)  # block_loop_limit stays the default 3
    wait_for(lambda: _outcomes(board, t).count("rate_limited") >= 6, timeout=60,
             what="six rate-limited runs")
    d.stop()
    task = board.show(t)
    assert task["status"] != "triage", task["block_reason"]
    assert events(board, t, "block_loop_detected") == []
    assert task["consecutive_failures"] == 0  # a rate limit is not a failure
    # each cool-down's end resumed it, by the dispatcher, with nothing a person had to do
    resumed = [e for e in events(board, t, "unblocked") if e["actor"] == "dispatcher"]
    assert len(resumed) >= 5 and all(e["payload"]["resumed"] == "rate_limited" for e in resumed)


def test_an_agent_alternating_crashes_and_rate_limits_still_reaches_its_failure_limit(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    count = tmp_path / "count"
    script = tmp_path / "flaky.sh"
    script.write_text(
        f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}\n"
        "if [ $((n % 2)) -eq 1 ]; then echo \"crash $n\" >&2; exit 1; "
        "else echo '429 rate limited' >&2; exit 75; fi\n")
    ab.add_profile("flaky", command=f"sh {shlex.quote(str(script))}")
    t = board.create("flaky", assignee="flaky")["id"]
    d = dispatcher(rate_limit_cooldown=0.3, failure_limit=2)
    task = wait_for(lambda: (x := board.show(t))["block_kind"] == "gave_up" and x, timeout=60,
                    what="the breaker giving up")
    d.stop()
    # crash, rate limit (not counted, and not a reset either), crash: the limit of 2 is reached
    assert _outcomes(board, t) == ["crashed", "rate_limited", "crashed"]
    assert task["status"] == "blocked" and task["consecutive_failures"] == 2
    assert "2 consecutive failures" in task["block_reason"]


def test_the_dispatchers_resume_keeps_the_failure_count_and_a_persons_unblock_resets_it(ab: Any, board: Any) -> None:
    from agentboard.kernel import runs

    t = board.create("limited", assignee="w")["id"]
    claim = board.claim(t)
    runs.fail(ab.db, B, t, "crashed", run_id=claim["run_id"], error="boom")
    claim = board.claim(t)
    until = time.time() + 60
    tasks.block(ab.db, B, t, "rate limit", kind="rate_limited", run_id=claim["run_id"], until=until)
    assert board.show(t)["consecutive_failures"] == 1
    (resumed,) = dispatching.resume_timed_blocks(ab.db, [B], now=until + 1)
    task = board.show(t)
    assert (resumed["id"], task["status"], task["block_kind"], task["cooldown_until"]) == (t, "ready", None, None)
    assert task["consecutive_failures"] == 1
    # a person's unblock is a fresh start, as ever
    claim = board.claim(t)
    tasks.block(ab.db, B, t, "rate limit", kind="rate_limited", run_id=claim["run_id"], until=time.time() + 60)
    board.unblock(t, actor="alice")
    assert board.show(t)["consecutive_failures"] == 0


def test_blocks_the_board_lifts_by_itself_do_not_count_towards_a_block_loop(ab: Any, board: Any) -> None:
    t = board.create("waits for its quota", assignee="w")["id"]
    for _ in range(4):  # the default block_loop_limit is 3
        claim = board.claim(t)
        until = time.time() + 60
        out = tasks.block(ab.db, B, t, "rate limit; the dispatcher resumes the task at …", kind="rate_limited",
                          run_id=claim["run_id"], until=until)
        assert (out["status"], out["block_kind"]) == ("blocked", "rate_limited")
        dispatching.resume_timed_blocks(ab.db, [B], now=until + 1)
    # nor do they make a person's blocks trip it sooner: three of those are still within the limit
    for i in range(3):
        assert board.block(t, f"needs a decision {i}", kind="needs_input", actor="alice")["status"] == "blocked"
        board.unblock(t, actor="alice")
    assert events(board, t, "block_loop_detected") == []
    # the fourth is a loop: triage, with nothing left that says the dispatcher will resume it
    out = board.block(t, "needs a decision again", kind="needs_input", actor="alice")
    task = board.show(t)
    assert (out["status"], task["status"]) == ("triage", "triage")
    assert task["cooldown_until"] is None and "dispatcher resumes" not in (task["block_reason"] or "")
    (loop,) = events(board, t, "block_loop_detected")
    assert loop["payload"]["count"] == 4


def test_each_rate_limit_in_a_row_doubles_the_wait_up_to_six_hours(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    """An agent refused every time costs a start every few hours at worst, not every cool-down."""
    from agentboard.kernel import runs

    ab.add_profile("limited", command="sh -c " + shlex.quote("echo '429 rate limit exceeded' >&2; exit 75"))
    t = board.create("hits its plan's limit", assignee="limited")["id"]
    d = dispatcher(rate_limit_cooldown=0.5)
    wait_for(lambda: len(events(board, t, "blocked")) >= 3, timeout=60, what="three rate limits")
    d.stop()
    waits = [e["payload"]["until"] - e["created_at"] for e in events(board, t, "blocked")[:3]]
    assert [round(w * 2) / 2 for w in waits] == [0.5, 1.0, 2.0], waits
    assert "doubled for each of the 2 rate limit(s) in a row" in events(board, t, "blocked")[2]["payload"]["reason"]
    assert runs.rate_limit_backoff(300, 10) == runs.RATE_LIMIT_BACKOFF_MAX  # never more than six hours
    assert runs.rate_limit_backoff(86_400, 3) == 86_400  # unless the setting itself is longer
