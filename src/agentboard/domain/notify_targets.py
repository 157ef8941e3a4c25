"""Notification targets (Apprise URLs) as they may be shown: never with their secrets.

The notifier's own masking (``notify.targets``) asks Apprise which parts of a URL are secret;
this is the plain rule for when Apprise is not at hand: the scheme, and for the generic web
hooks (``json://``, ``xml://``, ``form://``, ``ntfy://``...) the host and port; everything else
(user, password, path, query) masked.
"""

from __future__ import annotations

from urllib.parse import urlsplit

#: schemes whose host is a plain server address, not a secret
WEB_SCHEMES = frozenset({
    "json", "jsons", "xml", "xmls", "form", "forms", "ntfy", "ntfys", "http", "https", "gotify",
    "gotifys", "mailto", "mailtos", "matrix", "matrixs", "apprise", "apprises",
})
MASK = "***"


def mask(url: str) -> str:
    """``url`` with everything but its scheme (and a web hook's host) replaced by ``***``."""
    text = (url or "").strip()
    if "://" not in text:
        return MASK
    scheme, rest = text.split("://", 1)
    if scheme.lower() not in WEB_SCHEMES:
        return f"{scheme}://{MASK}" if rest else f"{scheme}://"
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return f"{scheme}://{MASK}"
    user = f"{MASK}@" if parts.username or parts.password else ""
    tail = f"/{MASK}" if (parts.path.strip("/") or parts.query) else ""
    return f"{scheme}://{user}{host}{port}{tail}"
