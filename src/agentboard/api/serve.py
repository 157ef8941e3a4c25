"""Running the app: a blocking server for ``agentboard serve`` and a background one for tests
and benchmarks (an ephemeral loopback port, uvicorn in a thread)."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from typing import Any

import uvicorn

from .auth import ASGIApp

LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # asyncio then sets TCP_NODELAY
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def url_for(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else ("[::1]" if host == "::" else host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def _config(app: ASGIApp, **kw: Any) -> uvicorn.Config:
    return uvicorn.Config(app, lifespan="on", access_log=False, ws_ping_interval=20.0,
                          ws_ping_timeout=20.0, timeout_graceful_shutdown=3, **kw)


class BackgroundServer:
    """uvicorn serving ``app`` on ``host:port`` (0: any free port) in a daemon thread."""

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning") -> None:
        self.sock = bind(host, port)
        self.host = host
        self.port = int(self.sock.getsockname()[1])
        self.url = url_for(host, self.port)
        self.server = uvicorn.Server(_config(app, log_level=log_level))
        self.thread = threading.Thread(target=self._run, name="agentboard-api", daemon=True)

    def _run(self) -> None:
        self.server.run(sockets=[self.sock])

    def start(self, timeout: float = 20.0) -> BackgroundServer:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the API server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(app: ASGIApp, sock: socket.socket, log_level: str = "info") -> None:
    server = uvicorn.Server(_config(app, log_level=log_level))
    server.run(sockets=[sock])
