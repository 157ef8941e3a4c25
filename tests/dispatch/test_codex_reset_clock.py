"""Codex's "try again at 1:51 AM": the reset time it prints, read as the dispatcher reads it.

Codex prints when a usage limit resets as a local clock time to the minute, rounded down
(chrono's ``%-I:%M %p``), with the date (``%b %-d<suffix>, %Y``) only when the reset is not on
today's date. These tests print a reset the way Codex does and read it back at the moment the
dispatcher would (up to a minute after Codex printed it), in time zones without daylight saving
time (whose clock times are never ambiguous)."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from agentboard.agentcli import reset_time

ZONES = ["UTC", "Asia/Kathmandu", "America/Phoenix", "Pacific/Kiritimati"]
DAY = 86400


@contextlib.contextmanager
def local_zone(zone: str) -> Iterator[None]:
    before = os.environ.get("TZ")
    os.environ["TZ"] = zone
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def codex_says(reset: float, printed_at: float) -> str:
    """Codex's usage-limit message for a reset at epoch ``reset``, printed at ``printed_at``."""
    when = dt.datetime.fromtimestamp(reset)
    clock = when.strftime("%I:%M %p").lstrip("0")
    if when.date() != dt.datetime.fromtimestamp(printed_at).date():
        suffix = {1: "st", 2: "nd", 3: "rd", 21: "st", 22: "nd", 23: "rd", 31: "st"}.get(when.day, "th")
        clock = f"{when.strftime('%b')} {when.day}{suffix}, {when.year} {clock}"
    return (f"You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit "
            f"https://chatgpt.com/codex/settings/usage to purchase more credits or try again at {clock}.")


def local_midnight(day: int) -> float:
    return dt.datetime.combine(dt.date(2026, 1, 1) + dt.timedelta(days=day), dt.time()).timestamp()


# the moment Codex printed the message: around a local midnight, or around a minute's start
around_midnight = st.tuples(st.integers(0, 800), st.floats(-300, 300))
around_a_minute = st.tuples(st.integers(0, 800), st.integers(0, 1439).map(lambda m: m * 60.0).flatmap(
    lambda start: st.floats(start - 3, start + 3)))


@settings(max_examples=400, deadline=None)
@given(zone=st.sampled_from(ZONES), printed=st.one_of(around_midnight, around_a_minute),
       reset_in=st.one_of(st.floats(0, 180), st.floats(0, 7 * DAY)), read_after=st.floats(0, 60))
def test_a_codex_reset_time_is_read_as_at_most_a_minute_after_the_real_reset_never_a_day_later(
        zone: str, printed: tuple[int, float], reset_in: float, read_after: float) -> None:
    with local_zone(zone):
        day, offset = printed
        printed_at = local_midnight(day) + offset
        reset = printed_at + reset_in
        now = printed_at + read_after

        until = reset_time(codex_says(reset, printed_at), now=now)

        assert until is not None
        assert until >= now
        # never before the minute printed starts (the zones' offsets are whole minutes), never
        # more than a minute after the real reset (or after now, for a reset already past when
        # the dispatcher reads it)
        assert until >= reset - reset % 60
        assert until <= max(reset, now) + 60, (until - now, codex_says(reset, printed_at))


def test_a_thirty_second_codex_rate_limit_read_in_its_minute_ends_within_the_minute() -> None:
    with local_zone("UTC"):
        now = dt.datetime(2026, 12, 6, 1, 51, 14).timestamp()  # the reset is at 01:51:44
        until = reset_time("You've hit your usage limit. … or try again at 1:51 AM.", now=now)
        assert until == dt.datetime(2026, 12, 6, 1, 52).timestamp()  # 46 s from now, not 24 h


def test_a_codex_reset_printed_just_before_midnight_and_read_after_it_is_now_not_tonight() -> None:
    with local_zone("UTC"):
        now = dt.datetime(2026, 12, 7, 0, 0, 20).timestamp()
        assert reset_time("… or try again at 11:59 PM.", now=now) == dt.datetime(2026, 12, 7, 0, 0, 20).timestamp()
        # with the date, the same
        said = "… or try again at Dec 6th, 2026 11:59 PM."
        assert reset_time(said, now=now) == dt.datetime(2026, 12, 7, 0, 0, 20).timestamp()


def test_a_codex_reset_time_later_today_or_long_past_keeps_its_meaning() -> None:
    with local_zone("UTC"):
        now = dt.datetime(2026, 12, 6, 15, 54, 20).timestamp()
        assert reset_time("try again at 3:55 PM", now=now) == dt.datetime(2026, 12, 6, 15, 55).timestamp()
        # a time alone well in the past is tomorrow's
        assert reset_time("try again at 3:50 PM", now=now) == dt.datetime(2026, 12, 7, 15, 50).timestamp()
        # a dated reset well in the past or beyond eight days is no reset time
        assert reset_time("try again at Dec 5th, 2026 3:50 PM", now=now) is None
        assert reset_time("try again at Dec 30th, 2026 3:50 PM", now=now) is None
