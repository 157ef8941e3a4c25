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


#: the notifier's settings (``config.toml`` / ``AGENTBOARD_*``) and what each must be
SETTINGS_EXPECTED = {
    "notify_poll_interval": "a number of seconds above 0",
    "notify_retry_base": "a number of seconds above 0",
    "notify_retry_max": "a number of seconds above 0",
    "notify_lease": "a number of seconds above 0",
    "notify_timeout": "a number of seconds above 0",
    "notify_batch_delay": "a number of seconds, 0 or more",
    "notify_digest_window": "a number of seconds, 0 or more",
    "notify_park_after": "a whole number of failures, 1 or more",
    "notify_digest_after": "a whole number of events, 0 or more",
    "public_url": "the dashboard's http:// or https:// address",
}


def check_settings(values: dict[str, object]) -> None:
    """Refuse a notifier setting outside its range, saying what it must be."""
    from .errors import InvalidInput

    for key, expected in SETTINGS_EXPECTED.items():
        value = values.get(key)
        if value is None:
            continue
        if key == "public_url":
            ok = isinstance(value, str) and value.startswith(("http://", "https://"))
        elif key in ("notify_park_after", "notify_digest_after"):
            ok = isinstance(value, int) and value >= (1 if key == "notify_park_after" else 0)
        elif key in ("notify_batch_delay", "notify_digest_window"):
            ok = isinstance(value, int | float) and value >= 0
        else:
            ok = isinstance(value, int | float) and value > 0
        if not ok:
            raise InvalidInput(f"invalid setting {key}={value!r}: must be {expected}")
