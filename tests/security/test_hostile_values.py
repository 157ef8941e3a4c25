"""Values a worker controls that no reader may trust: the usage it reports (a negative cost would
give its budget back, an infinite one spend it for good) and JSON nested deeper than a parser
follows (which raised ``RecursionError`` out of every reader and kept its run unjudged)."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any

import pytest
from api.conftest import start_api
from testenv import wait_for

from agentboard.dispatch.dispatcher import Dispatcher
from agentboard.dispatch.runtime import Jobs, WorkerRegistry
from agentboard.domain.errors import InvalidInput
from agentboard.kernel import budgets, runs, tokens
from agentboard.protocol import result, safefs

DEEP = "[" * 200_000 + "]" * 200_000


@pytest.mark.parametrize("usage", [
    {"cost_usd": -5000}, {"input_tokens": -1}, {"output_tokens": -5},
    {"cost_usd": math.inf}, {"cost_usd": -math.inf}, {"cost_usd": math.nan},
    {"input_tokens": math.inf}, {"cost_usd": True}, {"cost_usd": "lots"},
], ids=["negative cost", "negative input", "negative output", "infinite cost", "minus infinity",
        "nan", "infinite tokens", "a boolean", "a word"])
def test_a_completion_reporting_usage_that_is_not_a_finite_count_is_refused_and_changes_nothing(
        board: Any, ab: Any, usage: dict[str, Any]) -> None:
    budgets.set_budget(ab.db, "board", "default", budgets.Limits.build(max_cost=10.0))
    t = board.create("spend", assignee="w")
    run = runs.claim(ab.db, "default", t["id"])
    with pytest.raises(InvalidInput, match=r"usage\.\w+ must be a finite number >= 0"):
        runs.complete(ab.db, "default", t["id"], summary="done", run_id=run["run_id"], usage=usage)
    assert board.show(t["id"])["status"] == "running"
    (shown,) = budgets.show(ab.db, scope="board", ref="default")
    assert shown["spent"]["cost"] == 0 and shown["spent"]["tokens"] == 0, shown


def test_the_api_answers_400_to_a_worker_reporting_a_negative_or_infinite_cost(ab: Any, board: Any) -> None:
    t = board.create("spend", assignee="w")
    run = runs.claim(ab.db, "default", t["id"])
    with start_api(ab) as api:
        worker = api.client(tokens.create_run_token(ab.db, "default", t["id"], run["run_id"]))
        for body in ('{"summary": "x", "usage": {"cost_usd": -5000}}',
                     '{"summary": "x", "usage": {"cost_usd": Infinity}}'):
            r = worker.post(f"/api/tasks/{t['id']}/complete", content=body,
                            headers={"Content-Type": "application/json"})
            assert r.status_code == 400, r.text
            assert r.json()["error"]["code"] == "invalid_input"
            assert "cost_usd" in r.json()["error"]["message"]
        assert board.show(t["id"])["status"] == "running"
        done = worker.post(f"/api/tasks/{t['id']}/complete", json={"summary": "x", "usage": {"cost_usd": 0.5}})
        assert done.status_code == 200


def test_a_workers_heartbeats_keep_a_short_note_and_extend_its_claim_by_a_day_at_most(ab: Any, board: Any) -> None:
    """A looping agent's 64 KiB notes grew the database by 175 MB in 20 s, and a claim it set for
    three years kept its task from anyone else had its host died."""
    import time

    from agentboard.kernel.runs.claims import NOTE_MAX, WORKER_TTL_MAX

    t = board.create("beat", assignee="w")
    run = runs.claim(ab.db, "default", t["id"])
    with start_api(ab) as api:
        worker = api.client(tokens.create_run_token(ab.db, "default", t["id"], run["run_id"]))
        r = worker.post(f"/api/tasks/{t['id']}/heartbeat", json={"note": "x" * 65_000, "ttl": 100_000_000})
        assert r.status_code == 200, r.text
    (beat,) = [e for e in board.events(0, limit=1000) if e["kind"] == "heartbeat"]
    note = beat["payload"]["note"]
    assert len(note) == NOTE_MAX and note.endswith("…")
    assert float(board.show(t["id"])["claim_expires"]) <= time.time() + WORKER_TTL_MAX


@pytest.mark.parametrize("text, error", [
    ('{"success": true, "summary": "x", "usage": {"cost_usd": Infinity}}', "Infinity is not a number"),
    ('{"success": true, "summary": "x", "usage": {"cost_usd": NaN}}', "NaN is not a number"),
    (DEEP, "nested too deeply"),
    ('{"success": true, "summary": ' + DEEP + "}", "nested too deeply"),
])
def test_a_result_file_with_a_non_number_or_nested_too_deep_is_an_invalid_result_not_a_crash(
        text: str, error: str) -> None:
    parsed = result.parse_text(text)
    assert parsed.exists and parsed.data is None
    assert any(error in e for e in parsed.errors), parsed.errors


def test_json_a_worker_wrote_reads_as_a_value_error_whatever_it_holds() -> None:
    assert safefs.loads('{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}
    for bad in (DEEP, '{"a": Infinity}', "[-Infinity]", "NaN", "{", b"\xff"):
        with pytest.raises(ValueError):
            safefs.loads(bad)


def _run_to_the_end(ab: Any, task_id: str, *, timeout: float = 60) -> None:
    d = Dispatcher(ab.db, ab.settings)
    try:
        d.run_pass()
        wait_for(lambda: d.run_pass() is not None and ab.board().show(task_id)["status"] != "running",
                 timeout=timeout, what="the run judged")
    finally:
        d.stop()


def test_a_result_nested_too_deep_is_judged_like_any_invalid_result(ab: Any, tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    ab.add_profile("nester", command="sh -c " + shlex.quote(f"cp {deep} .board/result.json"))
    ab.settings.stop_nudge = False
    t = ab.board().create("nest the result", assignee="nester")
    _run_to_the_end(ab, t["id"])
    events = ab.board().events(0, task_id=t["id"])
    invalid = [e["payload"]["errors"] for e in events if e["kind"] == "result_invalid"]
    assert invalid and all(errors == ["$: not valid JSON: nested too deeply to read"] for errors in invalid)
    # the repair loop ran its course and handed the task to a person, as for any invalid result
    assert ab.board().show(t["id"])["status"] == "review"
    (degraded,) = [e for e in events if e["kind"] == "result_degraded"]
    assert degraded["payload"]["summary"] == "(the worker left no result and no output to summarize)"


def test_a_mcp_json_nested_too_deep_in_a_shared_folder_is_replaced_and_the_next_task_starts(
        ab: Any, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / ".mcp.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    ab.add_profile("plain", command="sh -c " + shlex.quote(
        "echo '{\"success\": true, \"summary\": \"started\"}' > .board/result.json"))
    t = ab.board().create("after the planted file", assignee="plain", workspace=f"dir:{shared}")
    _run_to_the_end(ab, t["id"])
    assert ab.board().show(t["id"])["status"] == "done"
    servers = json.loads((shared / ".mcp.json").read_text())["mcpServers"]
    assert "agentboard" in servers


def test_a_job_that_keeps_failing_for_a_run_is_tried_again_after_a_growing_pause_not_at_every_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from agentboard.dispatch import runtime

    now = [1000.0]
    monkeypatch.setattr(runtime, "time", type("Clock", (), {"monotonic": staticmethod(lambda: now[0])}))
    calls: list[float] = []

    def failing() -> None:
        calls.append(now[0])
        raise RecursionError("what no reader expected")

    jobs = Jobs(WorkerRegistry(), wake=lambda: None)
    try:
        for _ in range(70):  # a pass every 0.1 s for 7 s
            jobs.submit(7, failing)
            jobs.drain()
            now[0] += 0.1
        # at once, then after 1 s, 2 s and 4 s: four attempts, not seventy
        assert [round(c - 1000.0, 1) for c in calls] == [0.0, 1.0, 3.0, 7.0][:len(calls)]
        assert len(calls) == 3
        ran = []
        jobs.submit(8, lambda: ran.append(8))  # another run is not held back
        jobs.drain()
        assert ran == [8]
        now[0] += 60
        jobs.submit(7, lambda: ran.append(7))  # once it works, the pause is forgotten
        jobs.drain()
        jobs.submit(7, lambda: ran.append(7))
        jobs.drain()
        assert ran == [8, 7, 7]
    finally:
        jobs.drain()


def test_a_worker_printing_without_end_keeps_its_log_near_log_max_bytes(ab: Any, tmp_path: Path) -> None:
    """The worker writes its log itself: a run that prints 8 MiB against a 1 MiB cap has it cut
    back while it runs — its first part, a line saying so, and what it printed last — and the
    task's timeline says so once."""
    ab.settings.log_max_bytes = 1024 * 1024
    go = tmp_path / "go"
    script = ("for i in 1 2 3 4 5 6 7 8; do head -c 1048576 /dev/zero | tr '\\0' 'A'; echo; done; "
              f"echo the-last-line; while [ ! -e {go} ]; do sleep 0.05; done; "
              "echo '{\"success\": true, \"summary\": \"printed a lot\"}' > .board/result.json")
    ab.add_profile("printer", command="sh -c " + shlex.quote(script))
    t = ab.board().create("print a lot", assignee="printer")
    log = Path(ab.settings.home) / "boards" / "default" / "logs" / f"{t['id']}.log"
    d = Dispatcher(ab.db, ab.settings)
    try:
        d.run_pass()
        wait_for(lambda: log.exists() and "the-last-line" in log.read_text()[-200:] and d.run_pass() is not None
                 and log.stat().st_size < 2 * 1024 * 1024, timeout=60, what="the log cut back with its last line")
        go.write_text("")
        wait_for(lambda: d.run_pass() is not None and ab.board().show(t["id"])["status"] == "done",
                 timeout=60, what="the run judged")
    finally:
        d.stop()
    text = log.read_text()
    assert len(text) < 1.5 * 1024 * 1024
    assert "this run's output passed log_max_bytes (1048576 bytes)" in text
    assert text.rstrip().endswith("the-last-line")
    capped = [e for e in ab.board().events(0, task_id=t["id"]) if e["kind"] == "log_capped"]
    assert len(capped) == 1 and capped[0]["payload"]["max_bytes"] == 1024 * 1024
