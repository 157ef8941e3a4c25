"""The log of ``serve`` and ``dispatcher``: plain text (the default) or one JSON object per line.

A JSON line carries ``time`` (ISO-8601 UTC), ``level``, ``logger``, ``event`` (the message),
``host`` (the ``host_id`` setting) and, wherever they apply, ``board``, ``task`` and ``run``:
given with ``extra={"board": ..., "task": ..., "run": ...}`` or set for a stretch of work with
:func:`context` (a context variable, so a pool thread's log lines carry the ids of the exit it
handles). Every message and string field passes through :func:`agentboard.config.redact`, the
redaction used wherever configuration is shown, in both formats.

A line is cheap (a few microseconds of formatting, then one ``write`` of the whole line, flushed
at once so a crash loses nothing already logged): the redaction's patterns run only on text that
could hold a credential (an ``=`` or an ``@``), the timestamp's seconds are formatted once per
second, and :func:`setup` turns off what the standard ``logging`` records and neither format
shows (the caller's file and line, the thread and process names).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

import orjson

from ..config import redact

#: the fields a record may carry and a JSON line shows when set
ID_FIELDS = ("board", "task", "run")
FORMATS = ("text", "json", "auto")
_ids: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("agentboard_log_ids", default=None)
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message", "asctime", "color_message"}
_LEVELS = {n: logging.getLevelName(n).lower() for n in (logging.DEBUG, logging.INFO, logging.WARNING,
                                                         logging.ERROR, logging.CRITICAL)}
#: (a whole second, its ISO-8601 text): the last second a line was written in
_second: tuple[int, str] = (-1, "")


def _redacted(text: str) -> str:
    """:func:`agentboard.config.redact` of ``text``; its patterns need an ``@`` (a URL's
    password) or an ``=`` (``password=``, ``token=``, ...), so text with neither is returned as
    it is without running them."""
    if "=" in text or "@" in text:
        return redact(text) or ""
    return text


def _time(created: float) -> str:
    """``created`` (Unix time) as ``2026-05-01T12:00:00.123Z``."""
    global _second
    sec = int(created)
    at, text = _second
    if at != sec:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        _second = (sec, text)
    return f"{text}.{int((created - sec) * 1000):03d}Z"


@contextlib.contextmanager
def context(**ids: Any) -> Iterator[None]:
    """Log lines written inside carry these ids (``board``, ``task``, ``run``)."""
    current = _ids.get() or {}
    token = _ids.set({**current, **{k: v for k, v in ids.items() if v is not None}})
    try:
        yield
    finally:
        _ids.reset(token)


class ContextFilter(logging.Filter):
    """Puts the host and the ids of :func:`context` on each record, and redacts its message."""

    def __init__(self, host: str) -> None:
        super().__init__()
        self.host = host

    def filter(self, record: logging.LogRecord) -> bool:
        fields = record.__dict__
        ids = _ids.get()
        if ids:
            for key, value in ids.items():
                if fields.get(key) is None:
                    fields[key] = value
        if fields.get("host") is None:
            fields["host"] = self.host
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: keep what there is
            message = str(record.msg)
        record.msg, record.args = _redacted(message), None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _time(record.created),
            "level": _LEVELS.get(record.levelno) or record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if value is None or key in _STANDARD or key.startswith("_"):
                continue
            out[key] = _redacted(value) if isinstance(value, str) else value
        if record.exc_info:
            out["exception"] = _redacted(self.formatException(record.exc_info))
        return orjson.dumps(out, default=str).decode()


class TextFormatter(logging.Formatter):
    """``time level message [board=… task=… run=…]``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = " ".join(f"{k}={getattr(record, k)}" for k in ID_FIELDS if getattr(record, k, None) is not None)
        if not ids:
            return line
        head, sep, tail = line.partition("\n")
        return f"{head} [{ids}]{sep}{tail}"


class LineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes each record as one line and flushes it at once (one ``write`` per line: nothing
    already logged waits in a buffer for a crash to lose)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + "\n"
            stream = self.stream
            stream.write(line)
            stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)


def resolve(fmt: str | None, stream: Any = None) -> str:
    """``text`` or ``json``: ``auto`` is JSON when the stream is not a terminal."""
    fmt = (fmt or "text").lower()
    if fmt not in FORMATS:
        from ..domain.errors import InvalidInput

        raise InvalidInput(f"invalid setting log_format={fmt!r}; use text, json or auto")
    if fmt == "auto":
        isatty = getattr(stream or sys.stderr, "isatty", None)
        return "text" if isatty is not None and isatty() else "json"
    return fmt


def setup(fmt: str | None, level: int, host: str, stream: Any = None) -> str:
    """Send the ``agentboard`` (and uvicorn's) loggers to ``stream`` (stderr) in ``fmt``; returns
    the format chosen."""
    stream = stream or sys.stderr
    chosen = resolve(fmt, stream)
    # neither format shows where a call was made from, nor the thread or process: records need
    # not look them up (the standard ``logging`` switches for this)
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    handler = LineHandler(stream)
    handler.setFormatter(JsonFormatter() if chosen == "json" else TextFormatter())
    handler.addFilter(ContextFilter(host))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("alembic").setLevel(max(level, logging.WARNING))
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
    return chosen
