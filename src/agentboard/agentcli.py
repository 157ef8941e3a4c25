"""What the agent CLIs (Claude Code, Codex, Gemini CLI, opencode) print, read; and how an
agent's executable is found.

Reading the output (:func:`outcome_of`, :func:`read_output`) gives the usage, cost, tool calls
and denied tools of a run, its summary, and the class of a failure: ``auth`` (no key, expired
login), ``rate_limit`` (with the reset time when the CLI printed one) or ``network``. The
dispatcher reads its workers' logs with it (``dispatch/adapters.py``, which builds the command
lines) and the board's LLM reads an agent CLI's answer with it (``agents/llm.py``), so it sits
below both.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the adapters that run an agent CLI (``command`` runs the profile's command line as it is)
CLI_ADAPTERS = ("claude", "codex", "gemini", "opencode")


class AdapterError(Exception):
    """The agent cannot be started (bad command, missing executable); the message says why."""


#: how long a program found on a ``PATH`` is remembered (:func:`find_program`)
_FOUND_TTL = 5.0
_found: dict[tuple[str, str | None], tuple[float, str]] = {}


def find_program(name: str, path_env: str | None) -> str | None:
    """``shutil.which(name, path=path_env)``, the answer remembered for a few seconds per name
    and ``PATH`` (a burst of workers starts the same program: one walk of ``PATH``, not one per
    worker). A remembered program is used only while it is still an executable file; a program
    not found is looked for again every time."""
    key = (name, path_env)
    now = time.monotonic()
    hit = _found.get(key)
    if hit is not None and hit[0] > now and os.access(hit[1], os.X_OK) and not os.path.isdir(hit[1]):
        return hit[1]
    found = shutil.which(name, path=path_env)
    if found is not None:
        if len(_found) > 1024:
            _found.clear()
        _found[key] = (now + _FOUND_TTL, found)
    return found


def resolve_executable(name: str, path_env: str | None, cwd: Path) -> str:
    """The absolute path of ``name`` (on PATH or a path), or AdapterError saying why not."""
    if os.sep in name:
        p = Path(name) if os.path.isabs(name) else cwd / name
        if not p.exists():
            raise AdapterError(f"command {name!r} does not exist")
        if p.is_dir():
            raise AdapterError(f"command {name!r} is a directory, not a program")
        if not os.access(p, os.X_OK):
            raise AdapterError(f"command {name!r} is not executable (chmod +x it)")
        return str(p)
    found = find_program(name, path_env)
    if found is None:
        raise AdapterError(f"command {name!r} was not found on PATH")
    return found


_RATE_LIMIT = re.compile(r"usage limit|rate.?limit|\b429\b|too many requests|quota|resource.?exhausted", re.I)
_AUTH = re.compile(
    r"not logged in|please run /login|/login\b|invalid api key|invalid x-api-key|authentication_error|"
    r"\b401\b|unauthori[sz]ed|oauth token has expired|token (has )?expired|login (has )?expired|"
    r"please set an auth method|api key not valid|api_key_invalid|unauthenticated|missing bearer|"
    r"incorrect api key|no api key|ProviderAuthError|ProviderModelNotFoundError|permission_denied|"
    r"could not load the default credentials|codex login|must specify the GEMINI_API_KEY", re.I)
_NETWORK = re.compile(
    r"fetch failed|econnrefused|econnreset|enotfound|eai_again|etimedout|getaddrinfo|connection refused|"
    r"connection error|connection reset|unable to connect|cannot connect to api|error sending request|"
    r"stream disconnected|waiting for network|network (error|is unreachable)|socket hang up|"
    r"dns error|timed out while connecting|overloaded|bad gateway|service unavailable", re.I)
#: lines about something other than the model's service: opencode logs that it could not fetch
#: its model catalog (models.dev) whenever it has no internet, which says nothing of the service
#: a run failed on
_NOT_THE_SERVICE = re.compile(r"Failed to fetch models\.dev", re.I)
#: the CLIs print a reset time in one of these ways
_RESET_EPOCH = re.compile(r"(?:limit reached|limit)\|(\d{10})\b", re.I)
_RESET_IN = re.compile(r"(?:try again|retry|reset[s]?)\s+(?:in|after)\s+((?:\d+(?:\.\d+)?\s*(?:days?|hours?|minutes?|mins?|"
                       r"seconds?|secs?|d|h|m|s)(?![a-z])[\s,]*(?:and\s+)?)+)", re.I)
#: Codex's "try again at 3:54 PM" (today's date; read just after midnight, yesterday's) or "try again
#: at Dec 2nd, 2026 3:54 PM", local time, to the minute (rounded down)
_RESET_AT = re.compile(r"try again at (?:([A-Z][a-z]{2}) (\d{1,2})(?:st|nd|rd|th)?,? (\d{4}) )?(\d{1,2}):(\d{2}) ?([AP]M)", re.I)
_RETRY_DELAY = re.compile(r"\"retryDelay\"\s*:\s*\"(\d+(?:\.\d+)?)s\"|retry-after\"?\s*[:=]\s*\"?(\d+)", re.I)
_UNIT = {"d": 86400, "h": 3600, "m": 60, "s": 1}
#: the longest cool-down a printed reset time may set
_RESET_MAX = 8 * 86400.0
#: how long after the end of the minute a CLI printed as its reset (to the minute) the time still
#: means that minute (read late: a slow log, a busy host), not the next day's
_CLOCK_LATE = 60.0


@dataclass
class Outcome:
    """What the agent's output says: usage, a final message, whether and how it failed."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    final_text: str | None = None
    is_error: bool = False
    rate_limited: bool = False
    #: a CLI adapter run whose output has no final event (Claude Code's and Gemini CLI's
    #: ``result``, Codex's ``turn.completed``/``turn.failed``, opencode's ``step_finish`` or
    #: ``error``): it stopped before doing any work
    no_result: bool = False
    #: ``auth``, ``rate_limit`` or ``network`` when the run failed for that reason
    failure: str | None = None
    #: when a rate limit ends (epoch seconds), when the CLI said
    retry_at: float | None = None
    #: the error the CLI reported, in one line
    error: str | None = None
    #: tool calls the agent made
    tool_uses: int = 0
    #: tool calls the permission mode refused, each as ``Tool(what)`` (Claude Code reports them)
    denied: list[str] = field(default_factory=list)


