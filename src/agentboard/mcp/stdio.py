"""``agentboard mcp`` on stdio, ready at once: ``initialize`` answered while the MCP SDK loads.

Importing the SDK (its protocol types are pydantic models) takes most of a second, and an agent
CLI that starts the board's server with the worker either waits for the handshake or starts its
turn without the board's tools. So the process answers the client's ``initialize`` itself, from
a few lines of its own, while the SDK loads in the main thread; then the SDK serves everything
(tools/list, tools/call, ping ...) from the same session:

- the standard input and output the client holds are kept on private descriptors; the SDK gets
  a pipe as its standard input and one as its standard output;
- a thread reads the client's messages: it answers ``initialize`` and passes it on to the SDK
  (so the SDK's session is initialized the same way), then, once the SDK has answered that
  ``initialize`` too, passes on every later line as it came, in order (the SDK handles requests
  concurrently: one passed on sooner could be taken before the session knows its version);
- a client whose first request is not ``initialize`` (a 2026 client opens with
  ``server/discover``) is the SDK's alone: a later ``initialize`` (the client gave up waiting for
  the SDK to load) is passed on unanswered, so the SDK's refusal reaches the client, which then
  asks again in the session the SDK chose;
- another thread copies the SDK's output to the client, but for its answer to that
  ``initialize`` (the client has one already).

The answer is the SDK's own (tests/mcp compares them): the protocol version negotiated as the
SDK does, its capabilities for a server with tools, the board's name, version and instructions.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any, BinaryIO

from .. import __version__

#: what the SDK says of a server with tools (it declares prompts and resources, empty)
CAPABILITIES: dict[str, Any] = {"prompts": {"listChanged": False},
                                "resources": {"listChanged": False, "subscribe": False},
                                "tools": {"listChanged": False}}
#: the protocol versions the SDK negotiates in an ``initialize`` handshake, oldest to newest
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: written after the SDK's last line (the SDK keeps a copy of its output open: no end of file)
END = b"\x00agentboard-mcp-end\n"


def initialize_result(params: dict[str, Any], instructions: str) -> dict[str, Any]:
    """The answer to ``initialize``: the client's protocol version when the SDK speaks it, else
    the newest it does."""
    asked = params.get("protocolVersion") if isinstance(params, dict) else None
    version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {"capabilities": CAPABILITIES, "instructions": instructions, "protocolVersion": version,
            "serverInfo": {"name": "agentboard", "version": __version__}}


class Front:
    """The client's side of the pipes: answers ``initialize``, forwards the rest to the SDK."""

    def __init__(self, client_in: BinaryIO, client_out: BinaryIO, sdk_in: BinaryIO, sdk_out: BinaryIO,
                 instructions: str) -> None:
        self.client_in, self.client_out = client_in, client_out
        self.sdk_in, self.sdk_out = sdk_in, sdk_out
        self.instructions = instructions
        self.answered: object = None  # the id of the initialize this side answered
        self.has_answered = threading.Event()
        #: a request other than ``initialize`` came first (a 2026 client's ``server/discover``):
        #: the SDK alone decides what the session is, and a later ``initialize`` is its to answer
        self.passing = False
        #: the SDK answered that initialize too: its session is ready for the next messages
        self.sdk_ready = threading.Event()
        self.lock = threading.Lock()

    def _send(self, data: bytes) -> None:
        with self.lock:
            self.client_out.write(data)
            self.client_out.flush()

    def pump_in(self) -> None:
        """Client → SDK (answering the first ``initialize`` on the way); EOF closes the SDK's input."""
        try:
            for line in self.client_in:
                if self.has_answered.is_set():
                    # the SDK handles messages concurrently: none may reach it before its session
                    # has taken the initialize (it would not know the negotiated version yet)
                    self.sdk_ready.wait()
                elif not self.passing:
                    msg = _message(line)
                    if "id" in msg and "method" in msg and msg["method"] != "initialize":
                        self.passing = True
                    elif msg.get("method") == "initialize" and "id" in msg:
                        self.answered = msg["id"]
                        self.has_answered.set()
                        result = initialize_result(msg.get("params") or {}, self.instructions)
                        self._send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode()
                                   + b"\n")
                self.sdk_in.write(line)
                self.sdk_in.flush()
        except (OSError, ValueError):  # the SDK is gone
            pass
        finally:
            try:
                self.sdk_in.close()
            except OSError:
                pass

    def pump_out(self) -> None:
        """SDK → client, without the SDK's answer to the ``initialize`` answered already."""
        dropped = False
        try:
            for line in self.sdk_out:
                if line == END:
                    return
                if not dropped and self.has_answered.is_set():
                    msg = _message(line)
                    if "id" in msg and msg["id"] == self.answered and ("result" in msg or "error" in msg):
                        dropped = True
                        self.sdk_ready.set()
                        continue
                self._send(line)
        except (OSError, ValueError):  # the client is gone
            pass


def _message(line: bytes) -> dict[str, Any]:
    try:
        msg = json.loads(line)
    except ValueError:
        return {}
    return msg if isinstance(msg, dict) else {}


def serve() -> None:
    """Serve the board's tools on stdio (see the module's docstring)."""
    from .instructions import INSTRUCTIONS

    client_in = os.fdopen(os.dup(0), "rb")
    client_out = os.fdopen(os.dup(1), "wb", buffering=0)
    to_sdk_r, to_sdk_w = os.pipe()
    from_sdk_r, from_sdk_w = os.pipe()
    os.dup2(to_sdk_r, 0)
    os.dup2(from_sdk_w, 1)
    os.close(to_sdk_r)
    os.close(from_sdk_w)
    sys.stdout.flush()
    front = Front(client_in, client_out, os.fdopen(to_sdk_w, "wb", buffering=0),
                  os.fdopen(from_sdk_r, "rb"), INSTRUCTIONS)
    reader = threading.Thread(target=front.pump_in, name="mcp-client-in", daemon=True)
    writer = threading.Thread(target=front.pump_out, name="mcp-client-out", daemon=True)
    reader.start()
    writer.start()
    try:
        from .server import serve as serve_with_sdk

        serve_with_sdk()
    finally:
        sys.stdout.flush()
        os.write(1, END)  # the writer copies what the SDK wrote, then stops
        writer.join(30)
