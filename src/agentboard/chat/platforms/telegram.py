"""Telegram's Bot API: ``sendMessage`` (``reply_to_message_id`` keeps the thread), ``getMe``."""

from __future__ import annotations

from typing import Any

from ...config import Settings
from . import PlatformError, call


def _method(settings: Settings, method: str, payload: dict[str, Any] | None = None) -> Any:
    token = settings.chat_telegram_bot_token
    if not token:
        raise PlatformError("Telegram: no bot token ([chat.telegram] bot_token)")
    out = call("POST", f"{settings.chat_telegram_api_base.rstrip('/')}/bot{token}/{method}",
               what=f"Telegram {method}", secret=token, json=payload or {})
    if not isinstance(out, dict) or not out.get("ok"):
        error = out.get("description") if isinstance(out, dict) else "no answer"
        raise PlatformError(f"Telegram {method}: {error}")
    return out.get("result")


def send_message(settings: Settings, chat_id: str, message: dict[str, Any], reply_to: str | None = None) -> None:
    """``sendMessage`` to ``chat_id``, as a reply to message ``reply_to`` when given."""
    payload: dict[str, Any] = {"chat_id": chat_id, **message}
    if reply_to:
        payload["reply_to_message_id"] = int(reply_to) if reply_to.isdigit() else reply_to
        payload["allow_sending_without_reply"] = True
    _method(settings, "sendMessage", payload)


def check(settings: Settings) -> str:
    """``getMe``: the bot's user name."""
    out = _method(settings, "getMe")
    return f"@{out.get('username')}" if isinstance(out, dict) else "?"
