"""Running the app: a blocking server for ``agentboard serve``, a background one (an ephemeral
loopback port, uvicorn in a thread) for tests and benchmarks, and :class:`WorkerAPI`, the API a
standalone dispatcher serves to its workers.

A process serving the API on a home records its URL and pid in ``<home>/api.json``
(:func:`record`; never over another live process's record, and it removes only its own); a one-shot pass started on the same home reuses it (:func:`running_api`) instead
of serving its own. A long-running dispatcher always serves its own
(:meth:`WorkerAPI.serve_in_background`): the process it would borrow from may stop while it runs,
and every worker it started after that would be handed a dead URL.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..dispatch.liveness import pid_alive
from ..store.engine import Database

if TYPE_CHECKING:  # (auth imports FastAPI, and uvicorn is imported when serving: not for a command
    # that only looks for a running API)
    import uvicorn

    from .auth import ASGIApp

log = logging.getLogger("agentboard.api")

#: where a home's running API is recorded
API_FILE = "api.json"

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


#: where a home keeps the loopback port of the last workers' API a dispatcher served on it
WORKER_PORT_FILE = Path("run") / "worker-api.port"


def leftover_api_ports(home: Path) -> list[int]:
    """The loopback ports the live workers listed in ``home``'s worker files were told to report
    to (``AGENTBOARD_API_URL`` in their environment, where this user may read it): where a
    dispatcher of a release that did not record its port (``run/worker-api.port``) left workers
    running, the next one serves that port, so their reports reach it."""
    from ..dispatch.guard import WorkerFile

    ports: list[int] = []
    for path in sorted((home / "run").glob("workers-*.txt")):
        for pid, _at, _owner in WorkerFile(path).read().values():
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                continue
            for item in environ.split(b"\0"):
                if item.startswith(b"AGENTBOARD_API_URL="):
                    m = re.fullmatch(rb"AGENTBOARD_API_URL=http://127\.0\.0\.1:(\d{4,5})/?", item)
                    if m and 1024 <= int(m.group(1)) <= 65535 and int(m.group(1)) not in ports:
                        ports.append(int(m.group(1)))
    return ports


def bind_worker_port(home: Path) -> socket.socket:
    """A loopback socket for the workers' API of a dispatcher on ``home``: on the port the last
    one used when it is free, so the workers a dispatcher takes over from the one before
    (stopped on purpose, ``guard``) reach it at the URL they were given — with no port recorded
    (a release that recorded none left them), the port its live workers were given
    (:func:`leftover_api_ports`) —; else on a new port, remembered for the next."""
    path = home / WORKER_PORT_FILE
    try:
        recorded = [int(path.read_text(encoding="ascii").strip())]
    except (OSError, ValueError):
        recorded = leftover_api_ports(home)
    for port in recorded:
        if 1024 <= port <= 65535:
            try:
                sock = bind("127.0.0.1", port)
            except OSError:  # taken meanwhile: a new one
                continue
            if not path.exists():
                _remember_port(path, port)
            return sock
    sock = bind("127.0.0.1", 0)
    _remember_port(path, int(sock.getsockname()[1]))
    return sock


def _remember_port(path: Path, port: int) -> None:
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(str(port), encoding="ascii")
        tmp.replace(path)


def url_for(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else ("[::1]" if host == "::" else host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def _config(app: ASGIApp, **kw: Any) -> uvicorn.Config:
    import uvicorn

    return uvicorn.Config(app, lifespan="on", access_log=False, ws_ping_interval=20.0,
                          ws_ping_timeout=20.0, timeout_graceful_shutdown=3, **kw)


class BackgroundServer:
    """uvicorn serving ``app`` on ``host:port`` (0: any free port) in a daemon thread."""

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning",
                 *, sock: socket.socket | None = None, **config: Any) -> None:
        self.sock = sock if sock is not None else bind(host, port)
        self.host = host
        self.port = int(self.sock.getsockname()[1])
        self.url = url_for(host, self.port)
        import uvicorn

        self.server = uvicorn.Server(_config(app, log_level=log_level, **config))
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


def serve_forever(app: ASGIApp, sock: socket.socket, log_level: str = "info",
                  on_shutdown: Callable[[], None] | None = None, **config: Any) -> None:
    """Serve until a signal stops it (``log_config=None``: leave the logging set up by
    :func:`agentboard.observe.logs.setup` alone)."""
    import uvicorn

    class _Server(uvicorn.Server):
        """uvicorn calling ``on_shutdown`` once it has stopped serving (before it re-raises the
        signal that stopped it, so a ``finally`` after ``run`` would be too late)."""

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            try:
                await super().shutdown(sockets)
            finally:
                if on_shutdown is not None:
                    on_shutdown()

    server = _Server(_config(app, log_level=log_level, **config))
    server.run(sockets=[sock])


def record(home: Path, url: str) -> bool:
    """Say in the home that this process serves the API at ``url`` (file mode 0600), unless the
    home's record names another live process's API (a ``dispatcher`` or ``serve`` running on it:
    a one-shot pass borrows that one, and it removes its record when it stops). False then."""
    if _recorded_elsewhere(home):
        return False
    path = home / API_FILE
    tmp = path.with_name(f"{API_FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"url": url, "pid": os.getpid()}, fh)
    tmp.replace(path)
    return True


def forget(home: Path) -> None:
    """Remove the home's record of the API if this process wrote it."""
    path = home / API_FILE
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        if int(json.loads(path.read_text(encoding="utf-8")).get("pid")) == os.getpid():
            path.unlink()


