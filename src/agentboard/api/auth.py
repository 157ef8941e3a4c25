"""Who is calling, and what they may do.

Every HTTP request is authenticated by :class:`AuthMiddleware` before any route runs (so a
request without a valid token gets 401 whatever else is wrong with it): a bearer token for
API clients, or the HttpOnly cookie the browser got from ``/login?token=…``. Writes
authenticated by the cookie must also carry ``X-Agentboard: 1`` or a same-origin ``Origin``
header (CSRF). The routes then check the role and the board with :class:`Principal`.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import anyio
from fastapi import Request

from ..domain.errors import AgentboardError, Forbidden, Unauthorized
from ..kernel import tokens as tokens_kernel
from ..kernel.host_access import Access
from ..store.engine import Database
from .errors import WRITES_AT, error_body, retry_after

COOKIE = "agentboard_token"
CSRF_HEADER = "x-agentboard"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: paths that authenticate themselves (the login URL carries its token; ``/metrics`` takes an
#: admin or the metrics token) or need none (the health checks of a load balancer)
OPEN_PATHS = frozenset({"/login", "/logout", "/healthz", "/readyz", "/metrics"})
#: the chat platforms' routes: authenticated by the platform's signature instead of a token
#: (``api/routes/chat.py``)
CHAT_PATHS = frozenset({"/api/chat/slack/commands", "/api/chat/slack/events", "/api/chat/discord/interactions",
                        "/api/chat/telegram/webhook"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Principal:
    """The identity behind a token, with the checks every route applies."""

    token_id: int
    name: str
    role: str  # admin | member | viewer | run
    boards: tuple[str, ...] = ()  # empty: every board
    run_id: int | None = None
    task_id: str | None = None
    orchestrator: bool = False
    via_cookie: bool = False
    #: the profile, for the run token of a supervision task (its board-wide supervisor tools)
    supervisor: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any], *, via_cookie: bool = False) -> Principal:
        return cls(
            token_id=int(row["id"]), name=str(row["name"]), role=str(row["role"]),
            boards=tuple(row.get("boards") or ()), run_id=row.get("run_id"),
            task_id=row.get("task_id"), orchestrator=bool(row.get("orchestrator")),
            via_cookie=via_cookie, supervisor=row.get("supervisor"),
        )

    @property
    def is_run(self) -> bool:
        return self.role == tokens_kernel.RUN_ROLE

    @property
    def host(self) -> Access:
        """How much of the host this caller may decide about (commands, workspace paths): an
        admin token limited to no board decides; any other person picks what an admin
        configured on the board; a run token's tasks carry none of it."""
        if self.is_run:
            return Access.RUN
        if self.role == "admin" and not self.boards:
            return Access.ADMIN
        return Access.MEMBER

    @property
    def default_board(self) -> str:
        """The board a call without ``?board=`` means: the token's only board, else ``default``."""
        return self.boards[0] if len(self.boards) == 1 else "default"

    def sees(self, board: str) -> bool:
        return not self.boards or board in self.boards

    def check_read(self, board: str) -> None:
        if not self.sees(board):
            raise Forbidden(f"token {self.name!r} may not use board {board!r}")

    def check_write(self, board: str, task_id: str | None = None) -> None:
        """Change tasks, comments, links or goals on ``board`` (``task_id``: the task touched)."""
        self.check_read(board)
        self.check_writer(task_id)

    def check_writer(self, task_id: str | None = None) -> None:
        """The role may change tasks (a run token: only ``task_id`` when it is its own), on a
        board checked separately."""
        if self.role == "viewer":
            raise Forbidden(f"token {self.name!r} is read-only (viewer)")
        if self.is_run and not self.orchestrator and (task_id is None or task_id != self.task_id):
            what = f"task {task_id}" if task_id else "this board"
            raise Forbidden(
                f"a run token may only change its own task ({self.task_id}), not {what}; propose other work "
                "with `agentboard create --triage` (MCP: kanban_propose): it lands in triage for a person"
            )

    def check_person(self, what: str, task_id: str) -> None:
        """``what`` (reclaim, unguard, promote a task) is a person's or an orchestrator's call on
        another task, never a run's on its own: it would requeue itself around the failure limit
        (a reclaim counts no failure and resets the counter) as often as it likes."""
        if self.is_run and (not self.orchestrator or task_id == self.task_id):
            raise Forbidden(f"a run token cannot {what} its own task (nor, unless an orchestrator's, any other): "
                            "a worker finishes with complete, block or request-review")

    def check_reporter(self, what: str, task_id: str) -> None:
        """``what`` (complete, heartbeat, request review) is a report of the task's own run, or a
        person's call: a run token, an orchestrator's included, reports only on its own task (it
        would close work nobody did, or write another run's summary and usage)."""
        if self.is_run and task_id != self.task_id:
            raise Forbidden(f"a run token may {what} only its own task ({self.task_id}), not {task_id}: "
                            "another task is finished by its own run or by a person")

    def check_supervisor_tool(self, board: str) -> None:
        """Use a supervisor tool on ``board``: the run token of the board's supervision task, or
        a person who may change the board (a member or an admin)."""
        self.check_read(board)
        if self.is_run:
            if self.supervisor is None:
                raise Forbidden("the supervisor's tools need the supervisor's run token (or a person's token); "
                                "a worker proposes work with `agentboard create --triage` instead")
            return
        if self.role == "viewer":
            raise Forbidden(f"token {self.name!r} is read-only (viewer)")

    def check_admin(self, board: str | None = None) -> None:
        """Administer ``board`` (or, with ``None``, the whole installation)."""
        if self.role != "admin":
            raise Forbidden(f"token {self.name!r} is {self.role}; this needs an admin token")
        if board is None:
            if self.boards:
                raise Forbidden(f"token {self.name!r} is limited to some boards; this needs an unscoped admin token")
        else:
            self.check_read(board)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "boards": list(self.boards) or None,
                "run_id": self.run_id, "task_id": self.task_id, "orchestrator": self.orchestrator,
                "supervisor": self.supervisor}


