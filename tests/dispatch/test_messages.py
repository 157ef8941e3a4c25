"""Messages to a running worker: a comment reaches a real running worker through the MCP tool,
the heartbeat verb and .board/inbox.md; a worker that stops without reporting is nudged once."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import events, wait_for

pytestmark = pytest.mark.xdist_group("dispatch-messages")

LISTENER = r'''
import json, os, subprocess, sys, time
from pathlib import Path

out = Path(sys.argv[1])
inbox = Path(".board/inbox.md")

def wait_inbox(text):
    deadline = time.time() + 120
    while time.time() < deadline:
        if inbox.exists() and text in inbox.read_text():
            return
        time.sleep(0.1)
    sys.exit(3)

(out / "started").write_text(os.environ["AGENTBOARD_TASK"])
wait_inbox("first: use the v2 API")

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

async def ask_inbox():
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentboard", "mcp"], env=dict(os.environ))
    async with Client(params, read_timeout_seconds=60) as client:
        res = await client.call_tool("kanban_inbox", {})
        return res.structured_content or json.loads(res.content[0].text)

(out / "mcp.json").write_text(json.dumps(anyio.run(ask_inbox)))
wait_inbox("second: also update the docs")
hb = subprocess.run([sys.executable, "-m", "agentboard", "heartbeat", "--json"], capture_output=True, text=True)
(out / "heartbeat.json").write_text(hb.stdout or hb.stderr)
subprocess.run([sys.executable, "-m", "agentboard", "complete", "--summary", "used v2, docs updated"], check=True)
'''

NUDGED = r'''
import subprocess, sys
from pathlib import Path
prompt = Path(sys.argv[1]).read_text()
if "You stopped without reporting" not in prompt:
    sys.exit(0)  # the first time: stop without a word
subprocess.run([sys.executable, "-m", "agentboard", "complete", "--summary", "finished after the reminder"],
               check=True)
'''


def script(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_running_worker_reads_comments_through_mcp_heartbeat_and_its_inbox_file(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    worker = script(tmp_path, "listener.py", LISTENER)
    ab.add_profile("listener", command=f"{shlex.quote(sys.executable)} {worker} {out}")
    t = board.create("migrate the client", assignee="listener")
    dispatcher()
    wait_for(lambda: (out / "started").exists(), what="the worker to start")
    board.comment(t["id"], "first: use the v2 API", author="alice")
    got = json.loads(wait_for(lambda: (out / "mcp.json").exists() and (out / "mcp.json").read_text(),
                              what="the worker's kanban_inbox call"))
    assert [m["body"] for m in got["messages"]] == ["first: use the v2 API"]
    assert got["messages"][0]["author"] == "alice"
    board.comment(t["id"], "second: also update the docs", author="bob")
    hb = json.loads(wait_for(lambda: (out / "heartbeat.json").exists() and (out / "heartbeat.json").read_text(),
                             what="the worker's heartbeat"))
    assert [m["body"] for m in hb["messages"]] == ["second: also update the docs"]  # the first was read already
    wait_for(lambda: board.show(t["id"])["status"] == "done", what="the task to be done")
    run = board.runs(t["id"])[-1]
    inbox_file = Path(run["workspace_path"]) / ".board" / "inbox.md"
    text = inbox_file.read_text()
    assert "first: use the v2 API" in text and "second: also update the docs" in text
    assert text.count("first: use the v2 API") == 1
    assert "kanban_inbox" in (Path(run["workspace_path"]) / ".board" / "prompt.md").read_text()


def test_a_worker_that_stops_without_reporting_is_nudged_once_then_finishes(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    worker = script(tmp_path, "nudged.py", NUDGED)
    ab.add_profile("quiet", command=f"{shlex.quote(sys.executable)} {worker} {{prompt_file}}")
    t = board.create("do the thing", assignee="quiet")
    dispatcher()
    wait_for(lambda: board.show(t["id"])["status"] == "done", what="the nudged worker to finish")
    runs = board.runs(t["id"])
    assert len(runs) == 1 and runs[0]["outcome"] == "completed"
    assert runs[0]["summary"] == "finished after the reminder"
    assert len(events(board, t["id"], "nudged")) == 1


def test_a_worker_that_stops_twice_without_reporting_is_a_protocol_violation(
        ab: Any, board: Any, dispatcher: Any) -> None:
    ab.add_profile("silent", command="true")
    t = board.create("say nothing", assignee="silent")
    dispatcher(failure_limit=1)
    wait_for(lambda: board.show(t["id"])["status"] == "blocked", what="the task to be blocked")
    runs = board.runs(t["id"])
    assert runs[0]["outcome"] == "protocol_violation"
    assert len(events(board, t["id"], "nudged")) == 1


def test_a_pass_opens_the_inbox_files_of_only_the_running_tasks_with_new_comments(
        ab: Any, board: Any, dispatcher: Any) -> None:
    from agentboard.dispatch.liveness import group_has_live

    ab.add_profile("sleeper", command="sh -c 'sleep 300'")
    ids = [board.create(f"work {i}", assignee="sleeper")["id"] for i in range(3)]
    d = dispatcher(start=False)
    assert len(d.run_pass()["spawned"]) == 3
    d.run_pass()
    assert d.planner.inboxes.opened == 0  # no comments: no file read
    board.comment(ids[1], "please also cover the edge case", author="alice")
    d.run_pass()
    assert d.planner.inboxes.opened == 1
    d.run_pass()
    assert d.planner.inboxes.opened == 0  # that comment is in the file already
    board.comment(ids[1], "and thanks", author="alice")
    d.run_pass()
    workspaces = {t: Path(board.show(t)["workspace_path"]) for t in ids}
    text = (workspaces[ids[1]] / ".board" / "inbox.md").read_text()
    assert text.count("please also cover the edge case") == 1 and text.count("and thanks") == 1
    assert not any((workspaces[t] / ".board" / "inbox.md").exists() for t in (ids[0], ids[2]))
    pids = [int(board.show(t)["worker_pid"]) for t in ids]
    for t in ids:
        board.archive(t)
    d.run_pass()
    wait_for(lambda: not any(group_has_live(p) for p in pids), what="the archived tasks' workers stopped")
