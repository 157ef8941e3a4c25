"""The live event stream: ``WS /api/events?board=&since=``.

One :class:`Hub` per app wakes the sockets of a board when events are committed: at once for
commits made by this process (the database's commit listener), and within one poll interval
(50 ms) for commits made by other processes (CLI, workers, other dispatchers), found with a
cheap range query on the event log. Each socket then reads the events after its own cursor.
The same poll checks the sockets' tokens: a socket whose token is revoked or expires, or whose
run closes, is closed (4401) within about one poll interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, Protocol

import anyio
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from ..domain import model
from ..domain.errors import AgentboardError, InvalidInput
from ..kernel import lookups, queries, tokens
from ..kernel.rows import EventRow
from ..store.engine import Database
from .auth import Principal, authenticate, headers_of, same_origin, token_from
from .errors import dumps

BATCH = 500
AUTH_TIMEOUT = 10.0
#: the largest ``since=`` cursor accepted (event ids are 64-bit integers)
MAX_CURSOR = 2**62

CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_INVALID = 4400


class Subscription:
    """One socket's interest: its board, the token it authenticated with, and the event that
    wakes it (new events, or its token no longer valid)."""

    __slots__ = ("board", "token_id", "wake", "revoked")

    def __init__(self, board: str, token_id: int) -> None:
        self.board = board
        self.token_id = token_id
        self.wake = asyncio.Event()
        self.revoked = False


class Hub:
    """Wakes the subscribers of a board when that board has new events, and closes those whose
    token stopped being valid (revoked, expired, or a run token whose run closed): both are
    checked every poll interval, in one round trip for all sockets."""

    def __init__(self, db: Database, poll_interval: float = 0.05) -> None:
        self.db = db
        self.poll_interval = poll_interval
        self.subs: dict[str, set[Subscription]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._poller: asyncio.Task[None] | None = None
        self._last_id: int | None = None

    # -- subscribers ---------------------------------------------------------------------------

    def subscribe(self, board: str, cursor: int, token_id: int) -> Subscription:
        """Wake on events of ``board`` committed after ``cursor``, or when the token
        ``token_id`` is no longer valid."""
        self._start()
        if self._last_id is None or cursor < self._last_id:
            self._last_id = cursor
        sub = Subscription(board, token_id)
        self.subs.setdefault(board, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        group = self.subs.get(sub.board)
        if group is not None:
            group.discard(sub)
            if not group:
                del self.subs[sub.board]

    def wake(self, boards: set[str] | list[str]) -> None:
        for board in boards:
            for sub in self.subs.get(board, ()):
                sub.wake.set()

    def revoke(self, valid: set[int], checked: set[int]) -> None:
        """Wake (to close) the subscribers whose token was among ``checked`` and is not ``valid``."""
        for group in self.subs.values():
            for sub in group:
                if sub.token_id in checked and sub.token_id not in valid:
                    sub.revoked = True
                    sub.wake.set()

    # -- sources of change ----------------------------------------------------------------------

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.loop is loop and self._poller is not None and not self._poller.done():
            return
        if self.loop is None:
            self.db.add_listener(self._on_commit)
        self.loop = loop
        self._poller = loop.create_task(self._poll())

    def _on_commit(self, boards: set[str]) -> None:
        """Called in the writing thread right after a commit of this process."""
        loop = self.loop
        if loop is None or loop.is_closed() or not self.subs:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self.wake, set(boards))

    def _changed(self, token_ids: set[int]) -> tuple[list[str], set[int]]:
        """The boards with events after the last seen one, and which of ``token_ids`` are
        still valid."""
        newest = lookups.boards_with_events_after(self.db, self._last_id or 0)
        if newest:
            self._last_id = list(newest.values())[-1]  # the log's order, not the largest id
        return list(newest), tokens.still_valid(self.db, sorted(token_ids))

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval)
            if not self.subs:
                continue
            token_ids = {sub.token_id for group in self.subs.values() for sub in group}
            try:
                boards, valid = await anyio.to_thread.run_sync(self._changed, token_ids)
            except Exception:  # a busy or briefly unreachable database: try again next tick
                continue
            self.revoke(valid, token_ids)
            if boards:
                self.wake(boards)

    def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
        self.db.remove_listener(self._on_commit)
        self.loop = None


def _event_out(e: EventRow) -> dict[str, Any]:
    return {"id": e["id"], "task_id": e["task_id"], "run_id": e["run_id"], "kind": e["kind"],
            "payload": e["payload"], "actor": e.get("actor"), "created_at": e["created_at"]}


async def _close(ws: WebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):
        await ws.close(code=code, reason=reason)


async def _first_message_token(ws: WebSocket) -> str | None:
    """A client that cannot set headers or query strings may send ``{"token": "…"}`` first."""
    try:
        with anyio.fail_after(AUTH_TIMEOUT):
            text = await ws.receive_text()
    except (TimeoutError, WebSocketDisconnect, KeyError, RuntimeError):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data.get("token") if isinstance(data, dict) and isinstance(data.get("token"), str) else None


class _SocketState(Protocol):
    """What the socket needs of the app's state (``routes.common.AppState``)."""

    db: Database
    hub: Hub

    def require_board(self, slug: str) -> None: ...