def _read_log(log_path: Path | None, since: int = 0, max_bytes: int = 4 * 1024 * 1024) -> str:
    if log_path is None or not log_path.exists():
        return ""
    try:
        size = log_path.stat().st_size
        start = max(since, size - max_bytes)
        with log_path.open("rb") as fh:
            fh.seek(start)
            data = fh.read()
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def _json_lines(log_path: Path | None, since: int = 0, max_bytes: int = 4 * 1024 * 1024) -> list[dict[str, Any]]:
    return json_events(_read_log(log_path, since, max_bytes))


def json_events(text: str) -> list[dict[str, Any]]:
    """The JSON objects of an agent's output, one per line (other lines are skipped)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


def read_output(adapter: str, log_path: Path | None, since: int = 0) -> Outcome:
    """Usage, the final message and the failure class from the part of the log this run wrote
    (from ``since``)."""
    text = _read_log(log_path, since)
    return outcome_of(adapter, json_events(text), text)


def outcome_of(adapter: str, events: list[dict[str, Any]], text: str = "") -> Outcome:
    """Usage, the final message and the failure class in the output of an agent CLI run:
    ``events`` its JSON lines, ``text`` all it printed (stderr included) when known."""
    out = Outcome()
    reader = _READERS.get(adapter)
    if reader is None:
        return out
    reader(events, out)
    if out.is_error or out.no_result:
        _classify(out, events, text)
    return out


def _claude(events: list[dict[str, Any]], out: Outcome) -> None:
    for ev in events:
        if ev.get("type") == "assistant":
            content = (ev.get("message") or {}).get("content") if isinstance(ev.get("message"), dict) else None
            if isinstance(content, list):
                out.tool_uses += sum(1 for c in content if isinstance(c, dict) and c.get("type") == "tool_use")
        if ev.get("type") != "result":
            continue
        usage = ev.get("usage") or {}
        out.input_tokens = _int(usage.get("input_tokens"))
        out.output_tokens = _int(usage.get("output_tokens"))
        cost = ev.get("total_cost_usd", ev.get("cost_usd"))
        out.cost_usd = float(cost) if isinstance(cost, int | float) else None
        out.final_text = ev.get("result") if isinstance(ev.get("result"), str) else None
        out.denied = [_denial(d) for d in ev.get("permission_denials") or [] if isinstance(d, dict)]
        out.is_error = bool(ev.get("is_error")) or ev.get("subtype") not in (None, "success")
        if out.is_error:
            out.error = _line(out.final_text or ev.get("subtype"))
    out.no_result = not any(ev.get("type") == "result" for ev in events)


def _denial(d: dict[str, Any]) -> str:
    """One refused tool call as ``Tool(its command or path)``."""
    args = _obj(d.get("tool_input"))
    what = next((str(args[k]) for k in ("command", "file_path", "path", "url", "pattern") if args.get(k)), "")
    name = str(d.get("tool_name") or "a tool")
    return f"{name}({what[:200]})" if what else name


def _codex(events: list[dict[str, Any]], out: Outcome) -> None:
    tin = tout = 0
    seen = False
    for ev in events:
        kind = ev.get("type")
        if kind == "turn.completed" and isinstance(ev.get("usage"), dict):
            seen = True
            tin += _int(ev["usage"].get("input_tokens")) or 0
            tout += _int(ev["usage"].get("output_tokens")) or 0
        elif kind in ("item.started", "item.completed") and isinstance(ev.get("item"), dict):
            item = ev["item"]
            if kind == "item.completed" and item.get("type") in ("agent_message", "assistant_message") \
                    and isinstance(item.get("text"), str):
                out.final_text = item["text"]
            elif kind == "item.started" and item.get("type") in ("command_execution", "mcp_tool_call", "file_change",
                                                                   "web_search"):
                out.tool_uses += 1
        elif kind in ("turn.failed", "error"):
            out.is_error = True
            err = _obj(ev.get("error")) or ev
            out.error = _line(err.get("message") or json.dumps(ev))
    if seen:
        out.input_tokens, out.output_tokens = tin, tout
    out.no_result = not any(ev.get("type") in ("turn.completed", "turn.failed") for ev in events)


def _gemini(events: list[dict[str, Any]], out: Outcome) -> None:
    text: list[str] = []
    for ev in events:
        kind = ev.get("type")
        if kind == "tool_use":
            out.tool_uses += 1
            text = []  # the final message is what the agent said after its last tool call
        elif kind == "message" and ev.get("role") == "assistant" and isinstance(ev.get("content"), str):
            text.append(ev["content"])
        elif kind == "error" and ev.get("severity") == "error":
            out.error = _line(ev.get("message"))
        elif kind == "result":
            stats = _obj(ev.get("stats"))
            out.input_tokens = _int(stats.get("input_tokens"))
            out.output_tokens = _int(stats.get("output_tokens"))
            if ev.get("status") != "success":
                out.is_error = True
                err = _obj(ev.get("error"))
                out.error = _line(err.get("message")) or out.error or "the run ended with an error"
    out.final_text = "".join(text).strip() or None
    out.no_result = not any(ev.get("type") == "result" for ev in events)


def _opencode(events: list[dict[str, Any]], out: Outcome) -> None:
    tin = tout = 0
    cost = 0.0
    steps = 0
    for ev in events:
        kind = ev.get("type")
        part = _obj(ev.get("part"))
        if kind == "tool_use":
            out.tool_uses += 1
        elif kind == "text" and isinstance(part.get("text"), str):
            out.final_text = part["text"]
        elif kind == "step_finish":
            steps += 1
            tokens = _obj(part.get("tokens"))
            cache = _obj(tokens.get("cache"))
            tin += (_int(tokens.get("input")) or 0) + (_int(cache.get("read")) or 0) + (_int(cache.get("write")) or 0)
            tout += (_int(tokens.get("output")) or 0) + (_int(tokens.get("reasoning")) or 0)
            if isinstance(part.get("cost"), int | float):
                cost += float(part["cost"])
        elif kind == "error":
            out.is_error = True
            err = _obj(ev.get("error"))
            data = _obj(err.get("data"))
            out.error = _line(f"{err.get('name') or 'error'}: {data.get('message') or ''}".strip(": "))
    if steps:
        out.input_tokens, out.output_tokens, out.cost_usd = tin, tout, round(cost, 9)
    out.no_result = not steps and not out.is_error


_READERS = {"claude": _claude, "codex": _codex, "gemini": _gemini, "opencode": _opencode}


def _classify(out: Outcome, events: list[dict[str, Any]], text: str) -> None:
    """The failure class of a run that failed, from its error and what it printed."""
    said = "\n".join(filter(None, [out.error, out.final_text if out.is_error else None]))
    # the error events and stderr lines (not what the agent's tools printed)
    noise = "\n".join(line for line in text.splitlines()
                      if not line.lstrip().startswith("{") and not _NOT_THE_SERVICE.search(line))
    errors = "\n".join(_error_text(ev) for ev in events)
    for source in (said, errors, noise):
        if not source:
            continue
        if _RATE_LIMIT.search(source):
            out.failure, out.rate_limited = "rate_limit", True
            out.retry_at = reset_time(source)
            return
        if _AUTH.search(source):
            out.failure = "auth"
            return
        if _NETWORK.search(source):
            out.failure = "network"
            return


def _error_text(ev: dict[str, Any]) -> str:
    """The error words of one event (its message, status, the error it carries), not its numbers."""
    kind = ev.get("type")
    if kind not in ("error", "turn.failed", "result", "system"):
        return ""
    if kind == "system" and ev.get("subtype") != "api_retry":
        return ""
    if kind == "result" and not (ev.get("is_error") or ev.get("status") == "error"):
        return ""
    parts: list[str] = []
    for key in ("message", "result", "error", "error_status"):
        value = ev.get(key)
        if isinstance(value, dict):
            data = _obj(value.get("data"))
            parts += [str(value.get(k)) for k in ("name", "type", "message") if value.get(k)]
            parts += [str(data.get(k)) for k in ("message", "statusCode", "responseBody") if data.get(k)]
        elif value is not None and not isinstance(value, bool):
            parts.append(str(value))
    return " ".join(parts)


def reset_time(text: str, now: float | None = None) -> float | None:
    """When a rate limit ends, from what the CLI printed (Claude Code's ``limit reached|<epoch>``,
    "try again in 2h 30m", "retry in 34.5s", a ``retryDelay``/``retry-after``, Codex's "try again
    at 3:54 PM": the end of that minute when it is under way, now when it has just ended), else
    None."""
    import time
    at = time.time() if now is None else now
    m = _RESET_EPOCH.search(text)
    if m:
        epoch = float(m.group(1))
        return epoch if at < epoch <= at + _RESET_MAX else None
    m = _RESET_IN.search(text)
    if m:
        total = 0.0
        for num, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]+)", m.group(1), re.I):
            total += float(num) * _UNIT.get(unit[0].lower(), 0)
        if 0 < total <= _RESET_MAX:
            return at + total
    m = _RETRY_DELAY.search(text)
    if m:
        secs = float(m.group(1) or m.group(2))
        if 0 < secs <= _RESET_MAX:
            return at + secs
    m = _RESET_AT.search(text)
    if m:
        return _clock_time(m, at)
    return None


def _clock_time(m: re.Match[str], at: float) -> float | None:
    """The epoch of a local clock time a CLI printed. Codex prints the reset to the minute, rounded
    down, the date only when it is not today; so the limit ends within the minute printed, and a
    minute that began up to ``_CLOCK_LATE`` before its end is this one (now, or by the end of that
    minute: a reset read in the minute it falls in, or a little later), never the same time
    tomorrow. A time alone further in the past is its next occurrence."""
    import datetime as dt

    month, day, year, hour, minute, half = m.groups()
    hour_24 = int(hour) % 12 + (12 if half.upper() == "PM" else 0)
    today = dt.datetime.fromtimestamp(at).date()
    try:
        if month:
            dates = [dt.datetime.strptime(f"{month} {day} {year}", "%b %d %Y").date()]
        else:  # read just after midnight, the time may be yesterday's
            dates = [today + dt.timedelta(days=d) for d in (-1, 0, 1)]
        starts = sorted(dt.datetime.combine(d, dt.time(hour_24, int(minute))).timestamp() for d in dates)
    except (ValueError, OverflowError):
        return None
    for start in starts:
        if start + 60.0 + _CLOCK_LATE <= at:
            continue  # long past: not the reset meant
        if start > at:
            return start if start <= at + _RESET_MAX else None
        # the minute printed is under way or just over: the limit ends by its end
        return max(start + 60.0, at)
    return None


def progress(adapter: str, log_path: Path, since: int, max_bytes: int = 1024 * 1024) -> tuple[int, int]:
    """The tool calls an agent CLI's log shows after byte ``since`` (the last ``max_bytes`` of
    it), and the offset to read from next time (after the last whole line)."""
    if adapter not in _READERS:
        return 0, since
    try:
        size = log_path.stat().st_size
        start = max(since, size - max_bytes)
        with log_path.open("rb") as fh:
            fh.seek(start)
            data = fh.read(size - start)
    except OSError:
        return 0, since
    end = data.rfind(b"\n") + 1
    return tool_uses(adapter, data[:end].decode("utf-8", "replace")), start + end


#: what an agent CLI prints while it waits for a network that is not there (Codex waits without
#: end): a run showing it is stopped and retried with back-off, like one that exited offline
_OFFLINE = re.compile(r"waiting for network", re.I)


#: the shortest wait for a rate limit's reset that a running CLI is stopped for (a shorter one it
#: sits out itself, as it would anyway)
RATE_WAIT_MIN = 120.0


@dataclass
class Waiting:
    """What a running agent CLI's new output says it waits for."""

    #: a network it cannot reach
    network: bool = False
    #: the end of a rate limit it is sitting out (epoch seconds), at least ``RATE_WAIT_MIN`` away
    rate_limit_until: float | None = None
    #: what it said about the rate limit, in one line
    said: str = ""


