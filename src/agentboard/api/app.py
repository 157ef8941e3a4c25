"""The application: REST routes, the event WebSocket, the dashboard's files, one process.

``create_app(settings)`` builds it; ``agentboard serve`` runs it with uvicorn and, unless
``--no-dispatch``, hosts the dispatcher in the same process.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from .. import tracing
from ..config import Settings
from ..store.engine import Database
from . import errors
from .auth import AuthMiddleware
from .limits import BodyLimitMiddleware
from .routes import (
    boards,
    chat,
    goals,
    health,
    links,
    meta,
    notify,
    operations,
    profiles,
    supervisor,
    system,
    tasks,
    wiki,
    worker,
)
from .routes import budgets as budget_routes
from .routes import diagnostics as diagnostics_routes
from .routes import insights as insight_routes
from .routes import races as race_routes
from .routes.common import AppState, HostedDispatcher
from .ws import Hub, events_socket

log = logging.getLogger("agentboard.api")

WEB_DIR = Path(__file__).resolve().parent.parent / "web"


def create_app(
    settings: Settings,
    db: Database | None = None,
    *,
    dispatcher: HostedDispatcher | None = None,
    web_dir: Path | None = None,
) -> FastAPI:
    """The ASGI app over ``db`` (opened from ``settings`` when not given).

    ``dispatcher``: an object with ``start()``, ``stop()`` and ``run_pass(...)`` hosted by this
    app: started and stopped with it, and behind ``POST /api/dispatch``.
    """
    if db is None:
        from ..client import open_home

        db = open_home(settings)
    state = AppState(db=db, settings=settings, hub=Hub(db))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if dispatcher is not None:
            state.dispatcher = dispatcher
            dispatcher.start()
        try:
            yield
        finally:
            state.hub.close()
            if state.dispatcher is not None:
                try:
                    state.dispatcher.stop()
                except Exception:  # pragma: no cover - shutting down regardless
                    log.exception("stopping the dispatcher failed")

    app = FastAPI(
        title="agentboard",
        version=_version(),
        description="REST API of agentboard: a durable task board for AI agents and people. "
        "Every route needs a token (`Authorization: Bearer <token>`).",
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.ab = state
    errors.install(app, postgres=db.dialect == "postgresql", db=db)
    errors.document_errors(app)
    # the routers' routes are the app's own (each already carries its path and tags): an included
    # router would build every route's models again for each app, on its first request
    for router in (*(module.router for module in (
            boards, tasks, worker, links, goals, profiles, wiki, system, notify, operations, supervisor, budget_routes,
            diagnostics_routes, insight_routes, meta, race_routes, chat)), system.login_router, health.router):
        app.router.routes.extend(router.routes)
    app.add_api_websocket_route("/api/events", events_socket)

    folder = web_dir or WEB_DIR
    app.mount("/", StaticFiles(directory=str(folder), html=True, check_dir=False), name="web")

    attachments_path_limit = max(settings.attachment_max_bytes, settings.max_request_bytes)

    def limit_for(path: str) -> int:
        if path.startswith("/api/tasks/") and path.endswith("/attachments"):
            return attachments_path_limit
        return settings.max_request_bytes

    app.add_middleware(BodyLimitMiddleware, limit_for=limit_for)
    app.add_middleware(AuthMiddleware, db=db)  # outermost: nothing runs for a caller without a token
    if tracing.setup(settings):  # agentboard[otel] and an endpoint: a span per request
        app.add_middleware(tracing.TraceMiddleware)
    return app


def _version() -> str:
    from .. import __version__

    return __version__
