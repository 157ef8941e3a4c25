"""The board from chat: Slack slash commands and app mentions, Discord interactions, Telegram
updates (``docs/chat.md``).

These routes take no API token: the platform's signature is the authentication
(:mod:`agentboard.chat.verify`, checked before anything else is read; 401 otherwise). The
sender is then a linked chat user (``agentboard chat link``) acting with the checks of an API
token of their role and board (:class:`~agentboard.api.auth.Principal`), or gets a polite
refusal. Slack and Discord want an answer within 3 seconds: a command not done by then is
answered "working on it" and its result follows through Slack's ``response_url`` or a Discord
follow-up message. An answer sent after the request (those, Slack app mentions, Telegram) that
the platform could not take for now (rate limited, failing, unreachable) is sent again a few
times, in the background (:meth:`Runtime.deliver`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
import time
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import parse_qs

import anyio
from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from ...chat import actions, verify
from ...chat import format as fmt
from ...chat.platforms import PlatformError, discord, slack, telegram
from ...chat.threads import Origin
from ...domain.errors import InvalidInput
from ...kernel import chat_links
from ..auth import Principal
from .common import AppState, responses, state

log = logging.getLogger("agentboard.chat")

router = APIRouter(prefix="/api/chat", tags=["chat"])

#: seconds a command may take before Slack or Discord is answered "working on it" (they allow 3)
GRACE = 2.5
#: Discord interaction types and callback types
PING, APPLICATION_COMMAND = 1, 2
PONG, MESSAGE, DEFERRED = 1, 4, 5
_MENTION = re.compile(r"<@[A-Za-z0-9]+>")
#: an answer sent after its request that the platform could not take for now (HTTP 429, 5xx,
#: unreachable) is tried at most REPLY_TRIES times within REPLY_WITHIN seconds: after the wait
#: the platform's Retry-After asks (one longer than RETRY_AFTER_MAX gives up), else after
#: REPLY_BACKOFF seconds, doubled each time
REPLY_TRIES = 3
REPLY_WITHIN = 30.0
RETRY_AFTER_MAX = 15.0
REPLY_BACKOFF = 1.0


class SlackMessage(BaseModel):
    """A Slack message: the answer to a slash command."""

    response_type: str = Field(description="in_channel or ephemeral")
    text: str
    blocks: list[dict[str, Any]] | None = None


class SlackEventAnswer(BaseModel):
    """The Events API's answer: the URL verification challenge echoed, else ``ok``."""

    ok: bool = True
    challenge: str | None = None


class DiscordAnswer(BaseModel):
    """An interaction callback: PONG (1), a message (4, ``data``) or a deferred answer (5)."""

    type: int
    data: dict[str, Any] | None = None


class TelegramAnswer(BaseModel):
    """Telegram's web hook needs a 200; the reply goes through ``sendMessage``."""

    ok: bool = True
    ignored: str | None = None


class Runtime:
    """What the chat routes keep in one server: the replay guard and the work still running
    after its request was answered."""

    def __init__(self) -> None:
        self.guard = verify.ReplayGuard()
        self._running: set[asyncio.Future[Any]] = set()

    def _spawn(self, work: Coroutine[Any, Any, Any] | asyncio.Future[Any]) -> None:
        future = asyncio.ensure_future(work)
        self._running.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: asyncio.Future[Any]) -> None:
        self._running.discard(future)
        if not future.cancelled() and future.exception() is not None:
            log.error("a chat command failed: %s", future.exception())

    def reply(self, work: Callable[[], fmt.Answer], send: Callable[[fmt.Answer], None], what: str) -> None:
        """After the answer: ``work`` in a worker thread, then its answer sent with ``send``
        (:meth:`deliver`)."""

        async def run() -> None:
            answer = await anyio.to_thread.run_sync(work)
            await self.deliver(lambda: send(answer), what)

        self._spawn(run())

    async def deliver(self, send: Callable[[], None], what: str) -> bool:
        """Run ``send`` (a call to a platform) in a worker thread until it works: a
        :class:`PlatformError` the platform may get over (rate limited, failing, unreachable) is
        tried again after a wait (:data:`REPLY_TRIES`, :data:`REPLY_WITHIN`); the waits hold no
        thread. Given up with one log line naming ``what``."""
        deadline = time.monotonic() + REPLY_WITHIN
        tries = 0
        while True:
            tries += 1
            try:
                await anyio.to_thread.run_sync(send)
                return True
            except PlatformError as exc:
                error = exc
            wait = _retry_wait(error, tries)
            why = ""
            if error.retry_after is not None and error.retry_after > RETRY_AFTER_MAX:
                why = f" (it asked to wait {error.retry_after:g} s, more than {RETRY_AFTER_MAX:g})"
            elif wait is not None and time.monotonic() + wait > deadline:
                why = f" (no try left within {REPLY_WITHIN:g} s)"
            if wait is None or why or tries >= REPLY_TRIES:
                log.error("%s: gave up after %d %s: %s%s", what, tries, "try" if tries == 1 else "tries",
                          error, why)
                return False
            log.info("%s: %s; trying again in %.1f s", what, error, wait)
            await asyncio.sleep(wait)

    async def within(self, seconds: float, work: Callable[[], fmt.Answer],
                     later: Callable[[fmt.Answer], None], what: str) -> fmt.Answer | None:
        """``work``'s answer when it is done within ``seconds``; else ``None``, and ``later``
        sends the answer when it is (:meth:`deliver`, ``what`` naming it)."""
        future = asyncio.ensure_future(anyio.to_thread.run_sync(work))
        done, _ = await asyncio.wait({future}, timeout=seconds)
        if future in done:
            return future.result()
        self._running.add(future)

        def finished(f: asyncio.Future[Any]) -> None:
            self._done(f)
            if not f.cancelled() and f.exception() is None:
                answer = f.result()
                self._spawn(self.deliver(lambda: later(answer), what))

        future.add_done_callback(finished)
        return None


