"""Wiring liveness: each protocol mechanism is reached from the real dispatcher's pass, and its
kill switch removes the effect. Deleting a call site (prepare, after_exit, the repair branch,
verification, on_review_entered, the wiki lookup) turns one of these assertions red."""

from __future__ import annotations

import dataclasses
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from testenv import copy_template

from agentboard.kernel import wiki

from .helpers import FAKE_AGENT

MODES = ("ok", "malformed_then_fix", "no_evidence")


@pytest.fixture
def client(home: Path, sqlite_template: Path) -> Iterator[Any]:
    import agentboard

    ab = agentboard.connect(str(copy_template(sqlite_template, home)))
    try:
        yield ab
    finally:
        ab.close()


def _setup(ab: Any, tmp_path: Path) -> dict[str, Any]:
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE_AGENT))} {{prompt_file}}"
    for mode in MODES:
        ab.add_profile(f"fake-{mode.replace('_', '-')}", command=cmd, env={"FAKE_AGENT_MODE": mode})
    wiki.add(ab.db, "default", "release-process", title="Release process",
             body="Tag the release, then publish the changelog to the mirror.", publish=True)
    b = ab.board()
    ws = {name: tmp_path / name for name in ("wiki", "repair", "verify", "review")}
    for p in ws.values():
        p.mkdir()
    tasks = {
        "wiki": b.create("publish the changelog for the release", assignee="fake-ok",
                         workspace=f"dir:{ws['wiki']}"),
        "repair": b.create("fix the parser", assignee="fake-malformed-then-fix", workspace=f"dir:{ws['repair']}"),
        "verify": b.create("produce out.txt", assignee="fake-no-evidence", workspace=f"dir:{ws['verify']}",
                           verify=["test -f out.txt"], max_retries=1),
        "review": b.create("write the summary", assignee="fake-ok", workspace=f"dir:{ws['review']}", review=True),
    }
    return {"board": b, "ws": ws, "tasks": tasks}


def _drive(ab: Any, settings: Any, done: Callable[[], bool]) -> None:
    """Run dispatcher passes until ``done()`` (a generous cap, not a speed assertion)."""
    from agentboard.api.serve import WorkerAPI, run_tokens
    from agentboard.dispatch.dispatcher import Dispatcher

    api = WorkerAPI(settings, ab.db).start()
    d = Dispatcher(ab.db, settings, api_url=api.url, token_factory=run_tokens(ab.db))
    deadline = time.monotonic() + 120
    try:
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError("the dispatcher did not settle the tasks")
            d.run_pass()
            d.wait_idle(30)
            time.sleep(0.1)
    finally:
        d.stop()
        api.stop()


def _kinds(board: Any, task_id: str) -> list[str]:
    return [e["kind"] for e in board.events(task_id=task_id, limit=100000)]


def _settled(board: Any, tasks: dict[str, Any]) -> Callable[[], bool]:
    def check() -> bool:
        st = {k: board.show(t["id"])["status"] for k, t in tasks.items()}
        return all(s not in ("ready", "running", "todo") for s in st.values())
    return check


def test_mechanisms_are_live_in_the_dispatch_path(client: Any, tmp_path: Path) -> None:
    env = _setup(client, tmp_path)
    b, ws, tasks = env["board"], env["ws"], env["tasks"]
    settings = dataclasses.replace(client.settings, spawn_grace=0.2)
    _drive(client, settings, _settled(b, tasks))
    # wiki: the relevant page reached the workspace
    assert (ws["wiki"] / ".board" / "wiki" / "release-process.md").exists()
    assert b.show(tasks["wiki"]["id"])["status"] == "done"
    # repair: the malformed result was repaired on the second attempt
    assert "## Repair Attempt 1" in (ws["repair"] / ".board" / "history.md").read_text()
    assert b.show(tasks["repair"]["id"])["status"] == "done"
    # verification: a success without evidence was refused
    assert "verify_failed" in _kinds(b, tasks["verify"]["id"])
    assert b.show(tasks["verify"]["id"])["status"] == "blocked"
    # review: no LLM configured, so the task waits and an event says so
    assert b.show(tasks["review"]["id"])["status"] == "review"
    assert "review_unavailable" in _kinds(b, tasks["review"]["id"])
    assert "approved" not in _kinds(b, tasks["review"]["id"])


def test_kill_switches_remove_each_effect(client: Any, tmp_path: Path) -> None:
    env = _setup(client, tmp_path)
    b, ws, tasks = env["board"], env["ws"], env["tasks"]
    settings = dataclasses.replace(client.settings, spawn_grace=0.2, wiki_context=False, board_repair=False,
                                   verify=False, reviewer_agent="off")
    _drive(client, settings, _settled(b, tasks))
    assert not (ws["wiki"] / ".board" / "wiki" / "release-process.md").exists()
    assert "No wiki pages available" in (ws["wiki"] / ".board" / "wiki" / "INDEX.md").read_text()
    assert "Repair Attempt" not in (ws["repair"] / ".board" / "history.md").read_text()
    assert b.show(tasks["repair"]["id"])["status"] == "review"  # degraded at once
    assert "result_degraded" in _kinds(b, tasks["repair"]["id"])
    assert "verify_failed" not in _kinds(b, tasks["verify"]["id"])
    verify_run = b.show(tasks["verify"]["id"])["runs"][-1]
    assert b.show(tasks["verify"]["id"])["status"] == "done" and verify_run["metadata"]["verification"]["skipped"]
    review_events = [e for e in b.events(task_id=tasks["review"]["id"], limit=1000) if e["kind"] == "review_unavailable"]
    assert b.show(tasks["review"]["id"])["status"] == "review"
    assert review_events and "turned off" in review_events[0]["payload"]["reason"]