async def current(request: Request) -> Principal:
    """FastAPI dependency: the caller, as authenticated by the middleware."""
    who = getattr(request.state, "principal", None)
    if who is None:  # pragma: no cover - the middleware always sets it
        raise Unauthorized("not authenticated")
    return who  # type: ignore[no-any-return]


def headers_of(scope: Scope) -> dict[str, str]:
    """An ASGI scope's headers by lower-case name (repeated cookie headers joined)."""
    out: dict[str, str] = {}
    for k, v in scope.get("headers") or ():
        key = k.decode("latin-1").lower()
        val = v.decode("latin-1")
        out[key] = out[key] + "; " + val if key == "cookie" and key in out else val
    return out


def token_from(headers: dict[str, str], query: dict[str, str] | None = None) -> tuple[str | None, bool]:
    """``(token, via_cookie)`` from the Authorization header, then the cookie, then ``?token=``."""
    auth = headers.get("authorization", "")
    if auth:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip(), False
    raw = headers.get("cookie")
    if raw:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(raw)
        except Exception:
            jar = SimpleCookie()
        if COOKIE in jar and jar[COOKIE].value:
            return jar[COOKIE].value, True
    if query and query.get("token"):
        return query["token"], False
    return None, False


def same_origin(headers: dict[str, str], scheme: str) -> bool:
    origin = headers.get("origin")
    host = headers.get("host")
    if not origin or not host:
        return False
    return origin.rstrip("/") in (f"{scheme}://{host}", f"http://{host}", f"https://{host}")


def authenticate(db: Database, token: str | None, via_cookie: bool = False) -> Principal:
    return Principal.from_row(tokens_kernel.verify(db, token), via_cookie=via_cookie)


#: the page a browser without a valid token gets (``web/login.html``, self-contained)
LOGIN_HTML = Path(__file__).resolve().parent.parent / "web" / "login.html"


