"""OpenTelemetry traces (the optional ``[otel]`` extra): a span for each API request, kernel verb,
dispatcher pass and worker run, exported over OTLP/HTTP.

Tracing is on when ``otel_endpoint`` is set (``AGENTBOARD_OTEL_ENDPOINT``, or the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) and the OpenTelemetry
packages are installed. Otherwise :data:`tracer` stays ``None`` and every hook is one ``is None``
test: nothing is imported, nothing changes.

Hooks: ``store.engine.Database.write``/``read``/``write_one``, wrapped when tracing starts (each kernel verb is
one transaction, its span named after the kernel function), :class:`TraceMiddleware`
(``api/app.py``), ``Dispatcher.run_pass_report`` and ``WorkerRegistry.forget`` (a worker's run,
from its start to its handled exit).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import Settings

log = logging.getLogger("agentboard.tracing")

#: the OpenTelemetry tracer once :func:`setup` found an endpoint and the packages; else None
tracer: Any = None
_lock = threading.Lock()
_done = False
_names: dict[Any, str] = {}


def endpoint(settings: Settings) -> str | None:
    """Where spans go: the setting, else the standard variables (None: tracing is off)."""
    configured = getattr(settings, "otel_endpoint", None)
    if configured:
        return str(configured)
    for var in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        if os.environ.get(var):
            return os.environ[var]
    return None


def traces_url(base: str) -> str:
    """The OTLP/HTTP traces URL of a collector's base address (``…/v1/traces`` kept as given)."""
    base = base.rstrip("/")
    return base if base.endswith("/v1/traces") else base + "/v1/traces"


def setup(settings: Settings) -> bool:
    """Start exporting spans (once per process). False when off or the extra is missing."""
    global tracer, _done
    with _lock:
        if _done:
            return tracer is not None
        where = endpoint(settings)
        if not where:
            return False
        _done = True
        try:
            from opentelemetry import trace
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            log.warning("traces are configured (%s) but OpenTelemetry is not installed; "
                        "install agentboard[otel] to export them", where)
            return False
        from . import __version__

        resource = Resource.create({"service.name": "agentboard", "service.version": __version__,
                                    "host.name": str(getattr(settings, "host_id", "") or "")})
        provider = TracerProvider(resource=resource)  # flushed at exit
        if getattr(settings, "otel_endpoint", None):
            exporter = OTLPSpanExporter(endpoint=traces_url(where))
        else:
            exporter = OTLPSpanExporter()  # the standard variables, as OpenTelemetry reads them
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        tracer = trace.get_tracer("agentboard", __version__)
        _trace_transactions()
        log.info("exporting traces to %s", where)
        return True


def shutdown() -> None:
    """Flush and stop the exporter (tests; the process's exit does it otherwise)."""
    if tracer is None:
        return
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if hasattr(provider, "shutdown"):
        provider.shutdown()


def verb_name(fn: Callable[..., Any]) -> str:
    """``kernel.tasks.release`` for the transaction function of the kernel verb ``release``."""
    try:
        return _names[fn]
    except (KeyError, TypeError):
        pass
    key = fn
    while isinstance(fn, functools.partial):
        fn = fn.func
    module = str(getattr(fn, "__module__", "") or "").removeprefix("agentboard.")
    if module.startswith("kernel.") and module.count(".") > 1:
        # a verb of a kernel package (``kernel.tasks.creation``) is named by its package, where
        # callers find it (``kernel.tasks.create``)
        module = ".".join(module.split(".")[:2])
    qual = str(getattr(fn, "__qualname__", "") or getattr(fn, "__name__", "") or "tx")
    name = qual.split(".<locals>")[0].split(".")[-1].lstrip("_") or "tx"
    # ``create_in``: the verb's body that also runs inside a caller's transaction
    name = name.removesuffix("_in") or name
    full = f"{module}.{name}" if module else name
    try:
        if len(_names) < 10_000:
            _names[key] = full
    except TypeError:
        pass
    return full


def verb_span(fn: Callable[..., Any], kind: str, dialect: str) -> AbstractContextManager[Any]:
    """The span of one kernel transaction (``kind``: write or read)."""
    if tracer is None:
        return nullcontext()
    span: AbstractContextManager[Any] = tracer.start_as_current_span(
        verb_name(fn), attributes={"agentboard.tx": kind, "db.system": dialect})
    return span


def _trace_transactions() -> None:
    """Wrap ``Database.write``, ``read`` and ``write_one`` (every kernel verb is one of them) in a
    span each.
    Installed only when tracing starts, so an untraced process runs the store's own methods."""
    from .store.engine import Database

    for kind in ("write", "read"):
        plain = getattr(Database, kind)
        if getattr(plain, "_traced", False):
            continue

        def traced(self: Any, fn: Callable[..., Any], *args: Any, _plain: Any = plain, _kind: str = kind,
                   **kwargs: Any) -> Any:
            with verb_span(fn, _kind, self.dialect):
                return _plain(self, fn, *args, **kwargs)

        traced._traced = True  # type: ignore[attr-defined]
        traced.__doc__ = plain.__doc__
        setattr(Database, kind, traced)
    one = Database.write_one
    if not getattr(one, "_traced", False):
        def traced_one(self: Any, sql: str, params: dict[str, Any], *, verb: Callable[..., Any], _plain: Any = one,
                       **kwargs: Any) -> Any:
            with verb_span(verb, "write", self.dialect):
                return _plain(self, sql, params, verb=verb, **kwargs)

        traced_one._traced = True  # type: ignore[attr-defined]
        traced_one.__doc__ = one.__doc__
        Database.write_one = traced_one  # type: ignore[method-assign]


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A span around a block (a no-op without a tracer); yields the span or None."""
    if tracer is None:
        yield None
        return
    with tracer.start_as_current_span(name, attributes=_clean(attributes)) as s:
        yield s


def finished_span(name: str, started: float, attributes: dict[str, Any]) -> None:
    """Record a span that already happened, from ``started`` until now (a worker's run: from its
    start to its handled exit)."""
    if tracer is None:
        return
    s = tracer.start_span(name, start_time=int(started * 1e9), attributes=_clean(attributes))
    s.end(end_time=time.time_ns())


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if isinstance(v, str | int | float | bool)}


class TraceMiddleware:
    """ASGI middleware: one server span per HTTP request, named by its route template
    (``GET /api/tasks/{task_id}``), with its status code."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if tracer is None or scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        from opentelemetry.trace import SpanKind, Status, StatusCode

        method = str(scope.get("method", ""))
        status: dict[str, int] = {}

        async def sending(message: dict[str, Any]) -> None:
            if message.get("type") == "http.response.start":
                status["code"] = int(message.get("status", 0))
            await send(message)

        with tracer.start_as_current_span(f"{method} {scope.get('path', '')}", kind=SpanKind.SERVER) as s:
            try:
                await self.app(scope, receive, sending)
            finally:
                route = scope.get("route")
                template = getattr(route, "path", None) or ("static" if method == "GET" else "unmatched")
                s.update_name(f"{method} {template}")
                s.set_attribute("http.request.method", method)
                s.set_attribute("http.route", template)
                code = status.get("code", 500)
                s.set_attribute("http.response.status_code", code)
                if code >= 500:
                    s.set_status(Status(StatusCode.ERROR))
