"""``GET /healthz``, ``GET /readyz`` and ``GET /metrics`` (docs/metrics.md, docs/deploy.md).

On the app of ``serve`` the health checks need no token (the auth middleware lets them through)
and ``/metrics`` takes an unscoped admin token or the ``metrics_token`` setting as a bearer
token. :func:`open_app` serves the same three routes with no token at all, for the separate
address of ``serve --metrics-bind`` and ``dispatcher --metrics-port`` (a scrape network).
"""

from __future__ import annotations

import hmac
from typing import Any

import anyio
from fastapi import APIRouter, Request
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from ...config import Settings
from ...domain.errors import AgentboardError, Unauthorized
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


def scraper_allowed(db: Database, settings: Settings, headers: dict[str, str]) -> None:
    """The metrics token (a bearer token), or an unscoped admin token; raises Unauthorized /
    Forbidden otherwise."""
    token, via_cookie = token_from(headers)
    if token is None:
        raise Unauthorized("no token: /metrics needs an admin token or the metrics_token setting "
                           "(Authorization: Bearer <token>)")
    expected = settings.metrics_token
    if expected and not via_cookie and hmac.compare_digest(token.encode(), expected.encode()):
        return
    authenticate(db, token, via_cookie).check_admin(None)


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
        await anyio.to_thread.run_sync(scraper_allowed, st.db, st.settings, headers_of(request.scope))
    except AgentboardError as exc:
        return _error(exc)
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
