"""A background loop's account of the database being out of reach (a restart, a failover, the
network): how long to pause before the next try, and what to log.

A loop that meets :class:`~agentboard.domain.errors.Unavailable` calls :meth:`Outage.failed`,
which answers the pause before its next try (1, 2, 4, then 8 s: whatever wakes the loop
meanwhile) and logs one line when the outage starts and one a minute while it lasts; the loop's
next success calls :meth:`Outage.over`, which logs one line saying how long it lasted. The
message is the error's on one line (libpq's own run over several). Other errors are the loop's
to log with their traceback: they are not expected.
"""

from __future__ import annotations

import logging
import time

from ..domain.errors import one_line

#: the pause before the first try again, in seconds; it doubles up to :data:`PAUSE_MAX`
PAUSE_FIRST = 1.0
PAUSE_MAX = 8.0
#: while an outage lasts, it is logged again this often (seconds)
LOG_EVERY = 60.0


class Outage:
    """The database out of reach for one loop (``what``: the loop, as its log lines name it)."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self.log = log
        self.what = what
        #: tries failed in a row
        self.failures = 0
        self._since = 0.0
        self._logged = 0.0

    @property
    def down(self) -> bool:
        return self.failures > 0

    def failed(self, exc: BaseException) -> float:
        """One more try failed; the seconds to wait before the next."""
        now = time.monotonic()
        self.failures += 1
        if self.failures == 1:
            self._since = self._logged = now
            self.log.warning("%s failed: %s; trying again every %.0f s at most", self.what, one_line(exc), PAUSE_MAX)
        elif now - self._logged >= LOG_EVERY:
            self._logged = now
            self.log.warning("%s failed: %s; %d tries failed over %.0f s", self.what, one_line(exc), self.failures,
                             now - self._since)
        return min(PAUSE_MAX, PAUSE_FIRST * (1 << min(self.failures - 1, 8)))

    def over(self) -> None:
        """A try succeeded: the outage, if there was one, is over."""
        if self.failures:
            self.log.warning("%s works again: %d tries failed over %.0f s", self.what, self.failures,
                             time.monotonic() - self._since)
            self.failures = 0


__all__ = ["LOG_EVERY", "PAUSE_FIRST", "PAUSE_MAX", "Outage", "one_line"]
