"""``log_max_bytes`` bounds what a run leaves in its log: a worker that prints faster than the
dispatcher looks (a burst, then exit) has its log cut back when its exit is handled, by a
long-running dispatcher and by a one-shot pass alike."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from agentboard.api.serve import WorkerAPI

from .conftest import all_in, events, wait_for
from .test_processes import _env

CAP = 100_000
BURST = "sh -c " + shlex.quote(
    "head -c 20000000 /dev/zero | tr '\\0' y; echo; echo the-last-line; "
    "echo '{\"success\": true, \"summary\": \"printed a lot\"}' > .board/result.json")


def _log(ab, task_id: str) -> Path:
    return Path(ab.settings.home) / "boards" / "default" / "logs" / f"{task_id}.log"


def _within_the_cap(ab, board, task_id: str) -> None:
    text = _log(ab, task_id).read_text()
    assert len(text) <= CAP, f"the log is {len(text)} bytes, the cap {CAP}"
    assert f"this run's output passed log_max_bytes ({CAP} bytes)" in text
    assert text.rstrip().endswith("the-last-line")
    capped = events(board, task_id, "log_capped")
    assert len(capped) == 1 and capped[0]["payload"]["max_bytes"] == CAP


def test_a_worker_printing_a_burst_leaves_its_log_within_the_cap_after_its_exit(ab, board, dispatcher):
    ab.add_profile("burst", command=BURST)
    t = board.create("print a burst", assignee="burst")
    dispatcher(log_max_bytes=CAP)
    wait_for(lambda: all_in(board, [t["id"]], {"done"}), what="the run judged")
    # its result may be read before its exit is handled: the log is cut when its exit is
    wait_for(lambda: board.runs(t["id"])[0].get("exit_code") is not None, what="the worker's exit recorded")
    _within_the_cap(ab, board, t["id"])


def test_a_one_shot_pass_cuts_a_burst_worker_s_log_within_the_cap_when_it_handles_its_exit(ab, board):
    """`agentboard dispatch` with a live API on the home (cron beside `serve`): one pass starts
    the worker and returns; the pass that finds it gone cuts its log before closing its run."""
    ab.add_profile("burst", command=BURST)
    t = board.create("print a burst", assignee="burst")
    env = _env(ab, AGENTBOARD_LOG_MAX_BYTES=CAP)
    with WorkerAPI(ab.settings, ab.db):  # the home's API, as a `serve` would record it
        subprocess.run([sys.executable, "-m", "agentboard", "dispatch"], env=env, check=True, capture_output=True)
        run_id = int(wait_for(lambda: board.runs(t["id"]) and board.runs(t["id"])[0]["id"], what="the run"))
        exit_file = _log(ab, t["id"]).with_name(f"{t['id']}.run{run_id}.exit")
        wait_for(exit_file.exists, timeout=60, what="the worker's exit status written")
        subprocess.run([sys.executable, "-m", "agentboard", "dispatch"], env=env, check=True, capture_output=True)
    assert all_in(board, [t["id"]], {"done"})
    _within_the_cap(ab, board, t["id"])
