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

The lines the dispatcher writes per task (a worker started, a run closed) go through :func:`info`:
when the log is :func:`setup`'s JSON lines and nothing else would see the record, it writes the
very line the handler would, without a ``LogRecord`` and the handler chain; inside a
:func:`batch` (a loop over the workers of a pass, the runs of several exits) those lines are
written together, in one ``write`` when the loop ends.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson

from ..config import redact

#: the fields a record may carry and a JSON line shows when set
ID_FIELDS = ("board", "task", "run")
FORMATS = ("text", "json", "auto")
_ids: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("agentboard_log_ids", default=None)
_RECORD_KEYS = list(logging.LogRecord("", 0, "", 0, "", (), None).__dict__)
_STANDARD = frozenset(_RECORD_KEYS) | {"message", "asctime", "color_message"}
#: how many attributes a new ``LogRecord`` has, and its last one
_N_STANDARD, _LAST_STANDARD = len(_RECORD_KEYS), _RECORD_KEYS[-1]
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


def _extra_keys(fields: dict[str, Any]) -> list[str]:
    """The keys of a record's ``__dict__`` that are not the standard attributes, in their order.

    ``LogRecord`` sets its standard attributes first, so the others (``extra=``, the filter's)
    are the tail of its ``__dict__``: found without testing each standard key one by one, except
    for a record made otherwise (then every key is tested)."""
    keys = list(fields)
    tail = keys[_N_STANDARD:]
    if len(keys) >= _N_STANDARD and keys[_N_STANDARD - 1] == _LAST_STANDARD and _STANDARD.isdisjoint(tail):
        return tail
    return [k for k in keys if k not in _STANDARD]


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
        fields = record.__dict__
        for key in _extra_keys(fields):
            value = fields[key]
            if value is None or key[:1] == "_":
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
            held = _held() if self is _json_handler else None
            if held:  # this thread's lines of a :func:`batch` come first
                line = "".join(held) + line
                held.clear()
            stream = self.stream
            stream.write(line)
            stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def write_lines(self, text: str, n: int) -> None:
        """Write ``n`` lines at once (:func:`batch`)."""
        try:
            with self.lock:  # type: ignore[union-attr]
                stream = self.stream
                stream.write(text)
                stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(logging.makeLogRecord({"msg": "writing %d log lines", "args": (n,)}))


#: per thread: the lines :func:`info` made inside a :func:`batch`, not written yet
_batch = threading.local()


def _held() -> list[str] | None:
    held: list[str] | None = getattr(_batch, "lines", None)
    return held


@contextlib.contextmanager
def batch() -> Iterator[None]:
    """The lines :func:`info` makes inside (on this thread) are written together when it ends,
    in one ``write`` (a loop logging a line per worker started or run closed). A line logged
    otherwise meanwhile writes them first, so the order stays the order of the calls."""
    if _held() is not None:  # nested: the outer one writes
        yield
        return
    lines: list[str] = []
    _batch.lines = lines
    try:
        yield
    finally:
        _batch.lines = None
        handler = _json_handler  # the handler :func:`info` made them for
        if lines and handler is not None:
            handler.write_lines("".join(lines), len(lines))


#: the handler :func:`setup` installed when it chose JSON lines, and its filter (the straight
#: road of :func:`info`)
_json_handler: LineHandler | None = None
_json_filter: ContextFilter | None = None


def _straight(logger: logging.Logger, handler: LineHandler) -> bool:
    """Whether a record of ``logger`` would reach ``handler`` and nothing else: no filter on the
    way, no other handler, ``handler`` the root's only one with just its :class:`ContextFilter`
    and :class:`JsonFormatter` (what :func:`setup` made, untouched since)."""
    lg: logging.Logger | None = logger
    while lg is not None:
        if lg.filters or lg.disabled:
            return False
        if lg.parent is None:  # the root
            hs, fs = lg.handlers, handler.filters
            return (len(hs) == 1 and hs[0] is handler and handler.level <= logging.INFO and len(fs) == 1
                    and fs[0] is _json_filter and type(handler.formatter) is JsonFormatter)
        if lg.handlers or not lg.propagate:
            return False
        lg = lg.parent
    return False


def info(logger: logging.Logger, msg: str, *args: Any, extra: dict[str, Any] | None = None) -> None:
    """``logger.info(msg, *args, extra=extra)`` for the hot paths (a worker started, a run closed):
    when the log is :func:`setup`'s JSON lines and nothing else would see the record, the very
    line :class:`JsonFormatter` writes for it is built and written straight, without a
    ``LogRecord`` and the handler chain (a few times cheaper); otherwise through ``logging``."""
    if not logger.isEnabledFor(logging.INFO):
        return
    handler, flt = _json_handler, _json_filter
    if (handler is None or flt is None or not _straight(logger, handler) or (extra and not _STANDARD.isdisjoint(extra))
            or (len(args) == 1 and isinstance(args[0], dict))):
        logger.info(msg, *args, extra=extra)
        return
    created = time.time()
    try:
        message = msg % args if args else str(msg)
    except Exception:  # a bad format string: ``logging`` says so its way
        logger.info(msg, *args, extra=extra)
        return
    fields: dict[str, Any] = dict(extra) if extra else {}
    ids = _ids.get()
    if ids:  # as ContextFilter.filter
        for key, value in ids.items():
            if fields.get(key) is None:
                fields[key] = value
    if fields.get("host") is None:
        fields["host"] = flt.host
    out: dict[str, Any] = {"time": _time(created), "level": "info", "logger": logger.name,
                           "event": _redacted(message)}
    for key, value in fields.items():  # as JsonFormatter.format
        if value is None or key[:1] == "_":
            continue
        out[key] = _redacted(value) if isinstance(value, str) else value
    try:
        line = orjson.dumps(out, default=str, option=orjson.OPT_APPEND_NEWLINE).decode()
        held = _held()
        if held is not None:
            held.append(line)
            return
        with handler.lock:  # type: ignore[union-attr]
            stream = handler.stream
            stream.write(line)
            stream.flush()
    except RecursionError:
        raise
    except Exception:
        handler.handleError(logger.makeRecord(logger.name, logging.INFO, "(unknown file)", 0, msg, args, None,
                                              extra=extra))


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
    flt = ContextFilter(host)
    handler.addFilter(flt)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    global _json_handler, _json_filter
    _json_handler, _json_filter = (handler, flt) if chosen == "json" else (None, None)
    root.setLevel(level)
    logging.getLogger("alembic").setLevel(max(level, logging.WARNING))
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
    return chosen
