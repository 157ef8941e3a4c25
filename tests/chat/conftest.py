"""A real server over a fresh home with the three chat platforms configured, a loopback server
speaking the platforms' Web APIs (recording what it is sent), and real signing keys."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from testenv import copy_template, wait_for

import agentboard
from agentboard.api import create_app
from agentboard.api.serve import BackgroundServer

SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_BOT = "xoxb-test-bot-token"
DISCORD_APP = "1100000000000000001"
DISCORD_BOT = "discord-bot-token"
TELEGRAM_SECRET = "tg-secret-token_123"
TELEGRAM_BOT = "123456:ABC-test-bot"
PUBLIC_URL = "https://board.example.org"


@dataclass
class Call:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float = 0.0  # time.monotonic() when it came


@dataclass
class Trouble:
    """An answer the fake gives instead of the platform's (a rate limit, an outage)."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


def rate_limited(retry_after: float) -> Trouble:
    """A 429 as the platforms send it: ``Retry-After`` and the body's ``retry_after``."""
    return Trouble(429, {"ok": False, "error": "ratelimited", "error_code": 429,
                         "description": f"Too Many Requests: retry after {retry_after:g}",
                         "retry_after": retry_after, "parameters": {"retry_after": retry_after}},
                   {"retry-after": f"{retry_after:g}"})


def unavailable() -> Trouble:
    return Trouble(503, {"ok": False, "error": "service_unavailable"})


#: Telegram's HTML: the tags it knows, and what may follow ``&``
_TG_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre", "span",
            "tg-spoiler", "blockquote", "tg-emoji"}
_TG_TOKEN = re.compile(r"<(/?)([a-z-]+)(?:\s[^<>]*)?>|&(?:lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);|[<>&]")


def telegram_html_error(text: str) -> str | None:
    """Why Telegram would refuse ``text`` as ``parse_mode`` HTML (``None``: it takes it): a
    ``<``, ``>`` or ``&`` that is no tag or entity, a tag it does not know, a tag not closed."""
    open_tags: list[str] = []
    for m in _TG_TOKEN.finditer(text):
        if m.group(2) is None:
            if m.group(0) in "<>&":
                return f"Can't parse entities: unexpected {m.group(0)!r} at byte offset {m.start()}"
            continue
        closing, name = m.group(1) == "/", m.group(2)
        if name not in _TG_TAGS:
            return f"Can't parse entities: unsupported start tag \"{name}\" at byte offset {m.start()}"
        if not closing:
            open_tags.append(name)
        elif not open_tags or open_tags.pop() != name:
            return f"Can't parse entities: unexpected end tag at byte offset {m.start()}"
    if open_tags:
        return f"Can't parse entities: can't find end tag corresponding to start tag \"{open_tags[-1]}\""
    return None


@dataclass
class FakePlatforms:
    """One loopback server for Slack's, Discord's and Telegram's APIs (under /slack, /discord,
    /telegram), recording every call; ``refuse`` makes every call fail (HTTP 503); the calls
    while ``trouble`` holds answers are answered with them, in order. Telegram refuses HTML
    it cannot parse (400), as Telegram does."""

    server: ThreadingHTTPServer
    calls: list[Call] = field(default_factory=list)
    refuse: bool = False
    trouble: list[Trouble] = field(default_factory=list)
    _ts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def named(self, suffix: str) -> list[Call]:
        return [c for c in self.calls if c.path.endswith(suffix)]

    def wait(self, suffix: str, count: int = 1) -> list[Call]:
        return wait_for(lambda: self.named(suffix) if len(self.named(suffix)) >= count else None,
                        timeout=60, what=f"{count} call(s) to {suffix}")

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        if self.trouble:
            t = self.trouble.pop(0)
            return t.status, t.body, t.headers
        status, out = self._answer(path, body)
        return status, out, {}

    def _answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if self.refuse:
            return 503, {"ok": False, "error": "service_unavailable"}
        if path.startswith("/slack/"):
            self._ts += 1
            if path.endswith("/auth.test"):
                return 200, {"ok": True, "team": "Acme", "user": "agentboard"}
            return 200, {"ok": True, "ts": f"1700000000.{self._ts:06d}", "channel": body.get("channel")}
        if path.startswith("/discord/"):
            if path.endswith("/applications/@me"):
                return 200, {"id": DISCORD_APP, "name": "agentboard"}
            return 200, {"id": "1", "content": body.get("content")}
        if path.startswith("/telegram/"):
            if path.endswith("/getMe"):
                return 200, {"ok": True, "result": {"id": 1, "username": "agentboard_bot"}}
            error = telegram_html_error(str(body.get("text", ""))) if body.get("parse_mode") == "HTML" else None
            if error:
                return 400, {"ok": False, "error_code": 400, "description": f"Bad Request: {error}"}
            return 200, {"ok": True, "result": {"message_id": 99}}
        if path.startswith("/respond/"):
            return 200, None
        return 404, {"ok": False, "error": "unknown_method"}


