"""Dispatch now, stats, the settings (secrets redacted), filter values, tokens, and the browser login."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from ... import __version__
from ...config import Settings, shown
from ...domain.errors import AgentboardError, Unavailable
from ...kernel import queries, tokens
from ..answers import AssigneeRow, BoardStats, ConfigView, DispatchPass, TenantRow, TokenRow
from ..auth import COOKIE, LoginThrottle, Principal, authenticate, current, login_page
from ..models import TokenCreate
from .common import Json, read_board, responses, state

router = APIRouter(prefix="/api", tags=["system"])
BoardQ = Query(default=None, max_length=64, description="board slug")


@router.post("/dispatch", response_model=DispatchPass, responses=responses(400, 503))
def dispatch_now(request: Request, max: int | None = Query(default=None, ge=0, le=10_000),
                 dry_run: bool = False, who: Principal = Depends(current)) -> Response:
    """Run one dispatcher pass now (the server's embedded dispatcher)."""
    if who.role == "viewer" or (who.is_run and not who.orchestrator):
        who.check_write(who.default_board)
    st = state(request)
    if st.dispatcher is None:
        raise Unavailable("this server runs without a dispatcher (--no-dispatch); start one with `agentboard dispatcher`")
    result = st.dispatcher.run_pass(max_spawn=max, dry_run=dry_run)
    return Json(result if isinstance(result, dict) else {"result": result})


@router.get("/stats", response_model=BoardStats, responses=responses(400, 404))
def stats(request: Request, board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    slug = read_board(request, who, board)
    return Json(queries.stats(state(request).db, slug))


@router.get("/assignees", response_model=list[AssigneeRow], responses=responses(400, 404))
def assignees(request: Request, board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    """Profiles and assignees seen on the board, with task counts (for filters and pickers)."""
    slug = read_board(request, who, board)
    return Json(queries.assignees(state(request).db, slug))


@router.get("/tenants", response_model=list[TenantRow], responses=responses(400, 404))
def tenants(request: Request, board: str | None = BoardQ, who: Principal = Depends(current)) -> Response:
    slug = read_board(request, who, board)
    return Json(queries.tenants(state(request).db, slug))


def _llm_status(s: Settings) -> dict[str, Any]:
    """Whether the LLM helpers can run, and why not (no request is made): ``available`` and
    ``reason`` for specify and decompose together, and per use."""
    from ...agents import llm

    uses = {use: dict(zip(("available", "reason"), llm.availability(s, use), strict=True)) for use in llm.USES}
    helpers = [uses["specifier"], uses["decomposer"]]
    down = next((u for u in helpers if not u["available"]), None)
    return {"configured": bool(s.llm_base_url or s.llm_command), "model": s.llm_model,
            "available": down is None, "reason": (down or helpers[0])["reason"], "uses": uses}


@router.get("/config", response_model=ConfigView, responses=responses())
def config(request: Request, who: Principal = Depends(current)) -> Response:
    """The settings with every secret masked and every credential in a URL or a query string
    redacted (``agentboard.config.shown``: the same for every role, but a worker is not told
    where the home and the database are), what this server runs, and who the caller is."""
    st = state(request)
    s = st.settings
    return Json({
        "version": __version__,
        "settings": shown(s, places=not who.is_run),
        "database": st.db.dialect,
        "llm": _llm_status(s),
        "dispatcher": {"running": st.dispatcher is not None},
        "me": who.describe(),
    })


@router.get("/tokens", response_model=list[TokenRow], tags=["tokens"], responses=responses())
def list_tokens(request: Request, include_revoked: bool = False,
                who: Principal = Depends(current)) -> Response:
    who.check_admin()
    return Json(tokens.list_tokens(state(request).db, include_revoked=include_revoked))


@router.post("/tokens", response_model=TokenRow, tags=["tokens"], status_code=201, responses=responses(400, 404, 409))
def create_token(request: Request, data: TokenCreate, who: Principal = Depends(current)) -> Response:
    """Create a token; the plain token is in this response only."""
    who.check_admin()
    return Json(tokens.create(state(request).db, data.name, role=data.role, boards=data.boards),
                status_code=201)


@router.delete("/tokens/{name}", response_model=list[TokenRow], tags=["tokens"], responses=responses(400, 404))
def revoke_token(request: Request, name: str = PathParam(min_length=1, max_length=64),
                 who: Principal = Depends(current)) -> Response:
    who.check_admin()
    return Json(tokens.revoke(state(request).db, name))


login_router = APIRouter(include_in_schema=False)


def _throttle(request: Request) -> LoginThrottle:
    app_state = request.app.state
    throttle = getattr(app_state, "login_throttle", None)
    if throttle is None:
        throttle = app_state.login_throttle = LoginThrottle()
    return throttle


@login_router.get("/login")
async def login(request: Request, token: str = Query(default="", max_length=300)) -> Response:
    """Check the token, keep it in an HttpOnly cookie, and go to the dashboard. Too many failed
    logins from one client in a short time: 429 with ``Retry-After`` (:class:`LoginThrottle`)."""
    throttle = _throttle(request)
    client = request.client.host if request.client else "unknown"
    wait = throttle.retry_after(client)
    if wait is not None:
        return Response(login_page(f"Too many failed logins from this address; try again in {wait} seconds."),
                        status_code=429, media_type="text/html", headers={"Retry-After": str(wait)})
    try:
        await run_in_threadpool(authenticate, state(request).db, token)
    except AgentboardError as exc:
        throttle.failed(client)
        return Response(login_page(exc.message), status_code=401, media_type="text/html")
    throttle.succeeded(client)
    resp = RedirectResponse("/", status_code=303)
    resp.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/",
                    secure=request.url.scheme == "https", max_age=30 * 24 * 3600)
    resp.headers["Cache-Control"] = "no-store"
    resp.headers["Referrer-Policy"] = "no-referrer"
    return resp


@login_router.get("/logout")
async def logout() -> Response:
    resp = Response(login_page("You are logged out."), media_type="text/html")
    resp.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return resp
