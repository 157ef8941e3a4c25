"""Notification targets: Apprise URLs checked when added and never shown back in full."""

from __future__ import annotations

from ..config import redact
from ..domain import notify_targets
from ..domain.errors import InvalidInput
from . import outbound


def _plugin(url: str):  # type: ignore[no-untyped-def]
    import apprise

    return apprise.Apprise.instantiate(url)


def check(url: str, policy: outbound.Policy | None = None) -> tuple[str, str]:
    """``(url, display)`` for an Apprise URL Apprise can send to; refused with a one-line reason
    otherwise. ``display`` hides the secrets (passwords, tokens, a web hook's path). With
    ``policy`` (a target someone other than an administrator aims) the target must also pass
    :func:`outbound.check`: public addresses only, no plugin that reads local files."""
    text = (url or "").strip()
    if not text or "://" not in text:
        what = "it is empty" if not text else (
            f"it has no scheme:// part (its {len(text)} characters are not repeated here: they may hold a secret)")
        raise InvalidInput(
            f"not an Apprise URL: {what}; use e.g. json://host/path, "
            "slack://..., discord://..., ntfy://topic (https://github.com/caronc/apprise/wiki)")
    plugin = _plugin(text)
    if plugin is None:
        raise InvalidInput(
            f"Apprise cannot send to {notify_targets.mask(text)!r}: unknown service or missing parts; "
            "see https://github.com/caronc/apprise/wiki for the URL of each service")
    if policy is not None:
        outbound.check(text, policy)
    return text, display(text, plugin)


def display(url: str, plugin: object | None = None) -> str:
    """How a target is shown: Apprise's own private form for a named service (its tokens cut
    short), the plain mask for generic web hooks (their path may be the secret)."""
    scheme = url.split("://", 1)[0].lower()
    if scheme in notify_targets.WEB_SCHEMES or plugin is None:
        return notify_targets.mask(url)
    try:
        private = str(plugin.url(privacy=True))  # type: ignore[attr-defined]
    except Exception:
        return notify_targets.mask(url)
    private = private.split("?", 1)[0]
    return redact(private) or notify_targets.mask(url)
