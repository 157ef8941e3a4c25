"""One delivery through Apprise: ``None`` when it succeeded, else what went wrong (no secrets).

A ``chat://`` target is the chat thread a task was created from: posted there with the bot of
its platform (:mod:`agentboard.chat.threads`), not through Apprise.

An untrusted target (``policy`` given, see :mod:`.outbound`) is delivered with every connection
checked against the policy, and its failure is the generic :data:`.outbound.GENERIC_ERROR`."""

from __future__ import annotations

import logging

from ..config import Settings, redact
from .outbound import GENERIC_ERROR, Policy, guarded

#: Apprise's notification types for the events
INFO, SUCCESS, WARNING, FAILURE = "info", "success", "warning", "failure"


def send(url: str, title: str, body: str, *, timeout: float, kind: str = INFO,
         policy: Policy | None = None, settings: Settings | None = None) -> str | None:
    if url.startswith("chat://"):  # the chat thread a task was created from (docs/chat.md)
        from ..chat import threads

        if settings is None:
            return "a chat thread is delivered with the server's chat settings"
        return threads.send(settings, url, title, body)
    error = _send(url, title, body, timeout=timeout, kind=kind, policy=policy)
    if error is not None and policy is not None:
        return GENERIC_ERROR
    return error


def _send(url: str, title: str, body: str, *, timeout: float, kind: str, policy: Policy | None) -> str | None:
    import apprise

    plugin = apprise.Apprise.instantiate(url)
    if plugin is None:
        return "Apprise cannot send to this URL (unknown service or missing parts)"
    for attr in ("socket_connect_timeout", "socket_read_timeout"):
        if hasattr(plugin, attr):
            setattr(plugin, attr, timeout)
    sender = apprise.Apprise()
    sender.add(plugin)
    try:
        with guarded(policy), apprise.LogCapture(level=logging.WARNING) as captured:
            ok = bool(sender.notify(body=body, title=title, notify_type=kind))
        log = captured.getvalue() if hasattr(captured, "getvalue") else ""
    except Exception as exc:  # a plugin raising instead of returning False
        return _clean(f"{type(exc).__name__}: {exc}", url)
    if ok:
        return None
    lines = [ln.split(" - ", 2)[-1].strip() for ln in str(log).splitlines() if ln.strip()]
    return _clean(lines[-1] if lines else "the service refused the message", url)


def _clean(text: str, url: str) -> str:
    """An error without the target's secrets: the URL itself and its parts never appear."""
    out = text.replace(url, "<target>")
    rest = url.split("://", 1)[-1]
    for part in rest.replace("@", "/").replace(":", "/").replace("?", "/").replace("&", "/").split("/"):
        if len(part) >= 6 and part in out and not part.replace(".", "").isdigit():
            out = out.replace(part, "***")
    return redact(out) or out
