"""Points in time given on the command line: ISO-8601, epoch seconds, or a duration from now."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from .errors import InvalidInput
from .model import duration

_NUMBER = re.compile(r"\s*\d+(\.\d+)?\s*")


def point_in_time(value: str | float | int, now: float, *, past: bool) -> float:
    """Epoch seconds for ``value``: an ISO-8601 time (``2026-12-01T09:00``, UTC unless it carries
    an offset), epoch seconds (``1764579600``), or a duration (``30m``, ``2h``, ``1d``) counted
    back from ``now`` when ``past`` (``--since 24h``) and forward otherwise (``--not-before 2h``)."""
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    if re.fullmatch(r"\d+[smhd]", text):
        secs = float(duration(text) or 0)
        return now - secs if past else now + secs
    if _NUMBER.fullmatch(text) and len(text.split(".")[0]) >= 9:
        return float(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"invalid time {value!r}: use an ISO-8601 time (2026-12-01T09:00, UTC unless an offset "
            "is given), epoch seconds, or a duration such as 30m, 2h, 1d") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def iso(ts: float) -> str:
    """``ts`` as an ISO-8601 UTC time with seconds."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
