"""A worker whose run closed before it exited: one that reported has a grace to exit, but still
holds its shared folder meanwhile (the next task there waits for its process, not only for its
run); one whose run a person closed (block, complete) is stopped at once."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from agentboard.dispatch.liveness import pid_alive
from agentboard.dispatch.reaping import REPORTED_GRACE

from .conftest import wait_for


def _journal(path: Path) -> list[tuple[str, str, float]]:
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        what, task, at = line.split()
        out.append((what, task, float(at)))
    return out


def test_the_next_task_in_a_shared_folder_waits_for_the_process_of_one_that_reported_and_went_on(
        ab, board, dispatcher, tmp_path):
    folder, journal = tmp_path / "shared", tmp_path / "journal"
    folder.mkdir()
    note = f'echo "$1 $AGENTBOARD_TASK $(date +%s.%N)" >> {journal}'
    # the first reports at once, then goes on working in the folder for a few seconds and leaves a
    # result file there; the second only notes when it ran
    first = ("n() { " + note + "; }; n begin; agentboard complete --summary 'A reported' "
             ">/dev/null; sleep 4; echo '{\"success\": true, \"summary\": \"written by A\"}' > .board/result.json; "
             "n end")
    second = ("n() { " + note + "; }; n begin; sleep 1; "
              "echo '{\"success\": true, \"summary\": \"written by B\"}' > .board/result.json; n end")
    ab.add_profile("a", command="sh -c " + shlex.quote(first))
    ab.add_profile("b", command="sh -c " + shlex.quote(second))
    a = board.create("A", assignee="a", workspace=f"dir:{folder}", priority=10)
    b = board.create("B", assignee="b", workspace=f"dir:{folder}")
    dispatcher(dispatch_interval=0.5)
    wait_for(lambda: board.show(b["id"])["status"] == "done", timeout=60, what="B done")
    seen = _journal(journal)
    a_end = next(at for what, task, at in seen if (what, task) == ("end", a["id"]))
    b_begin = next(at for what, task, at in seen if (what, task) == ("begin", b["id"]))
    assert b_begin >= a_end, seen  # B never worked in the folder while A's process did
    runs = board.runs(b["id"])
    assert [r["summary"] for r in runs if r["outcome"] == "completed"] == ["written by B"], runs
    kinds = ab.db.read(lambda tx: tx.all("SELECT kind FROM task_events WHERE task_id = :t", {"t": b["id"]}))
    assert "workspace_busy" in {k["kind"] for k in kinds}, "B said why it waited"


def _busy_agent(journal: Path) -> str:
    return "sh -c " + shlex.quote(f"while true; do date +%s.%N >> {journal}; sleep 0.2; done")


def test_a_person_blocking_or_completing_a_running_task_stops_its_worker_at_once(ab, board, dispatcher, tmp_path):
    dispatcher(dispatch_interval=0.5)
    for verb in ("block", "complete"):
        journal = tmp_path / f"{verb}.journal"
        ab.add_profile(f"busy-{verb}", command=_busy_agent(journal))
        t = board.create(f"{verb} me", assignee=f"busy-{verb}")
        wait_for(lambda t=t: board.runs(t["id"]) and board.runs(t["id"])[0]["worker_pid"], what="the worker")
        pid = int(board.runs(t["id"])[0]["worker_pid"])
        wait_for(journal.exists, what="the worker at work")
        if verb == "block":
            board.block(t["id"], "stop, the spec changed")
        else:
            board.complete(t["id"], summary="done by hand")
        closed = time.time()
        # stopped well within the grace a worker that reported itself gets
        wait_for(lambda pid=pid: not pid_alive(pid), timeout=REPORTED_GRACE - 10, what=f"the worker stopped after {verb}")
        wait_for(lambda journal=journal: journal.stat().st_mtime < time.time() - 1, what="the journal quiet")
        assert float(journal.read_text().split()[-1]) < closed + REPORTED_GRACE - 10


def test_a_report_the_board_cannot_take_is_kept_in_the_workspace_and_applied_by_the_next_dispatcher(
        ab, board, tmp_path):
    """The dispatcher stopped (its workers' API with it) as a worker reports, and starts again
    only after the report's 30 s of trying: the report is kept as .board/result.json, the worker
    stops, and the next dispatcher completes the task with it: one run, not a crash counted."""
    from agentboard.remote import RETRY_FOR

    from .test_processes import _start_dispatcher, _stop

    said = tmp_path / "said"
    ab.add_profile("late", command="sh -c " + shlex.quote(
        f"sleep 2; agentboard complete --summary 'done, late' --result 'answer 42' > {said} 2>&1; "
        f"echo exit $? >> {said}"))
    t = board.create("report late", assignee="late")
    first = _start_dispatcher(ab, tmp_path, "first")
    wait_for(lambda: board.runs(t["id"]) and board.runs(t["id"])[0]["worker_pid"], timeout=60, what="the worker")
    _stop(first)  # SIGTERM: its workers go on, its API is gone
    wait_for(lambda: "\nexit " in (said.read_text() if said.exists() else ""), timeout=RETRY_FOR + 30,
             what="the worker's report to give up on the board")
    out = said.read_text()
    assert "exit 0" in out and "kept in" in out and "result.json" in out, out
    second = _start_dispatcher(ab, tmp_path, "second")
    try:
        wait_for(lambda: board.show(t["id"])["status"] == "done", timeout=60, what="the task done")
    finally:
        _stop(second)
    runs = board.runs(t["id"])
    assert [(r["outcome"], r["summary"]) for r in runs] == [("completed", "done, late")], runs
    assert board.show(t["id"])["consecutive_failures"] == 0
    assert board.show(t["id"])["result"] == "answer 42"  # the one-line result is kept with the report


def test_a_worker_that_hangs_every_time_is_given_up_on_after_three_hung_runs(ab, board, dispatcher):
    from agentboard.dispatch.reaping import STALE_LIMIT

    ab.add_profile("hangs", command="sleep 100000")
    t = board.create("hangs forever", assignee="hangs")
    dispatcher(dispatch_interval=0.3, stale_timeout=1.0, stale_heartbeat=0.5)
    wait_for(lambda: board.show(t["id"])["status"] == "blocked", timeout=90, what="the task given up on")
    shown = board.show(t["id"])
    assert shown["block_kind"] == "gave_up" and f"hung {STALE_LIMIT} times in a row" in shown["block_reason"]
    assert f"agentboard log {t['id']}" in shown["block_reason"]
    runs = board.runs(t["id"])
    assert [r["outcome"] for r in runs] == ["stale"] * STALE_LIMIT, runs
    assert shown["consecutive_failures"] == 0  # a hang is still not a counted failure
    assert not any(pid_alive(r["worker_pid"]) for r in runs if r["worker_pid"])