def _retry_wait(error: PlatformError, tries: int) -> float | None:
    """Seconds to wait before trying again after ``error`` ended try number ``tries``; ``None``:
    trying again would not help (the platform refused the message itself)."""
    if not error.transient:
        return None
    if error.retry_after is not None:
        return error.retry_after
    return REPLY_BACKOFF * (2.0 ** (tries - 1)) * random.uniform(1.0, 1.2)


def _runtime(request: Request) -> Runtime:
    rt = getattr(request.app.state, "chat", None)
    if not isinstance(rt, Runtime):
        rt = request.app.state.chat = Runtime()
    return rt


def caller(platform: str, link: dict[str, Any]) -> Principal:
    """A linked chat user as the API's principal: the role and board of their link, named as
    their events are (``chat:<platform>:<user>``)."""
    return Principal(token_id=0, name=f"chat:{platform}:{link['user_id']}", role=str(link["role"]),
                     boards=(link["board"],) if link.get("board") else ())


def _answer(st: AppState, platform: str, user: str, text: str, origin: Origin | None) -> fmt.Answer:
    """Run ``text`` for the chat user ``user`` (a refusal when nobody linked them)."""
    link = chat_links.find(st.db, platform, user)
    if link is None:
        return actions.refusal(platform, user)
    ctx = actions.Context(db=st.db, settings=st.settings, who=caller(platform, link), origin=origin,
                          dispatcher=st.dispatcher)
    return actions.run_text(ctx, text)


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        raise InvalidInput("the body is not JSON") from None
    if not isinstance(data, dict):
        raise InvalidInput("the body is not a JSON object")
    return data


@router.post("/slack/commands", response_model=SlackMessage, response_model_exclude_none=True,
             responses=responses(400, 401))
async def slack_command(request: Request) -> SlackMessage:
    """A ``/kanban`` slash command (form-encoded, signed by Slack)."""
    st, rt = state(request), _runtime(request)
    body = await request.body()
    verify.slack(st.settings.chat_slack_signing_secret, request.headers.get("x-slack-request-timestamp"),
                 request.headers.get("x-slack-signature"), body, guard=rt.guard)
    form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
    user, channel = form.get("user_id", ""), form.get("channel_id", "")
    response_url = form.get("response_url", "")
    origin = Origin("slack", channel) if channel else None
    url = st.settings.public_url

    def later(answer: fmt.Answer) -> None:
        if response_url:
            slack.respond(response_url, fmt.slack(answer, url))

    answer = await rt.within(GRACE, lambda: _answer(st, "slack", user, form.get("text", ""), origin), later,
                             f"the Slack answer to {user} through response_url")
    if answer is None:
        return SlackMessage(response_type="ephemeral", text="Working on it…")
    return SlackMessage(**fmt.slack(answer, url))


@router.post("/slack/events", response_model=SlackEventAnswer, response_model_exclude_none=True,
             responses=responses(400, 401))
