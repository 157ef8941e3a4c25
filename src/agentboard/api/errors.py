"""The one mapping from errors to HTTP: ``{"error": {"code", "message"}}`` with the right status."""

from __future__ import annotations

import logging
import math
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from ..domain.errors import AgentboardError, Unavailable
from ..store.engine import DISK_FULL, bad_value, disk_full

log = logging.getLogger("agentboard.api")

_HTTP_CODES = {
    400: "invalid_input", 401: "unauthorized", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 409: "conflict", 413: "too_large", 415: "unsupported_media_type",
    422: "invalid_request", 503: "unavailable",
}


def dumps(content: Any) -> bytes:
    """Compact UTF-8 JSON (orjson: about 7x faster on a full board view)."""
    return orjson.dumps(content, default=str, option=orjson.OPT_NON_STR_KEYS)


class Json(Response):
    """A JSON response rendered directly, without FastAPI's encoder pass."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content)


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Json:
    return Json({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


#: the request's scope key holding how many writes this process had committed when it began
WRITES_AT = "agentboard_writes_at"


def retry_after(exc: BaseException, db: Any, scope: Any) -> str | None:
    """The ``Retry-After`` of an error whose request never reached the database, so that sending
    it again is safe: :class:`Unavailable` with ``retry_after``, and no write committed in this
    process since the request began (a request of several transactions whose first committed is
    not to be sent again; another request's commit meanwhile makes this conservative). Else None."""
    seconds = getattr(exc, "retry_after", None)
    if not isinstance(seconds, int | float):
        return None
    began = (scope.get("state") or {}).get(WRITES_AT) if isinstance(scope, dict) else None
    if began is None or getattr(db, "writes", None) != began:
        return None
    return str(max(1, math.ceil(seconds)))


def error_body(code: str, message: str) -> bytes:
    """The bytes of an error answered by a middleware (the same JSON as :func:`error_response`)."""
    return dumps({"error": {"code": code, "message": message}})


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


#: an error answer's body in the OpenAPI document: a reference to :class:`ErrorBody`, whose
#: schema :func:`document_errors` adds to the document's components once. (As ``"model":
#: ErrorBody`` each of the ~650 error statuses of the routes built a validator of its own when
#: the app was made: a sixth of the time it took.)
_ERROR_CONTENT = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI documentation of the error statuses a route can answer."""
    names = {400: "invalid input", 401: "no or bad token", 403: "wrong role or board",
             404: "unknown id", 409: "conflict", 413: "request too large", 422: "schema error",
             429: "a limit on how much the caller may write was reached",
             503: "unavailable"}
    out: dict[int | str, dict[str, Any]] = {}
    for s in sorted({401, 403, 413, 422, *statuses}):
        out[s] = {"content": _ERROR_CONTENT, "description": names.get(s, "error")}
    return out


def document_errors(app: FastAPI) -> None:
    """Add :class:`ErrorBody` (and what it refers to) to the components of ``app``'s OpenAPI
    document, which its routes' error statuses refer to (:func:`responses`)."""
    make = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = make()
            schema = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
            defs = schema.pop("$defs", {})
            found = doc.setdefault("components", {}).setdefault("schemas", {})
            for name, part in {**defs, "ErrorBody": schema}.items():
                found.setdefault(name, part)
            doc["components"]["schemas"] = dict(sorted(found.items()))
        return app.openapi_schema or make()

    app.openapi = openapi  # type: ignore[method-assign]


def _not_json(exc: RequestValidationError) -> str | None:
    """The message for a body that is not JSON at all (FastAPI's ``json_invalid``: the decoder's
    reason and its character offset): what is wrong and where, as a line and a column. None for
    any other validation error."""
    errors = exc.errors()
    if len(errors) != 1 or errors[0].get("type") != "json_invalid":
        return None
    err = errors[0]
    reason = str((err.get("ctx") or {}).get("error") or "").strip() or "it cannot be read"
    loc = err.get("loc") or ()
    pos = loc[-1] if loc and isinstance(loc[-1], int) else None
    doc = exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes) else exc.body
    where = ""
    if pos is not None and isinstance(doc, str):
        line, column = doc.count("\n", 0, pos) + 1, pos - doc.rfind("\n", 0, pos)
        where = f" at line {line}, column {column}"
    return f"the request body is not valid JSON: {reason}{where}; send a JSON object"


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install(app: FastAPI, *, postgres: bool, db: Any = None) -> None:
    """The error handlers (``postgres``: also PostgreSQL's refusal of a value, a 400; psycopg is
    not imported for a SQLite home)."""

    @app.exception_handler(AgentboardError)
    async def _kernel(request: Request, exc: AgentboardError) -> Response:
        status = exc.http_status if 400 <= exc.http_status < 600 else 500
        retry = retry_after(exc, db, request.scope)
        return error_response(status, exc.code, exc.message, {"Retry-After": retry} if retry else None)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        if (not_json := _not_json(exc)) is not None:  # not a schema error: the body cannot be read
            return error_response(400, "invalid_input", not_json)
        return error_response(422, "invalid_request", _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        code = _HTTP_CODES.get(exc.status_code, "error")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        if exc.status_code == 404 and message == "Not Found":
            message = f"no route {request.method} {request.url.path}"
        return error_response(exc.status_code, code, message, getattr(exc, "headers", None))

    async def _bad_input(request: Request, exc: Exception) -> Response:
        return error_response(400, "invalid_input", _bad_value(exc) or "invalid value")

    app.add_exception_handler(OverflowError, _bad_input)
    if postgres:
        import psycopg

        app.add_exception_handler(psycopg.DataError, _bad_input)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        if disk_full(exc):  # a full disk outside a transaction (a file, a migration)
            return error_response(503, Unavailable.code, DISK_FULL)
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(500, "internal", f"unexpected error: {type(exc).__name__}")


def _bad_value(exc: Exception) -> str | None:
    """A value the database cannot store, raised outside a transaction of the store (which
    turns it into ``InvalidInput`` itself, :func:`agentboard.store.engine.bad_value`)."""
    return bad_value(exc)
