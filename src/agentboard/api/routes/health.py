"""``GET /healthz``, ``GET /readyz`` and ``GET /metrics`` (docs/metrics.md, docs/deploy.md).

On the app of ``serve`` the health checks need no token (the auth middleware lets them through)
and ``/metrics`` takes an unscoped admin token or the ``metrics_token`` setting as a bearer
token; while the database is out of reach a scrape still answers (:func:`scraper_allowed`). :func:`open_app` serves the same three routes with no token at all, for the separate
address of ``serve --metrics-bind`` and ``dispatcher --metrics-port`` (a scrape network).
"""

from __future__ import annotations

import hmac
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import anyio
from fastapi import APIRouter, Request
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from ...config import Settings
from ...domain.errors import AgentboardError, Unauthorized, Unavailable
from ...observe import health, metrics
from ...store.engine import Database
from ..auth import authenticate, headers_of, token_from
from ..errors import Json
from .common import state

router = APIRouter(include_in_schema=False)

#: the paths these routes answer without the auth middleware's token check
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def healthz_response() -> Response:
    return Json({"ok": True})


async def readyz_response(db: Database, settings: Settings, dispatcher: object | None) -> Response:
    checks = await anyio.to_thread.run_sync(health.readiness, db, settings, dispatcher)
    failed = next((c for c in checks if not c.ok), None)
    body: dict[str, Any] = {"ok": failed is None, "checks": [c.to_dict() for c in checks]}
    if failed is not None:
        body["failed"] = failed.name
    return Json(body, status_code=200 if failed is None else 503)


async def metrics_response(db: Database) -> Response:
    body = await anyio.to_thread.run_sync(metrics.render, db)
    return Response(body, media_type=metrics.CONTENT_TYPE)


#: an admin token this process verified on the database is let through for this many seconds
#: after, while the database cannot be reached to verify it again (a scraper's token: it scrapes
#: every few seconds, so an outage's scrapes keep the per-process metrics that explain it)
VERIFIED_FOR = 600.0
#: hashes of the admin tokens verified for a scrape, and when (the newest last; a few kept)
_verified: OrderedDict[str, float] = OrderedDict()
_verified_lock = threading.Lock()


def scraper_allowed(db: Database, settings: Settings, headers: dict[str, str]) -> bool:
    """The metrics token (a bearer token, checked without the database), or an unscoped admin
    token; raises Unauthorized / Forbidden otherwise. While the database is out of reach an
    admin token cannot be checked: True when this process verified it within
    :data:`VERIFIED_FOR` seconds (the whole scrape), else False (only ``agentboard_database_up
    0``, which ``/readyz`` tells anyone: never a 503 that loses the outage's scrape)."""
    from ...kernel.tokens import hash_token

    token, via_cookie = token_from(headers)
    if token is None:
        raise Unauthorized("no token: /metrics needs an admin token or the metrics_token setting "
                           "(Authorization: Bearer <token>)")
    expected = settings.metrics_token
    if expected and not via_cookie and hmac.compare_digest(token.encode(), expected.encode()):
        return True
    key = hash_token(token)
    try:
        principal = authenticate(db, token, via_cookie)
    except Unavailable:
        with _verified_lock:
            at = _verified.get(key)
        return at is not None and time.monotonic() - at < VERIFIED_FOR
    except Unauthorized:
        with _verified_lock:
            _verified.pop(key, None)
        raise
    principal.check_admin(None)
    with _verified_lock:
        _verified[key] = time.monotonic()
        _verified.move_to_end(key)
        while len(_verified) > 64:
            _verified.popitem(last=False)
    return True


def database_down() -> bytes:
    """The exposition of a scrape whose token could not be checked: the database is down."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    class Down:
        def collect(self) -> Iterator[GaugeMetricFamily]:
            up = GaugeMetricFamily("agentboard_database_up", "1 when the database answered this scrape, else 0")
            up.add_metric([], 0)
            yield up

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Down())
    return generate_latest(registry)


@router.get("/healthz")
def healthz() -> Response:
    """The process answers (no token, no detail)."""
    return healthz_response()


@router.get("/readyz")
async def readyz(request: Request) -> Response:
    """The database answers, its schema is current and a dispatcher passes on it; 503 naming the
    failing check."""
    st = state(request)
    return await readyz_response(st.db, st.settings, st.dispatcher)


@router.get("/metrics")
async def metrics_route(request: Request) -> Response:
    """The Prometheus exposition: an admin token or the metrics token."""
    st = state(request)
    try:
        whole = await anyio.to_thread.run_sync(scraper_allowed, st.db, st.settings, headers_of(request.scope))
    except AgentboardError as exc:
        return _error(exc)
    if not whole:
        return Response(database_down(), media_type=metrics.CONTENT_TYPE)
    return await metrics_response(st.db)


def _error(exc: AgentboardError) -> Response:
    from ..errors import error_body

    headers = {"www-authenticate": 'Bearer realm="agentboard"'} if exc.http_status == 401 else None
    return Response(error_body(exc.code, exc.message), status_code=exc.http_status,
                    media_type="application/json", headers=headers)


def open_app(settings: Settings, db: Database, dispatcher: object | None = None) -> Starlette:
    """``/healthz``, ``/readyz`` and ``/metrics`` with no token (bind it to a scrape network)."""
    async def _healthz(request: Request) -> Response:
        return healthz_response()

    async def _readyz(request: Request) -> Response:
        return await readyz_response(db, settings, dispatcher)

    async def _metrics(request: Request) -> Response:
        return await metrics_response(db)

    return Starlette(routes=[Route("/healthz", _healthz), Route("/readyz", _readyz),
                             Route("/metrics", _metrics)])


__all__ = ["OPEN_PATHS", "open_app", "router"]
