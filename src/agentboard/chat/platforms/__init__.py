"""The platforms' Web APIs, through httpx: each platform's address is a setting
(``chat_<platform>_api_base``), so a test talks to a loopback server speaking the same API."""

from __future__ import annotations

import math
import threading
import time
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

#: seconds one call to a platform may take
TIMEOUT = 10.0

_client: httpx.Client | None = None
_lock = threading.Lock()


class PlatformError(Exception):
    """A platform refused a call or could not be reached (the message carries no token).

    ``transient``: the same call may work later (the platform was unreachable, rate limited
    it — HTTP 429 — or failed — 5xx); ``retry_after``: the seconds the platform asked to wait
    (``Retry-After``, or the body's ``retry_after`` as Discord and Telegram send it)."""

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient
        self.retry_after = retry_after


def client() -> httpx.Client:
    """The process's HTTP client for platform calls (connections kept between calls; httpx is
    imported on the first call, not by every process that builds the web app)."""
    global _client
    with _lock:
        if _client is None:
            import httpx

            _client = httpx.Client(timeout=TIMEOUT, follow_redirects=False)
        return _client


def call(method: str, url: str, *, what: str, secret: str | None = None, json: Any = None,
         headers: dict[str, str] | None = None) -> Any:
    """One request; the decoded JSON answer (``None`` for an empty one). ``what`` names the call
    in errors; ``secret`` (a token in the URL) never appears in them."""
    import httpx

    try:
        resp = client().request(method, url, json=json, headers=headers)
    except httpx.HTTPError as exc:
        text = f"{type(exc).__name__}: {exc}"
        raise PlatformError(f"{what}: {hide(text, secret)}",
                            transient=isinstance(exc, httpx.TransportError)) from None
    if resp.status_code >= 400:
        transient = resp.status_code == 429 or resp.status_code >= 500
        raise PlatformError(f"{what}: HTTP {resp.status_code} {hide(resp.text[:200], secret)}",
                            status=resp.status_code, transient=transient,
                            retry_after=retry_after(resp) if transient else None)
    if not resp.content:
        return None
    try:
        return resp.json()
    except ValueError:
        raise PlatformError(f"{what}: the answer is not JSON") from None


def hide(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


def retry_after(resp: httpx.Response) -> float | None:
    """The seconds a platform's answer asks to wait: its ``Retry-After`` header (seconds or an
    HTTP date), else the body's ``retry_after`` (Discord) or ``parameters.retry_after``
    (Telegram); ``None`` when it says nothing usable."""
    header = resp.headers.get("retry-after")
    if header:
        try:
            return _seconds(float(header))
        except ValueError:
            pass
        try:
            return _seconds(parsedate_to_datetime(header).timestamp() - time.time())
        except (TypeError, ValueError, IndexError):
            pass
    try:
        body = resp.json()
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    params = body.get("parameters")
    if not isinstance(params, dict):
        params = {}
    for value in (body.get("retry_after"), params.get("retry_after")):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return _seconds(float(value))
    return None


def _seconds(value: float) -> float | None:
    return max(0.0, value) if math.isfinite(value) else None
