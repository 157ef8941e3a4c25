"""`agentboard mcp` answers ``initialize`` before the MCP SDK has loaded: the answer is the SDK's own,
and the session the SDK then serves is the same one."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from mcp_types import version

from agentboard.mcp import stdio

#: a worker whose dispatcher serves no API: its server starts at once
ENV_WORKER = {"AGENTBOARD_TASK": "t_00000000", "AGENTBOARD_RUN_ID": "1", "AGENTBOARD_BOARD": "default"}


def _talk(argv: list[str], messages: list[dict[str, Any]], answers: int,
          worker: dict[str, str] = ENV_WORKER) -> list[dict[str, Any]]:
    """Send ``messages`` on one line each; read ``answers`` lines back; close standard input."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")} | worker
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    proc.stdin.flush()
    out = [json.loads(proc.stdout.readline()) for _ in range(answers)]
    proc.stdin.close()
    assert proc.wait(60) == 0
    assert proc.stdout.read() == b""  # nothing more: the SDK's own answer to initialize was not passed on
    return out


def _initialize(protocol: str, rid: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": {
        "protocolVersion": protocol, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@pytest.mark.parametrize("protocol", ["2025-06-18", "2024-11-05", "2099-01-01"])
def test_the_quick_answer_to_initialize_is_the_one_the_sdk_gives(protocol: str) -> None:
    quick = _talk([sys.executable, "-m", "agentboard", "mcp"], [_initialize(protocol)], 1)
    sdk = _talk([sys.executable, "-c", "from agentboard.mcp.server import serve; serve()"], [_initialize(protocol)], 1)
    assert quick == sdk


def test_the_sdk_serves_the_rest_of_the_session_even_sent_before_it_has_loaded() -> None:
    review = {"jsonrpc": "2.0", "id": 10, "method": "tools/call",
              "params": {"name": "kanban_review", "arguments": {"verdict": "approved", "score": 90, "summary": "ok"}}}
    out = _talk([sys.executable, "-m", "agentboard", "mcp"],
                [_initialize("2025-06-18", 7), INITIALIZED, {"jsonrpc": "2.0", "id": 8, "method": "tools/list"},
                 {"jsonrpc": "2.0", "id": 9, "method": "ping"}, review], 4)
    assert out[0]["id"] == 7 and sorted(m["id"] for m in out[1:]) == [8, 9, 10]
    by_id = {m["id"]: m for m in out}
    assert "kanban_complete" in {t["name"] for t in by_id[8]["result"]["tools"]}
    assert by_id[9]["result"] == {}
    # the tool ran in the session the client initialized (not refused as a request of another
    # protocol version): its own answer, that this is no review run
    assert "kanban_review is for a review run" in by_id[10]["result"]["content"][0]["text"], by_id[10]


def test_the_versions_answered_are_those_the_sdk_negotiates() -> None:
    assert stdio.HANDSHAKE_VERSIONS == version.HANDSHAKE_PROTOCOL_VERSIONS


def test_a_worker_whose_dispatcher_serves_no_api_still_gets_tools_that_say_how_to_report() -> None:
    """An agent CLI that requires its MCP servers (Codex) would not begin its session if ours exited."""
    no_api = dict(ENV_WORKER)
    heartbeat = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "kanban_heartbeat", "arguments": {"note": "half way"}}}
    out = _talk([sys.executable, "-m", "agentboard", "mcp"], [_initialize("2025-06-18"), INITIALIZED, heartbeat], 2,
                worker=no_api)
    assert out[0]["result"]["serverInfo"]["name"] == "agentboard"
    assert out[1]["result"]["isError"] is True
    assert "report by writing .board/result.json" in out[1]["result"]["content"][0]["text"]


def test_a_worker_whose_api_refuses_connections_gets_its_tools_after_a_brief_look_not_the_reports_wait() -> None:
    """The look-up of what the run token may do (which tools to list) is tried for
    ``remote.SCOPE_RETRY_FOR``, not the 30 s a report keeps trying across a dispatcher's restart:
    the agent's session waits for the list (a CLI started by hand in a workspace whose dispatcher
    is gone, or a worker orphaned by one)."""
    import os
    import socket
    import time

    from agentboard import remote

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: a connection is refused at once
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")} | ENV_WORKER | {
        "AGENTBOARD_API_URL": f"http://127.0.0.1:{port}", "AGENTBOARD_TOKEN": "abt_x"}
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "agentboard", "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    for m in (_initialize("2025-06-18"), INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}):
        proc.stdin.write(json.dumps(m).encode() + b"\n")
    proc.stdin.flush()
    proc.stdout.readline()
    tools = json.loads(proc.stdout.readline())
    listed_after = time.monotonic() - started
    proc.stdin.close()
    assert proc.wait(60) == 0
    said = proc.stderr.read().decode()
    assert "kanban_complete" in {t["name"] for t in tools["result"]["tools"]}
    assert f"cannot reach the board's API at http://127.0.0.1:{port}" in said, said
    assert f"(tried for {remote.SCOPE_RETRY_FOR:g}s)" in said, said
    assert listed_after < remote.RETRY_FOR


def test_a_client_that_opens_with_discover_and_then_gives_up_waiting_is_answered_by_the_sdk_alone() -> None:
    """A 2026 client asks ``server/discover`` first and, when the SDK is slow to load, falls back to
    ``initialize``: were that answered at once, the client would take the session for a handshake one
    while the SDK serves the discover one, and refuse its every later request."""
    from mcp_types.version import LATEST_MODERN_VERSION

    meta = {"io.modelcontextprotocol/protocolVersion": LATEST_MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {}}
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    out = _talk([sys.executable, "-m", "agentboard", "mcp"], [discover, _initialize("2025-06-18", 2)], 2)
    by_id = {m["id"]: m for m in out}
    assert LATEST_MODERN_VERSION in by_id[1]["result"]["supportedVersions"], by_id[1]
    assert "error" in by_id[2] and "result" not in by_id[2], by_id[2]