async def events_socket(ws: WebSocket) -> None:
    state: _SocketState = ws.app.state.ab
    db: Database = state.db
    hub: Hub = state.hub
    await ws.accept()
    headers = headers_of(ws.scope)
    token, via_cookie = token_from(headers, dict(ws.query_params))
    if token is None:
        token = await _first_message_token(ws)
    try:
        who: Principal = await anyio.to_thread.run_sync(authenticate, db, token, via_cookie)
    except AgentboardError:
        await _close(ws, CLOSE_UNAUTHORIZED, "UNAUTHORIZED")
        return
    if via_cookie and headers.get("origin") and not same_origin(headers, "http"):
        await _close(ws, CLOSE_FORBIDDEN, "FORBIDDEN")
        return
    try:
        raw_board = ws.query_params.get("board")
        board = model.board_slug(raw_board) if raw_board else who.default_board
        raw_since = ws.query_params.get("since")
        since = int(raw_since) if raw_since not in (None, "") else None
        if since is not None and not 0 <= since <= MAX_CURSOR:
            raise ValueError
    except (InvalidInput, ValueError):
        await _close(ws, CLOSE_INVALID, "INVALID_INPUT")
        return
    if not who.sees(board):
        await _close(ws, CLOSE_FORBIDDEN, "FORBIDDEN")
        return
    try:
        await anyio.to_thread.run_sync(state.require_board, board)
    except AgentboardError:
        await _close(ws, CLOSE_NOT_FOUND, "NOT_FOUND")
        return

    if since is None:
        cursor = await anyio.to_thread.run_sync(queries.last_event_id, db)
    else:
        cursor = since
    sub = hub.subscribe(board, cursor, who.token_id)
    receiver = asyncio.ensure_future(_drain(ws))
    try:
        cursor = await _flush(ws, db, sub, cursor, always=True)
        while not sub.revoked:
            waiter = asyncio.ensure_future(sub.wake.wait())
            done, _ = await asyncio.wait({waiter, receiver}, return_when=asyncio.FIRST_COMPLETED)
            if receiver in done:
                waiter.cancel()
                break
            sub.wake.clear()
            if sub.revoked:
                break
            cursor = await _flush(ws, db, sub, cursor)
        if sub.revoked:
            await _close(ws, CLOSE_UNAUTHORIZED, "UNAUTHORIZED")
    except (WebSocketDisconnect, RuntimeError, ConnectionError):
        pass
    finally:
        hub.unsubscribe(sub)
        receiver.cancel()
        if ws.application_state == WebSocketState.CONNECTED and ws.client_state == WebSocketState.CONNECTED:
            await _close(ws, 1000, "")


async def _flush(ws: WebSocket, db: Database, sub: Subscription, cursor: int, *, always: bool = False) -> int:
    """Send every event after ``cursor`` (in batches); return the new cursor. Nothing is sent
    once the socket's token is no longer valid (``sub.revoked`` is set instead)."""
    while True:
        rows = await anyio.to_thread.run_sync(_events_after, db, sub, cursor)
        if rows is None:
            sub.revoked = True
            return cursor
        if rows:
            cursor = int(rows[-1]["id"])
        if rows or always:
            await ws.send_text(dumps({"events": [_event_out(r) for r in rows], "cursor": cursor}).decode())
            always = False
        if len(rows) < BATCH:
            return cursor


def _events_after(db: Database, sub: Subscription, cursor: int) -> list[EventRow] | None:
    """The next events of the socket's board, or None when its token is no longer valid."""
    if not tokens.still_valid(db, [sub.token_id]):
        return None
    return queries.events_after(db, sub.board, cursor, limit=BATCH)


async def _drain(ws: WebSocket) -> None:
    """Read (and ignore) client messages until the client goes away."""
    try:
        while True:
            msg = await ws.receive()
            if msg["type"] == "websocket.disconnect":
                return
    except Exception:
        return