async def slack_events(request: Request) -> SlackEventAnswer:
    """The Events API: the URL verification challenge, and app mentions answered in their thread."""
    st, rt = state(request), _runtime(request)
    body = await request.body()
    verify.slack(st.settings.chat_slack_signing_secret, request.headers.get("x-slack-request-timestamp"),
                 request.headers.get("x-slack-signature"), body, guard=rt.guard)
    payload = _json(body)
    if payload.get("type") == "url_verification":
        return SlackEventAnswer(challenge=str(payload.get("challenge") or ""))
    event = _obj(payload.get("event"))
    if payload.get("type") != "event_callback" or event.get("type") != "app_mention" or event.get("bot_id"):
        return SlackEventAnswer()
    # Slack sends an event again when it saw no answer in time (a new signature each time)
    if payload.get("event_id") and not rt.guard.first(f"slack-event:{payload['event_id']}"):
        return SlackEventAnswer()
    channel = str(event.get("channel") or "")
    origin = Origin("slack", channel, str(event.get("thread_ts") or event.get("ts") or ""))
    text = _MENTION.sub("", str(event.get("text") or "")).strip()
    user = str(event.get("user") or "")

    def send(answer: fmt.Answer) -> None:
        slack.post_message(st.settings, channel, fmt.slack(answer, st.settings.public_url), origin.thread or None)

    rt.reply(lambda: _answer(st, "slack", user, text, origin), send, f"the Slack reply to {user} in {channel}")
    return SlackEventAnswer()


def _discord_text(data: dict[str, Any]) -> str:
    """The ``/kanban`` command's text: its options' values (``/kanban command:create "x"``)."""
    parts = []
    for option in data.get("options") or []:
        if isinstance(option, dict) and option.get("value") is not None:
            parts.append(str(option["value"]))
    return " ".join(parts)


@router.post("/discord/interactions", response_model=DiscordAnswer, response_model_exclude_none=True,
             responses=responses(400, 401))
async def discord_interaction(request: Request) -> DiscordAnswer:
    """A Discord interaction (Ed25519-signed): PING → PONG, the ``/kanban`` application command."""
    st, rt = state(request), _runtime(request)
    body = await request.body()
    verify.discord(st.settings.chat_discord_public_key, request.headers.get("x-signature-timestamp"),
                   request.headers.get("x-signature-ed25519"), body, guard=rt.guard)
    payload = _json(body)
    if payload.get("type") == PING:
        return DiscordAnswer(type=PONG)
    if payload.get("type") != APPLICATION_COMMAND:
        raise InvalidInput(f"unsupported interaction type {payload.get('type')!r}")
    data = _obj(payload.get("data"))
    member = _obj(payload.get("member"))
    person = _obj(member.get("user") or payload.get("user"))
    user = str(person.get("id") or "")
    channel = str(payload.get("channel_id") or "")
    origin = Origin("discord", channel, channel) if channel else None
    app_id, token = str(payload.get("application_id") or ""), str(payload.get("token") or "")
    url = st.settings.public_url

    def later(answer: fmt.Answer) -> None:
        discord.follow_up(st.settings, app_id, token, fmt.discord(answer, url))

    answer = await rt.within(GRACE, lambda: _answer(st, "discord", user, _discord_text(data), origin), later,
                             f"the Discord follow-up to {user}")
    if answer is None:
        return DiscordAnswer(type=DEFERRED)
    return DiscordAnswer(type=MESSAGE, data=fmt.discord(answer, url))


@router.post("/telegram/webhook", response_model=TelegramAnswer, response_model_exclude_none=True,
             responses=responses(400, 401))
async def telegram_webhook(request: Request) -> TelegramAnswer:
    """A Telegram update (with the web hook's secret token): ``/kanban …`` messages, answered
    with ``sendMessage`` as a reply to the asking message."""
    st, rt = state(request), _runtime(request)
    verify.telegram(st.settings.chat_telegram_secret_token,
                    request.headers.get("x-telegram-bot-api-secret-token"))
    update = _json(await request.body())
    if not isinstance(update.get("update_id"), int):
        raise InvalidInput("a Telegram update needs its update_id")
    if not verify.telegram_first(rt.guard, update.get("update_id")):
        return TelegramAnswer(ignored="this update was already received")
    message = _obj(update.get("message"))
    text = str(message.get("text") or "")
    if not text.split(" ", 1)[0].split("@", 1)[0].lower() == "/kanban":
        return TelegramAnswer(ignored="not a /kanban command")
    sender = _obj(message.get("from"))
    chat = _obj(message.get("chat"))
    user, chat_id = str(sender.get("id") or ""), str(chat.get("id") or "")
    message_id = str(message.get("message_id") or "")
    origin = Origin("telegram", chat_id, message_id) if chat_id else None

    def send(answer: fmt.Answer) -> None:
        telegram.send_message(st.settings, chat_id, fmt.telegram(answer, st.settings.public_url), message_id)

    rt.reply(lambda: _answer(st, "telegram", user, text, origin), send, f"the Telegram reply to {user} in {chat_id}")
    return TelegramAnswer()
