"""The worker's ``AGENTBOARD_*`` environment is built in one place and read in one
(``domain/worker_env.py``): what the dispatcher gives a real worker process, and what it writes
into the ``.mcp.json`` its agent CLI starts the MCP server with, parse back to the same identity —
the one the MCP server and the ``agentboard`` worker verbs act with."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from agentboard.cli import common
from agentboard.domain import worker_env
from agentboard.domain.worker_env import WorkerEnv
from agentboard.mcp.server import scope_from_env

from .conftest import wait_for

pytestmark = pytest.mark.xdist_group("dispatch-worker-env")

#: a worker that writes down its environment and its .mcp.json, asks the MCP server started the
#: way its agent CLI would (with the .mcp.json's environment) who it is, then reports
WORKER = r'''
import json, os, subprocess, sys
from pathlib import Path

out = Path(sys.argv[1])
mine = {k: v for k, v in os.environ.items() if k.startswith("AGENTBOARD_")}
server = json.loads(Path(".mcp.json").read_text())["mcpServers"]["agentboard"]

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

async def ask():
    env = {"PATH": os.environ["PATH"], **server["env"]}
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentboard", "mcp"], env=env)
    async with Client(params, read_timeout_seconds=60) as client:
        shown = await client.call_tool("kanban_show", {})
        beat = await client.call_tool("kanban_heartbeat", {"note": "from the MCP server"})
        return [r.structured_content or json.loads(r.content[0].text) for r in (shown, beat)]

shown, beat = anyio.run(ask)
hb = subprocess.run([sys.executable, "-m", "agentboard", "heartbeat", "--note", "from the verb", "--json"],
                    capture_output=True, text=True)
(out / "seen.json").write_text(json.dumps({"env": mine, "mcp_env": server["env"], "cwd": os.getcwd(),
                                           "shown": shown, "beat": beat, "verb": hb.stdout or hb.stderr}))
subprocess.run([sys.executable, "-m", "agentboard", "complete", "--summary", "identity checked"], check=True)
'''


def test_the_dispatchers_environment_parses_back_to_the_identity_the_mcp_server_and_verbs_use(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    ab.add_profile("checker", command=f"{shlex.quote(sys.executable)} {script} {out}")
    t = board.create("check who I am", assignee="checker", tenant="acme")
    dispatcher()
    seen = json.loads(wait_for(lambda: (out / "seen.json").exists() and (out / "seen.json").read_text(),
                               what="the worker's account of its environment"))
    wait_for(lambda: board.show(t["id"])["status"] == "done", what="the task to be done")
    run = board.runs(t["id"])[-1]

    me = WorkerEnv.from_environ(seen["env"])
    assert (me.task, me.run_id, me.board, me.profile, me.tenant) == (t["id"], run["id"], "default", "checker", "acme")
    assert me.workspace == Path(run["workspace_path"]) == Path(seen["cwd"])
    assert me.api_url and me.token and not me.review_run
    assert set(seen["env"]) <= set(worker_env.NAMES)  # nothing of the dispatcher's own (no home, no database)
    # the MCP server's environment (.mcp.json) is the same identity, built by the same code
    assert WorkerEnv.from_environ(seen["mcp_env"]) == me

    # what the MCP server and the worker verbs did with it: the worker's own task and run
    shown, beat = seen["shown"], seen["beat"]
    assert (shown.get("task") or shown)["id"] == t["id"]
    assert "error" not in beat, beat
    assert "error" not in json.loads(seen["verb"]), seen["verb"]
    notes = [(e["payload"] or {}).get("note") for e in board.events(task_id=t["id"], kinds=["heartbeat"])]
    assert {"from the MCP server", "from the verb"} <= set(notes)

    # and the same parse inside this process, as `agentboard mcp` and the CLI's verbs read it
    for name in [k for k in os.environ if worker_env.is_ours(k)]:
        monkeypatch.delenv(name)
    for name, value in seen["env"].items():
        monkeypatch.setenv(name, value)
    scope = scope_from_env(orchestrator=False)
    assert (scope.task_id, scope.run_id, scope.board, scope.profile, scope.workspace) == (
        me.task, me.run_id, me.board, me.profile, me.workspace)
    assert common.me() == me and common.worker_task(None) == t["id"] and common.worker_run_id(None) == run["id"]
    assert common.actor() == "checker"