class LoginThrottle:
    """A per-client back-off on ``/login``: after ``limit`` failed logins within ``window``
    seconds, every login from that client (a right token too) is answered 429 with
    ``Retry-After`` until the oldest of those failures is ``window`` old. A successful login
    forgets the client's failures. Clients are told apart by their address (behind a reverse
    proxy they share one: the proxy should limit too). At most ``clients`` addresses are kept,
    the least recently seen dropped first."""

    def __init__(self, limit: int = 5, window: float = 300.0, clients: int = 10_000) -> None:
        self.limit = limit
        self.window = window
        self.clients = clients
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> deque[float]:
        seen = self._failures.get(client)
        if seen is None:
            return deque()
        while seen and seen[0] <= now - self.window:
            seen.popleft()
        if not seen:
            del self._failures[client]
        return seen

    def retry_after(self, client: str, now: float | None = None) -> int | None:
        """Seconds the client must wait before its next login, or ``None``: it may try now."""
        at = time.monotonic() if now is None else now
        with self._lock:
            seen = self._recent(client, at)
            if len(seen) < self.limit:
                return None
            return max(1, math.ceil(seen[-self.limit] + self.window - at))

    def failed(self, client: str, now: float | None = None) -> None:
        at = time.monotonic() if now is None else now
        with self._lock:
            seen = self._recent(client, at)
            seen.append(at)
            self._failures[client] = seen
            self._failures.move_to_end(client)
            while len(self._failures) > self.clients:
                self._failures.popitem(last=False)

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)


def login_page(message: str) -> bytes:
    """The sign-in page: how a person gets in, led by why this browser is not in (the API's
    wording for a missing token is for programs, so a person reads "not signed in")."""
    import html

    if message.startswith("no token"):
        why = '<p class="login-why">This browser is not signed in yet.</p>'
    elif message.startswith("You are"):
        why = f'<p class="login-why">{html.escape(message)}</p>'
    else:
        why = f'<p class="login-why login-refused">That token is not accepted: {html.escape(message)}.</p>'
    return LOGIN_HTML.read_text(encoding="utf-8").replace("<!--why-->", why, 1).encode("utf-8")


class AuthMiddleware:
    """Authenticate every HTTP request (WebSockets authenticate in their own handler)."""

    def __init__(self, app: ASGIApp, db: Database) -> None:
        self.app = app
        self.db = db

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or scope["path"] in CHAT_PATHS:
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})[WRITES_AT] = self.db.writes  # (errors.retry_after)
        headers = headers_of(scope)
        token, via_cookie = token_from(headers)
        try:
            if token is None:
                tokens_kernel.verify(self.db, None)  # raises the explanatory Unauthorized
            who = await anyio.to_thread.run_sync(authenticate, self.db, token, via_cookie)
        except AgentboardError as exc:
            browser = not scope["path"].startswith("/api") and "text/html" in headers.get("accept", "")
            await deny(send, exc.http_status, exc.code, exc.message, html=browser, retry=retry_after(exc, self.db, scope))
            return
        if via_cookie and scope["method"] not in SAFE_METHODS:
            if headers.get(CSRF_HEADER) != "1" and not same_origin(headers, scope.get("scheme", "http")):
                await deny(send, 403, "csrf", "a cookie-authenticated write needs the header "
                            "'X-Agentboard: 1' or a same-origin Origin header")
                return
        scope.setdefault("state", {})["principal"] = who
        await self.app(scope, receive, send)


async def deny(send: Send, status: int, code: str, message: str, *, html: bool = False,
               retry: str | None = None) -> None:
    """Answer a request before any route runs: the JSON error body (or, for a browser, the
    login page); ``retry``: its ``Retry-After``."""
    if html:
        body = login_page(message)
        ctype = b"text/html; charset=utf-8"
    else:
        body = error_body(code, message)
        ctype = b"application/json"
    headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="agentboard"'))
    if retry:
        headers.append((b"retry-after", retry.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
