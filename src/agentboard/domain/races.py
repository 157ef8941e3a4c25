"""A race's entries and when it ends, as given (``--race P1,P2:MODEL``, ``--race-until``).

See ``docs/races.md``; the kernel's verbs are ``kernel/races.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from . import model
from .errors import InvalidInput

#: when a race is settled: when every attempt has finished, or at the first that passes
UNTIL: tuple[str, ...] = ("all", "first-pass")
#: the most attempts one race may have
MAX_ATTEMPTS = 8


@dataclass(frozen=True)
class Entry:
    """One attempt of a race: the profile that runs it, and the model it runs with (None: the
    task's, else the profile's)."""

    profile: str
    model: str | None = None

    def spec(self) -> str:
        return self.profile + (f":{self.model}" if self.model else "")


def parse(items: str | Iterable[str] | None) -> tuple[Entry, ...]:
    """``P1,P2:MODEL,…`` (or several such items) as entries; raises ``InvalidInput``."""
    if items is None:
        return ()
    given = [items] if isinstance(items, str) else list(items)
    parts = [p.strip() for item in given for p in str(item).split(",")]
    entries = []
    for p in (p for p in parts if p):
        name, _, mdl = p.partition(":")
        entries.append(Entry(model.profile_name(name), model.model_name(mdl) if mdl.strip() else None))
    if len(entries) < 2:
        raise InvalidInput("a race needs at least two attempts: --race P1,P2[:MODEL],… (a profile may appear twice)")
    if len(entries) > MAX_ATTEMPTS:
        raise InvalidInput(f"a race has at most {MAX_ATTEMPTS} attempts ({len(entries)} given)")
    return tuple(entries)


def until_of(value: str | None) -> str:
    """The ``--race-until`` value (default ``all``); raises ``InvalidInput``."""
    v = (value or "all").strip().lower()
    if v not in UNTIL:
        raise InvalidInput(f"invalid race_until {value!r}: use all or first-pass")
    return v


__all__ = ["Entry", "MAX_ATTEMPTS", "UNTIL", "parse", "until_of"]
