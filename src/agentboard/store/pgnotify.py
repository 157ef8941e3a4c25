"""PostgreSQL: listeners (``LISTEN agentboard_events``: the dispatchers' wake-up) hear of
commits that wrote events.

Not from the writing transaction: a transaction that notifies holds one lock for the whole
server from its pre-commit until its commit is flushed to disk, so every writer's commit would
wait for every other's. Not one per commit either: a separate notifying transaction per verb
costs the server as much as a third of the verb. Each process has one notifier thread with a
connection of its own: a commit marks its boards as changed, and the thread sends one
``pg_notify`` (its own transaction, ``synchronous_commit`` off) for everything marked since its
last one, at most every ``spacing`` seconds (20 ms). A listener hears of the first commit after a
quiet spell within milliseconds, of the ones that follow it within 20 ms; a process that exits
sends what is pending first (``atexit``); a notification that cannot be sent is dropped
(listeners also look at their fallback interval).
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from typing import Any

CHANNEL = "agentboard_events"
#: the notifiers' sessions, which the event horizon leaves out (a notifying transaction takes a
#: transaction id, and writes no event)
APPLICATION = "agentboard-notify"
#: seconds between two notifications of one process at least: the first commit after a quiet
#: spell is told at once, the commits that follow it within this share one notification. A
#: notification is a transaction of the notifier's (about a quarter of a millisecond of the client's
#: and the server's CPU together): at 5 ms, a process completing a thousand tasks a second spent
#: 0.1 ms of CPU per completion on them; at 20 ms, a quarter of that
SPACING = 0.02

_live: weakref.WeakSet[Notifier] = weakref.WeakSet()


class Notifier:
    """The notifier of one :class:`~agentboard.store.engine.Database` in one process."""

    def __init__(self, conninfo: str, options: str, *, spacing: float = SPACING, pooled: bool = False) -> None:
        self._conninfo = conninfo
        self._options = options
        #: through a pooler in transaction mode: no startup options, no prepared statements
        self._pooled = pooled
        self._spacing = spacing
        self._cond = threading.Condition()
        self._boards: set[str] = set()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._conn: Any = None
        self._send_lock = threading.Lock()
        _live.add(self)

    def changed(self, boards: set[str]) -> None:
        """Boards with new events committed (called after the commit). Boards already pending
        are left as they are: the thread has not taken them yet, so the notification it sends
        next comes after this commit (every commit of a busy process comes here)."""
        if self._thread is not None and boards <= self._boards:
            return
        with self._cond:
            if self._closed:
                return
            self._boards |= boards
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agentboard-notify", daemon=True)
                self._thread.start()
            self._cond.notify()

    def flush(self) -> None:
        """Send what is pending now, after any notification being sent (a process about to
        exit: the thread may have taken the boards and not sent them yet)."""
        self._send_pending()

    def close(self) -> None:
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify()
        with self._send_lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                except Exception:  # pragma: no cover
                    pass
                self._conn = None

    def forked(self) -> None:
        """In a child after ``fork()``: the parent's thread and connection are not ours."""
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._thread = None
        self._conn = None
        self._boards = set()

    def _run(self) -> None:
        last = 0.0
        while True:
            with self._cond:
                while not self._boards and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
            pause = last + self._spacing - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            self._send_pending()
            last = time.monotonic()

    def _send_pending(self) -> None:
        with self._send_lock:
            with self._cond:
                boards, self._boards = self._boards, set()
            if not boards:
                return
            payload = ",".join(sorted(boards))[:2000]
            try:
                if self._conn is None:
                    import psycopg

                    if self._pooled:
                        self._conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=5,
                                                     application_name=APPLICATION, prepare_threshold=None)
                    else:
                        self._conn = psycopg.connect(
                            self._conninfo, autocommit=True, connect_timeout=5, application_name=APPLICATION,
                            options=self._options + " -c synchronous_commit=off",
                        )
                if self._pooled:  # the setting for this one statement's transaction only
                    self._conn.execute("SELECT set_config('synchronous_commit', 'off', true), pg_notify(%s, %s)",
                                       (CHANNEL, payload))
                else:
                    self._conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
            except Exception:
                # listeners catch up at their fallback interval; the next commit reconnects
                if self._conn is not None:
                    try:
                        self._conn.close()
                    except Exception:  # pragma: no cover
                        pass
                self._conn = None


@atexit.register
def _flush_all() -> None:
    for notifier in list(_live):
        try:
            notifier.flush()
        except Exception:  # pragma: no cover - exiting anyway
            pass


__all__ = ["APPLICATION", "CHANNEL", "SPACING", "Notifier"]
