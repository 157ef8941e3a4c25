"""``agentboard chat status``: which platforms are on, and whether their credentials work."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..config import Settings
from .platforms import PlatformError, discord, slack, telegram


@dataclass
class PlatformStatus:
    platform: str
    on: bool  # its verifying secret is set: the route accepts its requests
    verifier: str  # the setting that turns it on
    credentials: str  # "ok", "missing" or "failed"
    detail: str  # who the bot is, or what is wrong and the setting to fix

    def to_dict(self) -> dict[str, object]:
        return {"platform": self.platform, "on": self.on, "verifier": self.verifier,
                "credentials": self.credentials, "detail": self.detail}


def _check(settings: Settings, platform: str, on: bool, verifier: str, token: str | None,
           probe: Callable[[Settings], str], token_key: str) -> PlatformStatus:
    if not token:
        detail = f"set {token_key} to answer and post in threads" if on else "off"
        return PlatformStatus(platform, on, verifier, "missing", detail)
    try:
        return PlatformStatus(platform, on, verifier, "ok", probe(settings))
    except PlatformError as exc:
        return PlatformStatus(platform, on, verifier, "failed", str(exc))


def check(settings: Settings) -> list[PlatformStatus]:
    """Each platform: on or off, and its bot token tried against its API (``auth.test``,
    ``/applications/@me``, ``getMe``)."""
    return [
        _check(settings, "slack", bool(settings.chat_slack_signing_secret), "[chat.slack] signing_secret",
               settings.chat_slack_bot_token, slack.check, "[chat.slack] bot_token"),
        _check(settings, "discord", bool(settings.chat_discord_public_key), "[chat.discord] public_key",
               settings.chat_discord_bot_token, discord.check, "[chat.discord] bot_token"),
        _check(settings, "telegram", bool(settings.chat_telegram_secret_token), "[chat.telegram] secret_token",
               settings.chat_telegram_bot_token, telegram.check, "[chat.telegram] bot_token"),
    ]
