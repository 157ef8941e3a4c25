"""Who sent a chat request: each platform's signature, checked as it documents it.

- Slack: ``X-Slack-Signature`` is ``v0=`` + HMAC-SHA256 of ``v0:{timestamp}:{raw body}`` under
  the signing secret (compared in constant time); the timestamp is at most :data:`WINDOW`
  seconds from now.
- Discord: ``X-Signature-Ed25519`` is the Ed25519 signature of timestamp + raw body under the
  application's public key; the same window on ``X-Signature-Timestamp``.
- Telegram: ``X-Telegram-Bot-Api-Secret-Token`` equals the ``secret_token`` given to
  ``setWebhook`` (constant time).

A request seen once within the window is refused the second time (:class:`ReplayGuard`: Slack
and Discord by signature, Telegram by ``update_id``), so a captured request cannot be sent
again. Every refusal is :class:`~agentboard.domain.errors.Unauthorized` (401) before anything
else is read.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time

from ..domain.errors import Unauthorized

#: seconds a signed request's timestamp may be away from now (and how long it is remembered)
WINDOW = 300.0


class ReplayGuard:
    """The keys (signatures, update ids) seen in the last :data:`WINDOW` seconds, per process."""

    def __init__(self, window: float = WINDOW, limit: int = 200_000) -> None:
        self.window = window
        self.limit = limit
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def first(self, key: str, now: float | None = None) -> bool:
        """True the first time ``key`` is seen within the window (it is remembered), else False."""
        at = time.time() if now is None else now
        with self._lock:
            expires = self._seen.get(key)
            if expires is not None and expires > at:
                return False
            if len(self._seen) >= self.limit:
                self._prune(at)
            self._seen[key] = at + self.window
            return True

    def _prune(self, now: float) -> None:
        for key in [k for k, until in self._seen.items() if until <= now]:
            del self._seen[key]
        while len(self._seen) >= self.limit:  # all still fresh: the oldest go
            del self._seen[next(iter(self._seen))]


def _fresh(timestamp: str | None, now: float) -> None:
    try:
        at = float(timestamp or "")
    except ValueError:
        raise Unauthorized("missing or invalid request timestamp") from None
    if abs(now - at) > WINDOW:
        raise Unauthorized("the request's timestamp is more than 5 minutes away; refused as stale")


def _once(guard: ReplayGuard, key: str, now: float) -> None:
    if not guard.first(key, now):
        raise Unauthorized("this request was already received; refused as a replay")


def slack_signature(secret: str, timestamp: str, body: bytes) -> str:
    """``v0=`` + the hex HMAC-SHA256 of ``v0:{timestamp}:{body}``: what Slack sends."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def slack(secret: str | None, timestamp: str | None, signature: str | None, body: bytes, *,
          guard: ReplayGuard, now: float | None = None) -> None:
    """Refuse (401) a Slack request that is not signed with ``secret``, is stale or a replay."""
    at = time.time() if now is None else now
    if not secret:
        raise Unauthorized("Slack is not configured here: set [chat.slack] signing_secret")
    _fresh(timestamp, at)
    expected = slack_signature(secret, str(timestamp), body)
    if not signature or not hmac.compare_digest(expected.encode(), signature.encode()):
        raise Unauthorized("invalid Slack signature")
    _once(guard, "slack:" + signature, at)


def discord(public_key: str | None, timestamp: str | None, signature: str | None, body: bytes, *,
            guard: ReplayGuard, now: float | None = None) -> None:
    """Refuse (401) a Discord interaction whose Ed25519 signature over timestamp + body does not
    verify under ``public_key`` (hex), or that is stale or a replay."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    at = time.time() if now is None else now
    if not public_key:
        raise Unauthorized("Discord is not configured here: set [chat.discord] public_key")
    _fresh(timestamp, at)
    try:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key))
        key.verify(bytes.fromhex(signature or ""), str(timestamp).encode() + body)
    except (ValueError, InvalidSignature):
        raise Unauthorized("invalid Discord signature") from None
    _once(guard, "discord:" + str(signature), at)


def telegram(secret_token: str | None, given: str | None) -> None:
    """Refuse (401) a Telegram update without the web hook's secret token."""
    if not secret_token:
        raise Unauthorized("Telegram is not configured here: set [chat.telegram] secret_token")
    if not given or not hmac.compare_digest(secret_token.encode(), given.encode()):
        raise Unauthorized("invalid or missing X-Telegram-Bot-Api-Secret-Token")


def telegram_first(guard: ReplayGuard, update_id: object) -> bool:
    """True the first time ``update_id`` is seen within the window: Telegram sends an update
    again until its web hook answers 200, and a second copy is answered without acting on it."""
    return guard.first(f"telegram:{update_id}")
