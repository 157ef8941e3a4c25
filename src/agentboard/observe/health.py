"""Health checks: ``/healthz`` (the process answers) and ``/readyz`` (it can do its work).

Ready means, in order: the database answers one statement; its schema is at the newest
migration of this version (or at a newer one a newer version migrated it to during a rolling
upgrade: this process keeps working then, and the check says to upgrade it before a restart); a
dispatcher passes on it: the one in this process (when there is
one) finished a pass recently, else some dispatcher host left a pass mark on the database
recently (``kernel.monitoring.mark_pass``). "Recently": within twice ``dispatch_interval`` plus
:data:`PASS_SLACK` seconds, since an idle dispatcher passes once per interval. A failing check is
named with a reason that carries no secret (never the database URL).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..config import Settings
from ..store.engine import Database

#: seconds added to twice the dispatch interval before a dispatcher counts as gone
PASS_SLACK = 30.0


class PassingDispatcher(Protocol):
    last_pass_at: float


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, **({"detail": self.detail} if self.detail else {})}


def head_revision() -> str:
    """The newest migration this version carries (``store.migrate.HEAD``, which migrating checks
    against: reading the migration scripts with Alembic takes seconds on a busy machine, longer
    than a probe waits for its first answer)."""
    from ..store.migrate import HEAD

    return HEAD


def pass_window(settings: Settings) -> float:
    return 2 * float(settings.dispatch_interval) + PASS_SLACK


def readiness(db: Database, settings: Settings, dispatcher: object | None = None,
              now: float | None = None) -> list[Check]:
    """The checks in order; the first that fails ends the list."""
    from ..kernel import monitoring
    from ..store.migrate import current_revision, known_revisions

    now = time.time() if now is None else now
    checks: list[Check] = []
    try:
        monitoring.ping(db)
    except Exception as exc:
        reason = "unavailable" if type(exc).__name__ == "Unavailable" else type(exc).__name__
        return [Check("database", False, f"the database does not answer ({reason})")]
    checks.append(Check("database", True))
    try:
        revision = current_revision(db)
    except Exception:
        return [*checks, Check("migrations", False, "the schema revision could not be read")]
    head = head_revision()
    if revision != head and revision is not None and revision not in known_revisions():
        # a newer agentboard migrated it (a rolling upgrade, docs/deploy.md): this process keeps
        # working against the newer schema, so it stays ready; restarted, this version would
        # refuse the database, so it says what to do
        checks.append(Check("migrations", True, f"a newer agentboard migrated the database to revision {revision} "
                                                f"(this version knows up to {head}): this process keeps working; "
                                                "upgrade agentboard on this host before restarting it "
                                                "(docs/deploy.md, Upgrades)"))
    elif revision != head:
        return [*checks, Check("migrations", False, f"the database is at revision {revision or 'none'}, "
                                                   f"this version needs {head}: run any agentboard command "
                                                   "on it to migrate")]
    else:
        checks.append(Check("migrations", True))
    window = pass_window(settings)
    if dispatcher is not None:
        last = float(getattr(dispatcher, "last_pass_at", 0.0) or 0.0)
        if now - last > window:
            what = f"{now - last:.0f} s ago" if last else "not yet"
            return [*checks, Check("dispatcher", False, f"this process's dispatcher last passed {what}")]
    else:
        try:
            marks = monitoring.dispatcher_passes(db)
        except Exception:
            return [*checks, Check("dispatcher", False, "the dispatchers' pass marks could not be read")]
        if not any(now - m["at"] <= window for m in marks):
            return [*checks, Check("dispatcher", False, f"no dispatcher passed in the last {window:.0f} s")]
    checks.append(Check("dispatcher", True))
    return checks


class PassMarks:
    """A dispatcher's pass marks on the database, at most every ``PASS_MARK_EVERY`` seconds; and,
    once :meth:`keep` runs, a mark that it lives every ``PASS_MARK_EVERY`` seconds between passes
    (an idle dispatcher passes once per ``dispatch_interval``, which may be minutes): the host id
    it holds stays held while it lives, whatever the interval (``dispatch/host_id.py``)."""

    def __init__(self, db: Database, host: str, boards: list[str] | None, *, by: dict[str, Any] | None = None,
                 held: Callable[[dict[str, Any], float], bool] | None = None,
                 on_held: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.db = db
        self.host = host
        self.boards = boards
        #: who marks, and whether a mark found on the host keeps its id from us
        #: (``kernel.monitoring.mark_pass``); ``on_held`` hears of such a mark (nothing written)
        self.by, self.held, self.on_held = by, held, on_held
        #: when a pass was last marked, when any mark was last written, and the last pass
        self._at = 0.0
        self._written = 0.0
        self._last_pass = 0.0
        #: one mark written at a time (the pass thread's and the keeper's)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None

    def mark(self, at: float, seen: float | None = None) -> dict[str, Any] | None:
        """Write the mark now (a pass at ``at``; alive at ``seen``, default ``at``); the mark that
        holds the host id instead (nothing written), if any."""
        from ..kernel import monitoring

        with self._lock:
            if seen is None:
                self._at = at
                self._last_pass = max(self._last_pass, at)
            self._written = time.time() if seen is None else seen
            return monitoring.mark_pass(self.db, self.host, at, self.boards, by=self.by, held=self.held, seen=seen)

    def passed(self, at: float) -> None:
        from ..kernel import monitoring

        self._last_pass = max(self._last_pass, at)
        if at - self._at < monitoring.PASS_MARK_EVERY:
            return
        try:
            other = self.mark(at)
        except Exception:  # a mark that could not be written is written by a later pass
            self._at = 0.0
            return
        if other is not None and self.on_held is not None:
            self.on_held(other)

    def alive(self, now: float) -> None:
        """Between passes: mark that this dispatcher lives (its last pass kept), unless a mark
        was written within ``PASS_MARK_EVERY`` seconds."""
        from ..kernel import monitoring

        if now - self._written < monitoring.PASS_MARK_EVERY:
            return
        try:
            other = self.mark(self._last_pass or now, seen=now)
        except Exception:  # the database out of reach: the passes say so; tried again later
            return
        if other is not None and self.on_held is not None:
            self.on_held(other)

    def keep(self) -> None:
        """Mark that this dispatcher lives, on a thread of its own, until :meth:`stop`."""
        if self._keeper is not None:
            return
        from ..kernel import monitoring

        self._stop.clear()
        every = monitoring.PASS_MARK_EVERY

        def run() -> None:
            while not self._stop.wait(max(0.5, every - (time.time() - self._written))):
                self.alive(time.time())

        self._keeper = threading.Thread(target=run, name="agentboard-host-mark", daemon=True)
        self._keeper.start()

    def stop(self) -> None:
        self._stop.set()
        if self._keeper is not None:
            self._keeper.join(10)
            self._keeper = None
