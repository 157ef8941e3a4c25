"""A web hook receiver on loopback, reached through Apprise ``json://`` targets.

It records every message (path, title, body) and can refuse the next N (HTTP 500), refuse
everything, or hold its answers (the request is recorded, the reply waits) to catch a sender
mid-delivery.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Received:
    path: str
    title: str
    message: str
    type: str
    ok: bool


class Receiver:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.fail_next = 0
        self.fail_all = False
        self.hold = threading.Event()  # set: replies wait until it is cleared
        self._released = threading.Event()
        self._released.set()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                length = int(self.headers.get("content-length") or 0)
                data: dict[str, Any] = json.loads(self.rfile.read(length) or b"{}")
                with receiver._lock:
                    ok = not (receiver.fail_all or receiver.fail_next > 0)
                    if receiver.fail_next > 0:
                        receiver.fail_next -= 1
                    receiver.received.append(Received(self.path, data.get("title", ""),
                                                      data.get("message", ""), data.get("type", ""), ok))
                    receiver._changed.notify_all()
                while receiver.hold.is_set():
                    time.sleep(0.05)
                self.send_response(200 if ok else 500)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "hook") -> str:
        return f"json://127.0.0.1:{self.port}/{path}"

    def accepted(self, path: str | None = None) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.ok and (path is None or r.path == "/" + path)]

    def refused(self) -> list[Received]:
        with self._lock:
            return [r for r in self.received if not r.ok]

    def wait(self, condition: Callable[[], bool], timeout: float = 60.0) -> None:
        """Wait until ``condition()`` holds (checked after every request and every 0.2 s)."""
        deadline = time.monotonic() + timeout
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out; received so far: {self.received!r}")
            with self._changed:
                self._changed.wait(min(0.2, remaining))

    def close(self) -> None:
        self.hold.clear()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


