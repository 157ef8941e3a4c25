"""The platforms' Web APIs, through httpx: each platform's address is a setting
(``chat_<platform>_api_base``), so a test talks to a loopback server speaking the same API."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

#: seconds one call to a platform may take
TIMEOUT = 10.0

_client: httpx.Client | None = None
_lock = threading.Lock()


class PlatformError(Exception):
    """A platform refused a call or could not be reached (the message carries no token)."""


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
        raise PlatformError(f"{what}: {hide(text, secret)}") from None
    if resp.status_code >= 400:
        raise PlatformError(f"{what}: HTTP {resp.status_code} {hide(resp.text[:200], secret)}")
    if not resp.content:
        return None
    try:
        return resp.json()
    except ValueError:
        raise PlatformError(f"{what}: the answer is not JSON") from None


def hide(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text
