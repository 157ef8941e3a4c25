"""Health checks: ``/healthz`` (the process answers) and ``/readyz`` (it can do its work).

Ready means, in order: the database answers one statement; its schema is at the newest
migration of this version; a dispatcher passes on it: the one in this process (when there is
one) finished a pass recently, else some dispatcher host left a pass mark on the database
recently (``kernel.monitoring.mark_pass``). "Recently": within twice ``dispatch_interval`` plus
:data:`PASS_SLACK` seconds, since an idle dispatcher passes once per interval. A failing check is
named with a reason that carries no secret (never the database URL).
"""

from __future__ import annotations

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
    from ..store.migrate import current_revision

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
    if revision != head:
        return [*checks, Check("migrations", False, f"the database is at revision {revision or 'none'}, "
                                                   f"this version needs {head}: run any agentboard command "
                                                   "on it to migrate")]
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
    """A dispatcher's pass marks on the database, at most every ``PASS_MARK_EVERY`` seconds."""

    def __init__(self, db: Database, host: str, boards: list[str] | None, *, by: dict[str, Any] | None = None,
                 held: Callable[[dict[str, Any], float], bool] | None = None,
                 on_held: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.db = db
        self.host = host
        self.boards = boards
        #: who marks, and whether a mark found on the host keeps its id from us
        #: (``kernel.monitoring.mark_pass``); ``on_held`` hears of such a mark (nothing written)
        self.by, self.held, self.on_held = by, held, on_held
        self._at = 0.0

    def mark(self, at: float) -> dict[str, Any] | None:
        """Write the mark now; the mark that holds the host id instead (nothing written), if any."""
        from ..kernel import monitoring

        self._at = at
        return monitoring.mark_pass(self.db, self.host, at, self.boards, by=self.by, held=self.held)

    def passed(self, at: float) -> None:
        from ..kernel import monitoring

        if at - self._at < monitoring.PASS_MARK_EVERY:
            return
        try:
            other = self.mark(at)
        except Exception:  # a mark that could not be written is written by a later pass
            self._at = 0.0
            return
        if other is not None and self.on_held is not None:
            self.on_held(other)
