"""Five-field cron expressions (minute hour day-of-month month day-of-week), in UTC.

``*``, lists (``1,15``), ranges (``1-5``), steps (``*/15``, ``0-30/10``), names (``mon``-``sun``,
``jan``-``dec``) and the shorthands ``@hourly``, ``@daily``, ``@weekly``, ``@monthly``,
``@yearly``. As in cron, when both day-of-month and day-of-week are restricted a day matching
either one matches. Day-of-week 0 and 7 are Sunday.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .errors import InvalidInput

_ALIASES = {
    "@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *",
}
_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)}
_DAYS = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
_NONE: dict[str, int] = {}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (("minute", 0, 59, _NONE), ("hour", 0, 23, _NONE), ("day of month", 1, 31, _NONE),
           ("month", 1, 12, _MONTHS), ("day of week", 0, 7, _DAYS))
#: how far ahead the next occurrence is looked for (an expression such as Feb 30 never fires)
HORIZON_DAYS = 366 * 5


def _value(text: str, names: dict[str, int], what: str) -> int:
    t = text.lower()
    if t in names:
        return names[t]
    if not t.isdigit():
        raise InvalidInput(f"cron {what}: {text!r} is not a number")
    return int(t)


def _field(text: str, what: str, lo: int, hi: int, names: dict[str, int]) -> frozenset[int]:
    out: set[int] = set()
    for part in text.split(","):
        rng, _, step_s = part.partition("/")
        step = 1
        if step_s:
            if not step_s.isdigit() or int(step_s) < 1:
                raise InvalidInput(f"cron {what}: bad step in {part!r}")
            step = int(step_s)
        if rng == "*":
            a, b = lo, hi
        elif "-" in rng:
            a_s, b_s = rng.split("-", 1)
            a, b = _value(a_s, names, what), _value(b_s, names, what)
        else:
            a = _value(rng, names, what)
            b = hi if step_s else a
        if not (lo <= a <= hi and lo <= b <= hi) or a > b:
            raise InvalidInput(f"cron {what}: {part!r} is outside {lo}-{hi}")
        out.update(range(a, b + 1, step))
    return frozenset(out)


@dataclass(frozen=True)
class Cron:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool
    any_weekday: bool

    def _day_ok(self, dt: datetime) -> bool:
        dom = dt.day in self.days
        dow = (dt.isoweekday() % 7) in self.weekdays
        if self.any_day and self.any_weekday:
            return True
        if self.any_day:
            return dow
        if self.any_weekday:
            return dom
        return dom or dow

    def next_after(self, ts: float) -> float:
        """The first occurrence strictly after ``ts`` (epoch seconds)."""
        dt = datetime.fromtimestamp(ts, tz=UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        end = dt + timedelta(days=HORIZON_DAYS)
        while dt < end:
            if dt.month not in self.months:
                dt = (dt.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
                continue
            if not self._day_ok(dt):
                dt = dt.replace(hour=0, minute=0) + timedelta(days=1)
                continue
            if dt.hour not in self.hours:
                dt = dt.replace(minute=0) + timedelta(hours=1)
                continue
            if dt.minute not in self.minutes:
                dt += timedelta(minutes=1)
                continue
            return dt.timestamp()
        raise InvalidInput(f"cron {self.text!r} never fires")

    def occurrences(self, after: float, until: float, limit: int = 10_000) -> list[float]:
        """Occurrences in (after, until], oldest first (at most ``limit``)."""
        out: list[float] = []
        t = after
        while len(out) < limit:
            t = self.next_after(t)
            if t > until:
                break
            out.append(t)
        return out


def parse(text: str) -> Cron:
    """Parse a cron expression (``InvalidInput`` naming the bad field)."""
    raw = " ".join(str(text or "").split())
    expr = _ALIASES.get(raw.lower(), raw)
    parts = expr.split(" ")
    if len(parts) != 5:
        raise InvalidInput(f"cron {text!r} must have 5 fields (minute hour day-of-month month day-of-week), "
                           "e.g. \"0 9 * * 1-5\", or be @hourly/@daily/@weekly/@monthly/@yearly")
    sets = [_field(p, what, lo, hi, names) for p, (what, lo, hi, names) in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in sets[4])
    cron = Cron(raw, sets[0], sets[1], sets[2], sets[3], weekdays, parts[2] == "*", parts[4] == "*")
    cron.next_after(0)  # refuse an expression that never fires
    return cron
