"""The log of ``serve`` and ``dispatcher``: plain text (the default) or one JSON object per line.

A JSON line carries ``time`` (ISO-8601 UTC), ``level``, ``logger``, ``event`` (the message),
``host`` (the ``host_id`` setting) and, wherever they apply, ``board``, ``task`` and ``run``:
given with ``extra={"board": ..., "task": ..., "run": ...}`` or set for a stretch of work with
:func:`context` (a context variable, so a pool thread's log lines carry the ids of the exit it
handles). Every message and string field passes through :func:`agentboard.config.redact`, the
redaction used wherever configuration is shown, in both formats.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import logging
import sys
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
        ids = _ids.get()
        if ids:
            for key, value in ids.items():
                if getattr(record, key, None) is None:
                    setattr(record, key, value)
        if getattr(record, "host", None) is None:
            record.host = self.host
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: keep what there is
            message = str(record.msg)
        record.msg, record.args = redact(message) or "", None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _dt.datetime.fromtimestamp(record.created, _dt.UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key in _STANDARD or key.startswith("_") or value is None:
                continue
            out[key] = redact(value) if isinstance(value, str) else value
        if record.exc_info:
            out["exception"] = redact(self.formatException(record.exc_info))
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
    handler = logging.StreamHandler(stream)
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
