"""A background loop's log while the database is away: one line when it starts, one a minute,
one when it is over; the pauses between tries grow to 8 s."""

from __future__ import annotations

import logging

import pytest

from agentboard.domain.errors import Unavailable
from agentboard.observe import outage
from agentboard.observe.outage import Outage

log = logging.getLogger("agentboard.test.outage")


def test_an_outage_is_logged_when_it_starts_and_ends_with_growing_pauses(caplog: pytest.LogCaptureFixture) -> None:
    gone = Unavailable("cannot open the database: connection refused\n\tIs the server running on that host?")
    o = Outage(log, "notifier cycle")
    with caplog.at_level(logging.INFO, logger="agentboard.test.outage"):
        pauses = [o.failed(gone) for _ in range(6)]
        assert o.down
        o.over()
        o.over()  # nothing more to say
    assert pauses == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "notifier cycle failed: cannot open the database: connection refused Is the server running on that host?; "
        "trying again every 8 s at most",
        "notifier cycle works again: 6 tries failed over 0 s",
    ]
    assert not o.down


def test_a_long_outage_is_logged_again_once_a_minute(caplog: pytest.LogCaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(outage.time, "monotonic", lambda: now[0])
    o = Outage(log, "dispatcher pass")
    with caplog.at_level(logging.INFO, logger="agentboard.test.outage"):
        for _ in range(30):  # 30 tries 8 s apart: four minutes
            o.failed(Unavailable("cannot open the database"))
            now[0] += 8.0
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4  # at 0, 64, 128 and 192 s
    assert lines[1] == "dispatcher pass failed: cannot open the database; 9 tries failed over 64 s"