def _recorded_elsewhere(home: Path) -> bool:
    """Whether ``api.json`` names another live process's API (left to it: a one-shot pass
    borrows the API of a ``serve`` that runs beside a dispatcher)."""
    try:
        pid = int(json.loads((home / API_FILE).read_text(encoding="utf-8"))["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return pid != os.getpid() and pid_alive(pid)


def running_api(home: Path, timeout: float = 2.0) -> str | None:
    """The URL of the API recorded in ``home``, when its process is alive and it answers like
    agentboard's API (a 401 JSON error to a call without a token); else ``None``."""
    import httpx

    try:
        data = json.loads((home / API_FILE).read_text(encoding="utf-8"))
        url, pid = str(data["url"]), int(data["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not pid_alive(pid):
        return None
    try:
        resp = httpx.get(f"{url}/api/me", timeout=timeout, trust_env=False)
        ok = resp.status_code == 401 and resp.json().get("error", {}).get("code") == "unauthorized"
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return url if ok else None


class RunTokens:
    """The dispatcher's token factory: a run token for each worker it starts (called with the
    board, task and run); a batch's are issued in the transaction that claims it (:attr:`stored`)."""

    #: the tokens are rows of the board's own database: a dispatcher issues a batch's in the
    #: transaction that claims it (``kernel.dispatching.claim_to_start``)
    stored = True

    def __init__(self, db: Database) -> None:
        self.db = db

    def __call__(self, board: str, task_id: str, run_id: int) -> str:
        from ..kernel import tokens

        return tokens.create_run_token(self.db, board, task_id, run_id)


def run_tokens(db: Database) -> RunTokens:
    """The dispatcher's token factory (see :class:`RunTokens`)."""
    return RunTokens(db)


class WorkerAPI:
    """The API a dispatcher's workers report to: for a one-shot pass, the one recorded in the
    home when it is alive; else (and always for a long-running dispatcher,
    :meth:`serve_in_background`) the app served in this process on a loopback port (same routes,
    same auth), recorded in the home until :meth:`stop` unless another live process is.

    ``start(lazy=True)`` only binds the port, so the URL is known before any worker starts; the
    app is built (about a second of CPU: every route's models) by :meth:`serve` once a worker
    needs it, or in the background by :meth:`serve_in_background`. A worker that calls before
    then waits in the socket's backlog. A one-shot pass that starts no worker builds nothing."""

    def __init__(self, settings: Settings, db: Database) -> None:
        self.settings = settings
        self.db = db
        self.server: BackgroundServer | None = None
        self.url = ""
        self._sock: socket.socket | None = None
        self._serving: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def own(self) -> bool:
        """Whether this process serves it (else another process on the home does)."""
        return self._sock is not None

    def start(self, *, lazy: bool = False) -> WorkerAPI:
        found = running_api(self.settings.home)
        if found:
            self.url = found
            return self
        self._bind()
        if not lazy:
            self.serve()
        return self

    def _bind(self) -> None:
        self._sock = bind_worker_port(self.settings.home)
        self.url = url_for("127.0.0.1", int(self._sock.getsockname()[1]))

    def serve(self) -> None:
        """Build the app and serve it on the bound port (once; nothing when another process
        serves the home's API)."""
        with self._lock:
            if self._sock is None or self.server is not None:
                return
            from .app import create_app

            self.server = BackgroundServer(create_app(self.settings, self.db), sock=self._sock).start()
            record(self.settings.home, self.url)

    def serve_in_background(self) -> None:
        """:meth:`serve` in a thread of its own, so this process goes on meanwhile: how a
        long-running dispatcher serves its workers' API. It never keeps another process's (a
        ``serve``, another dispatcher): that process may stop first, and the workers started
        after it would get a dead URL; so a borrowed one is dropped here for a port of its own
        (call this before handing :attr:`url` to the dispatcher)."""
        if self._sock is None and self.server is None:
            borrowed = self.url
            self._bind()
            if borrowed:
                log.info("workers get an API of this process's own at %s, not the one another process serves at "
                         "%s (it may stop before this dispatcher does)", self.url, borrowed)
        if self._sock is not None and self.server is None and self._serving is None:
            self._serving = threading.Thread(target=self.serve, name="agentboard-api-build", daemon=True)
            self._serving.start()

    def stop(self) -> None:
        if self._serving is not None:
            self._serving.join()
            self._serving = None
        with self._lock:
            if self.server is not None:
                forget(self.settings.home)
                self.server.stop()
                self.server = None
            elif self._sock is not None:
                self._sock.close()
            self._sock = None

    def __enter__(self) -> WorkerAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
