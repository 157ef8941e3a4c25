"""Wake-up: run a pass as soon as something changes, not at the next tick.

Sources: commits in this process (``db.add_listener``), a worker process of ours exiting, and
changes by other processes — on SQLite a cheap poll of ``PRAGMA data_version`` on a dedicated
connection (it changes whenever another connection commits), on PostgreSQL ``LISTEN
agentboard_events`` (every event-writing transaction notifies) on a connection of its own, to
``pg_listen_url`` when set (the server itself, when the database URL is a transaction-mode pooler:
without it a dispatcher behind such a pooler listens to nothing and says so as it starts, and
other processes' changes wait for its interval pass). The dispatch interval is only the fallback.

A wake-up says whether it was asked for (:meth:`Waker.set`: a worker of ours exited, "dispatch
now") or only saw a change somewhere (a commit, a notification): the dispatcher may skip the
pass of a change that cannot concern it (:mod:`.dispatcher`).
"""

from __future__ import annotations

import logging
import sqlite3
import threading

from ..store.engine import Database, application_name

log = logging.getLogger("agentboard.dispatch")

SQLITE_POLL = 0.02
SQLITE_RETRY = 1.0
#: said once as a dispatcher starts behind a transaction-mode pooler with no ``pg_listen_url``
NO_LISTEN_URL = ("wake-ups need pg_listen_url: LISTEN through a transaction-mode pooler (pg_transaction_pooler) "
                 "receives nothing, so this dispatcher does not hear of other processes' changes and new work "
                 "waits for its next interval pass (dispatch_interval, %.0f s); set AGENTBOARD_PG_LISTEN_URL to "
                 "the server's own URL (docs/deploy.md, \"PgBouncer in transaction mode\")")


class Waker:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._flag = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listener = lambda _boards: self._flag.set()
        #: a pass was asked for (not only a change seen) since the last wait
        self._asked = False
        self._lock = threading.Lock()

    def set(self) -> None:
        """Ask for a pass (a worker exited, "dispatch now")."""
        with self._lock:
            self._asked = True
            self._flag.set()

    def wait(self, timeout: float) -> bool:
        """Block until woken or ``timeout``; True when woken. Clears the flag."""
        return self.wait_for(timeout) is not None

    def wait_for(self, timeout: float) -> str | None:
        """Block until woken or ``timeout``: None at the timeout, ``"asked"`` when a pass was
        asked for (:meth:`set`), ``"changed"`` when only a change was seen. Clears the flag."""
        woke = self._flag.wait(max(0.0, timeout))
        with self._lock:
            self._flag.clear()
            asked, self._asked = self._asked, False
        if not woke:
            return "asked" if asked else None
        return "asked" if asked else "changed"

    def start(self) -> None:
        self.db.add_listener(self._listener)
        st = self.db.settings
        if self.db.dialect == "postgresql" and st.pg_transaction_pooler and not st.pg_listen_url:
            # a LISTEN through a transaction-mode pool receives nothing (its server session goes back
            # to the pool, and another client's may get the notifications): no listener at all
            log.warning(NO_LISTEN_URL, float(st.dispatch_interval))
            return
        target = self._listen_pg if self.db.dialect == "postgresql" else self._poll_sqlite
        self._thread = threading.Thread(target=target, name="agentboard-wake", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.db.remove_listener(self._listener)
        self._flag.set()
        if self._thread is not None:
            self._thread.join(timeout=3)

    # -- SQLite ------------------------------------------------------------------------------

    def _poll_sqlite(self) -> None:
        path = self.db.engine.url.database or ":memory:"
        conn: sqlite3.Connection | None = None
        last = None
        while not self._stop.is_set():
            try:
                if conn is None:
                    conn = sqlite3.connect(path, timeout=5, check_same_thread=False, isolation_level=None)
                value = conn.execute("PRAGMA data_version").fetchone()[0]
                if last is not None and value != last:
                    self._flag.set()
                last = value
            except sqlite3.Error:
                if conn is not None:
                    conn.close()
                conn = None
                if last is not None:  # one pass per outage, then a slow retry (no busy loop)
                    self.set()
                last = None
                self._stop.wait(SQLITE_RETRY)
                continue
            self._stop.wait(SQLITE_POLL)
        if conn is not None:
            conn.close()

    # -- PostgreSQL --------------------------------------------------------------------------

    def _listen_pg(self) -> None:
        import psycopg

        direct = self.db.settings.pg_listen_url  # LISTEN needs a session: not a transaction-mode pool
        url = (direct.replace("postgresql+psycopg://", "postgresql://", 1) if direct
               else self.db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False))
        while not self._stop.is_set():
            try:
                with psycopg.connect(url, autocommit=True, connect_timeout=5, application_name=application_name()) as conn:
                    conn.execute("LISTEN agentboard_events")
                    self.set()  # changes made while we were not listening: a full pass
                    while not self._stop.is_set():
                        for _n in conn.notifies(timeout=0.5, stop_after=64):
                            self._flag.set()
            except Exception:
                self.set()
                self._stop.wait(1.0)
