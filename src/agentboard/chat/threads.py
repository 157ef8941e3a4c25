"""A chat thread as a notification target: ``chat://<platform>/<channel>/<thread>``.

A task created from a chat thread gets a task subscription to its thread (in the transaction
that creates it, ``kernel.chat_links.create_in_thread``); the notifier delivers it like any
target — at least once, with its cursor, retries and parking — and :func:`send` posts the
message there: Slack ``chat.postMessage`` with ``thread_ts``, a Discord channel message (a
thread is a channel), Telegram ``sendMessage`` with ``reply_to_message_id``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

from ..config import Settings
from . import format as fmt
from .platforms import PlatformError, discord, slack, telegram

SCHEME = "chat://"


@dataclass(frozen=True)
class Origin:
    """Where a command came from: the platform, the channel (a Telegram chat) and the thread
    (Slack ``thread_ts``, a Telegram message id; empty for a Slack channel without a thread)."""

    platform: str
    channel: str
    thread: str = ""

    @property
    def target(self) -> str:
        return f"{SCHEME}{self.platform}/{quote(self.channel, safe='')}/{quote(self.thread, safe='')}"

    @property
    def display(self) -> str:
        where = f"{self.channel}/{self.thread}" if self.thread else self.channel
        return f"{self.platform} thread {where}"


def is_target(url: str) -> bool:
    return url.startswith(SCHEME)


def origin_of(url: str) -> Origin:
    """The thread a ``chat://`` target names (:class:`ValueError` for anything else)."""
    if not is_target(url):
        raise ValueError("not a chat thread target")
    platform, _, rest = url[len(SCHEME):].partition("/")
    channel, _, thread = rest.partition("/")
    if platform not in ("slack", "discord", "telegram") or not channel:
        raise ValueError("not a chat thread target")
    return Origin(platform, unquote(channel), unquote(thread))


def post(settings: Settings, origin: Origin, answer: fmt.Answer) -> None:
    """Post ``answer`` in the thread ``origin`` with the bot (:class:`PlatformError` when the
    platform refuses)."""
    url = settings.public_url
    if origin.platform == "slack":
        slack.post_message(settings, origin.channel, fmt.slack(answer, url), origin.thread or None)
    elif origin.platform == "discord":
        message = fmt.discord(answer, url)
        message.pop("flags", None)
        discord.channel_message(settings, origin.thread or origin.channel, message)
    else:
        telegram.send_message(settings, origin.channel, fmt.telegram(answer, url), origin.thread or None)


def send(settings: Settings, target: str, title: str, body: str) -> str | None:
    """A notifier delivery to a chat thread: ``None`` when the platform took it, else why not."""
    try:
        post(settings, origin_of(target), fmt.notification(title, body))
    except (PlatformError, ValueError) as exc:
        return str(exc)
    return None
