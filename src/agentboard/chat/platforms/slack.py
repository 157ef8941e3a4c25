"""Slack's Web API: ``chat.postMessage`` (threads by ``thread_ts``), the ``response_url`` of a
slash command, ``auth.test``."""

from __future__ import annotations

from typing import Any

from ...config import Settings
from . import PlatformError, call

#: Slack errors (in a 200 answer) after which the same call may work later
TRANSIENT = frozenset({"ratelimited", "service_unavailable", "internal_error"})


def _api(settings: Settings, method: str, payload: dict[str, Any]) -> dict[str, Any]:
    token = settings.chat_slack_bot_token
    if not token:
        raise PlatformError("Slack: no bot token ([chat.slack] bot_token)")
    out = call("POST", f"{settings.chat_slack_api_base.rstrip('/')}/{method}", what=f"Slack {method}",
               secret=token, json=payload, headers={"Authorization": f"Bearer {token}"})
    if not isinstance(out, dict) or not out.get("ok"):
        error = out.get("error") if isinstance(out, dict) else "no answer"
        raise PlatformError(f"Slack {method}: {error}", transient=error in TRANSIENT)
    return out


def post_message(settings: Settings, channel: str, message: dict[str, Any], thread_ts: str | None = None) -> str:
    """Post ``message`` (``text``, ``blocks``) in ``channel``, in the thread ``thread_ts`` when
    given; the new message's ``ts``."""
    payload: dict[str, Any] = {"channel": channel, "text": message.get("text", "")}
    if message.get("blocks"):
        payload["blocks"] = message["blocks"]
    if thread_ts:
        payload["thread_ts"] = thread_ts
    return str(_api(settings, "chat.postMessage", payload).get("ts") or "")


def respond(response_url: str, message: dict[str, Any]) -> None:
    """Answer a slash command later through its ``response_url`` (valid 30 minutes)."""
    call("POST", response_url, what="Slack response_url", secret=response_url, json=message)


def check(settings: Settings) -> str:
    """``auth.test``: who the bot token is (team and bot user), or :class:`PlatformError`."""
    out = _api(settings, "auth.test", {})
    return f"{out.get('team') or out.get('team_id') or '?'} as {out.get('user') or out.get('user_id') or '?'}"
