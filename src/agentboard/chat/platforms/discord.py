"""Discord's API: an interaction's follow-up message (its token, 15 minutes), a channel message
with the bot token, ``/applications/@me``."""

from __future__ import annotations

from typing import Any

from ...config import Settings
from . import PlatformError, call


def _base(settings: Settings) -> str:
    return settings.chat_discord_api_base.rstrip("/")


def follow_up(settings: Settings, application_id: str, token: str, message: dict[str, Any]) -> None:
    """A follow-up message of an interaction (after a deferred answer)."""
    call("POST", f"{_base(settings)}/webhooks/{application_id}/{token}", what="Discord follow-up",
         secret=token, json=message)


def channel_message(settings: Settings, channel_id: str, message: dict[str, Any]) -> None:
    """A message in a channel (a thread is a channel) with the bot token."""
    token = settings.chat_discord_bot_token
    if not token:
        raise PlatformError("Discord: no bot token ([chat.discord] bot_token)")
    call("POST", f"{_base(settings)}/channels/{channel_id}/messages", what="Discord channel message",
         secret=token, json=message, headers={"Authorization": f"Bot {token}"})


def check(settings: Settings) -> str:
    """``GET /applications/@me``: the application the bot token belongs to."""
    token = settings.chat_discord_bot_token
    if not token:
        raise PlatformError("Discord: no bot token ([chat.discord] bot_token)")
    out = call("GET", f"{_base(settings)}/applications/@me", what="Discord /applications/@me", secret=token,
               headers={"Authorization": f"Bot {token}"})
    name = out.get("name") if isinstance(out, dict) else None
    app_id = out.get("id") if isinstance(out, dict) else None
    if settings.chat_discord_application_id and app_id and str(app_id) != settings.chat_discord_application_id:
        raise PlatformError(f"Discord: the bot token belongs to application {app_id}, "
                            f"not {settings.chat_discord_application_id} ([chat.discord] application_id)")
    return f"{name or '?'} ({app_id or '?'})"