def start_fake() -> FakePlatforms:
    fake: FakePlatforms

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {"raw": raw.decode()}
            fake.calls.append(Call(self.path, body, {k.lower(): v for k, v in self.headers.items()},
                                   time.monotonic()))
            status, out, headers = fake.answer(self.path, body)
            data = b"" if out is None else json.dumps(out).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_POST = do_GET = _serve

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake = FakePlatforms(server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return fake


@dataclass
class Chat:
    """The server under test, the fake platforms, and signed requests to the chat routes."""

    url: str
    ab: Any
    fake: FakePlatforms
    discord_key: Ed25519PrivateKey
    server: BackgroundServer
    http: httpx.Client

    @property
    def db(self) -> Any:
        return self.ab.db

    def slack(self, path: str, body: bytes, *, ts: float | None = None, secret: str = SLACK_SECRET,
              content_type: str = "application/x-www-form-urlencoded") -> httpx.Response:
        stamp = str(int(time.time() if ts is None else ts))
        sig = "v0=" + hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256).hexdigest()
        return self.http.post(f"/api/chat/slack/{path}", content=body, headers={
            "content-type": content_type, "x-slack-request-timestamp": stamp, "x-slack-signature": sig})

    def slash(self, text: str, user: str = "U111", channel: str = "C100", **kw: Any) -> httpx.Response:
        # Slack gives every command its own trigger_id, so two equal commands are two requests
        body = urlencode({"command": "/kanban", "text": text, "user_id": user, "channel_id": channel,
                          "team_id": "T1", "trigger_id": uuid.uuid4().hex,
                          "response_url": f"{self.fake.url}/respond/{user}/{channel}"}).encode()
        return self.slack("commands", body, **kw)

    def discord(self, payload: dict[str, Any], *, ts: float | None = None,
                key: Ed25519PrivateKey | None = None) -> httpx.Response:
        body = json.dumps(payload).encode()
        stamp = str(int(time.time() if ts is None else ts))
        sig = (key or self.discord_key).sign(stamp.encode() + body).hex()
        return self.http.post("/api/chat/discord/interactions", content=body, headers={
            "content-type": "application/json", "x-signature-ed25519": sig, "x-signature-timestamp": stamp})

    def telegram(self, update: dict[str, Any], secret: str | None = TELEGRAM_SECRET) -> httpx.Response:
        headers = {"content-type": "application/json"}
        if secret is not None:
            headers["x-telegram-bot-api-secret-token"] = secret
        return self.http.post("/api/chat/telegram/webhook", content=json.dumps(update).encode(), headers=headers)

    def link(self, platform: str, user: str, role: str = "member", board: str | None = None) -> None:
        from agentboard.kernel import chat_links

        chat_links.link(self.db, platform, user, role=role, board=board)

    def tasks(self, board: str = "default") -> list[dict[str, Any]]:
        from agentboard.kernel import queries

        return list(queries.list_tasks(self.db, board, include_archived=True))

    def events(self) -> int:
        from agentboard.kernel import queries

        return int(queries.last_event_id(self.db))


def chat_settings(fake_url: str, public_key: str) -> dict[str, Any]:
    return {
        "chat_slack_signing_secret": SLACK_SECRET, "chat_slack_bot_token": SLACK_BOT,
        "chat_slack_api_base": f"{fake_url}/slack/api",
        "chat_discord_public_key": public_key, "chat_discord_application_id": DISCORD_APP,
        "chat_discord_bot_token": DISCORD_BOT, "chat_discord_api_base": f"{fake_url}/discord/api/v10",
        "chat_telegram_secret_token": TELEGRAM_SECRET, "chat_telegram_bot_token": TELEGRAM_BOT,
        "chat_telegram_api_base": f"{fake_url}/telegram",
        "public_url": PUBLIC_URL, "notify_batch_delay": 0, "notify_digest_window": 0,
    }


@pytest.fixture
def fake() -> Iterator[FakePlatforms]:
    f = start_fake()
    yield f
    f.server.shutdown()
    f.server.server_close()


@pytest.fixture
def chat(home: Path, sqlite_template: Path, fake: FakePlatforms) -> Iterator[Chat]:
    copy_template(sqlite_template, home)
    key = Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
    with agentboard.connect(str(home), **chat_settings(fake.url, public)) as ab:
        server = BackgroundServer(create_app(ab.settings, ab.db)).start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            try:
                yield Chat(server.url, ab, fake, key, server, http)
            finally:
                server.stop()
