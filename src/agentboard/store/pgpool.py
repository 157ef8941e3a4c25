"""PostgreSQL: this process's pool of connections for the kernel's transactions.

A checkout takes the most recently returned idle connection (a few of them stay warm, with their
prepared statements) and a checkin puts it back; neither sends anything to the server. A
connection comes back idle from every transaction (the pipeline rolls back what a verb left
open); one that does not is rolled back here, and a broken one is closed. At most ``size``
connections are kept idle; up to ``size + overflow`` may be open at once, past which a checkout
waits up to ``timeout`` seconds for one to come back.

The SQLAlchemy pool this replaces cost 30–100 µs of the client's
CPU per transaction (a proxy and its finalizer, events, a reset on every return: 32–49 µs a
checkout and checkin of an idle connection on the development machine, 11–16 with this pool, and
110–200 less of the client's CPU per completion).

An idle connection the server has ended meanwhile (a restart, a failover, ``pg_terminate_backend``,
an idle timeout) is never handed out: the server says so on the socket before it closes it, so a
checkout looks whether the idle connection's socket has anything to read (one ``poll`` with no
wait, about a microsecond) and closes it if so. After a restart of the server the next verbs run on new connections instead of failing
once per connection that was idle.
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable
from typing import Any

from psycopg import pq

_IDLE = pq.TransactionStatus.IDLE
_BAD = pq.ConnStatus.BAD


class PoolTimeout(Exception):
    """Every connection stayed busy for the pool's timeout."""


class PgPool:
    """Connections made by ``connect``; see the module's text."""

    def __init__(self, connect: Callable[[], Any], *, size: int, overflow: int, timeout: float) -> None:
        self._connect = connect
        self.size = max(1, size)
        self.limit = self.size + max(0, overflow)
        self.timeout = timeout
        self._cond = threading.Condition(threading.Lock())
        self._idle: list[Any] = []
        #: connections open (idle, checked out, or being opened)
        self._open = 0
        self._closed = False
        #: checkouts that found every connection busy, and the seconds they waited
        self.waits = 0
        self.wait_seconds = 0.0
        #: idle connections found ended by the server at a checkout (closed, never handed out)
        self.dead = 0
        #: ``(on checkout, on checkin)`` pairs called with each connection handed out and given
        #: back (a tool tracing the protocol); none by default
        self.watchers: list[tuple[Callable[[Any], None], Callable[[Any], None]]] = []

    def get(self) -> Any:
        """An idle connection, a new one, or (all ``limit`` busy) one returned within the timeout."""
        conn = self._get()
        for on_get, _ in self.watchers:
            on_get(conn)
        return conn

    def _get(self) -> Any:
        cond = self._cond
        while True:
            conn = None
            with cond:
                if self._idle:
                    conn = self._idle.pop()
                elif self._open >= self.limit:
                    started = time.monotonic()
                    deadline = started + self.timeout
                    self.waits += 1
                    while not self._idle and self._open >= self.limit:
                        left = deadline - time.monotonic()
                        if left <= 0 or not cond.wait(left):
                            if self._idle or self._open < self.limit:
                                break
                            self.wait_seconds += time.monotonic() - started
                            raise PoolTimeout()
                    self.wait_seconds += time.monotonic() - started
                    if self._idle:
                        conn = self._idle.pop()
                if conn is None:
                    self._open += 1
            if conn is None:
                try:
                    return self._connect()
                except BaseException:
                    with cond:
                        self._open -= 1
                        cond.notify()
                    raise
            if _alive(conn):
                return conn
            with cond:  # ended by the server while idle: closed, and the next one tried
                self._open -= 1
                self.dead += 1
                cond.notify()
            _close(conn)

    def put(self, conn: Any, *, broken: bool = False) -> None:
        """Give ``conn`` back (``broken``: close it). A transaction left open is rolled back."""
        for _, on_put in self.watchers:
            on_put(conn)
        if not broken and not conn.closed:
            try:
                if conn.pgconn.transaction_status != _IDLE:
                    conn.rollback()
                broken = conn.pgconn.transaction_status != _IDLE
            except Exception:
                broken = True
        else:
            broken = True
        with self._cond:
            if not broken and not self._closed and len(self._idle) < self.size:
                self._idle.append(conn)
                self._cond.notify()
                return
            self._open -= 1
            self._cond.notify()
        _close(conn)

    def state(self) -> tuple[int, int]:
        """``(checked out, idle)``."""
        with self._cond:
            return self._open - len(self._idle), len(self._idle)

    def close(self) -> None:
        """Close the idle connections; those checked out are closed as they come back."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
        for conn in idle:
            try:
                conn.close()
            except Exception:  # pragma: no cover
                pass

    def forget(self) -> None:
        """In a child after ``fork()``: the parent's connections are not ours (never closed here)."""
        self._cond = threading.Condition(threading.Lock())
        self._idle = []
        self._open = 0


def _alive(conn: Any) -> bool:
    """Whether an idle connection is still open. The server sends nothing to an idle session
    that listens to nothing (the pool's never do), except its end: an error (a restart, an
    administrator's command, a timeout), then the end of the stream. So anything to read on the
    socket means the connection is over."""
    try:
        pg = conn.pgconn
        if pg.status == _BAD:
            return False
        poller = select.poll()
        poller.register(pg.socket, select.POLLIN)
        return not poller.poll(0)
    except Exception:  # noqa: BLE001 - a socket libpq no longer has: not usable
        return False


def _close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # pragma: no cover - closing a broken connection
        pass


__all__ = ["PgPool", "PoolTimeout"]
