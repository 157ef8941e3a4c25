"""A race attempt whose worker reported waits for that worker's exit (its usage comes with it)
before it counts as finished; a run the dispatcher closed itself, its worker gone (crashed after a
takeover, stale, timed out), waits for nothing: the race decides at once."""

from __future__ import annotations

import time

from agentboard.kernel import attempts

NOW = time.time()


def _run(n: int, outcome: str, *, exit_code: int | None, ended: float = NOW - 1) -> dict[str, object]:
    return {"id": n, "worker_pid": 4242 + n, "exit_code": exit_code, "outcome": outcome, "started_at": NOW - 60,
            "ended_at": ended, "summary": None, "input_tokens": None, "output_tokens": None, "cost_usd": None,
            "metadata": None}


DONE = {"status": "done", "completed_at": NOW - 1, "result": "did it"}


def test_an_attempt_whose_worker_reported_and_still_runs_is_running_until_its_exit_is_recorded() -> None:
    waiting = attempts.observed(DONE, [_run(1, "completed", exit_code=None)], checked=False, now=NOW)
    assert (waiting["state"], waiting["outcome"]) == ("running", None)
    exited = attempts.observed(DONE, [_run(1, "completed", exit_code=0)], checked=False, now=NOW)
    assert (exited["state"], exited["outcome"]) == ("finished", "done")
    late = attempts.observed(DONE, [_run(1, "completed", exit_code=None, ended=NOW - attempts.EXIT_WAIT - 1)],
                             checked=False, now=NOW)
    assert late["state"] == "finished"


def test_a_run_the_dispatcher_closed_as_crashed_does_not_hold_the_attempt_that_finished_after_it() -> None:
    runs = [_run(1, "crashed", exit_code=None), _run(2, "completed", exit_code=0)]
    seen = attempts.observed(DONE, runs, checked=False, now=NOW)
    assert (seen["state"], seen["outcome"]) == ("finished", "done")