def waiting(adapter: str, log_path: Path, since: int, max_bytes: int = 256 * 1024) -> tuple[Waiting, int]:
    """What an agent CLI's log, after byte ``since`` (its last ``max_bytes``), shows it waiting
    for: a network it cannot reach, or the reset of a rate limit (opencode retries a 429 by
    sleeping until the time the service gave, its worker alive and its task running meanwhile);
    and the offset to read from next time. Only the CLI's own lines count (not its JSON events,
    where what the agent's tools printed is)."""
    import time

    if adapter not in CLI_ADAPTERS:
        return Waiting(), since
    try:
        size = log_path.stat().st_size
        start = max(since, size - max_bytes)
        with log_path.open("rb") as fh:
            fh.seek(start)
            data = fh.read(size - start)
    except OSError:
        return Waiting(), since
    end = data.rfind(b"\n") + 1
    text = data[:end].decode("utf-8", "replace")
    out = Waiting(network=bool(_OFFLINE.search(text)))
    for line in reversed(text.splitlines()):
        if line.lstrip().startswith("{") or not _RATE_LIMIT.search(line):
            continue
        until = reset_time(line)
        if until is not None and until - time.time() >= RATE_WAIT_MIN:
            out.rate_limit_until, out.said = until, " ".join(line.split())[-300:]
        break
    return out, start + end


def waiting_for_network(adapter: str, log_path: Path, since: int, max_bytes: int = 256 * 1024) -> tuple[bool, int]:
    """Whether an agent CLI's log, after byte ``since`` (its last ``max_bytes``), shows it waiting
    for a network it cannot reach; and the offset to read from next time."""
    seen, offset = waiting(adapter, log_path, since, max_bytes)
    return seen.network, offset


def tool_uses(adapter: str, text: str) -> int:
    """How many tool calls an agent CLI's output (a part of its log) shows: each one is a sign of
    progress (a heartbeat)."""
    if adapter not in _READERS:
        return 0
    out = Outcome()
    _READERS[adapter](json_events(text), out)
    return out.tool_uses


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _line(value: Any) -> str | None:
    if not value:
        return None
    first = str(value).strip().splitlines()
    return first[0][:500] if first else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)
