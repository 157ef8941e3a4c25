"""Request body size limits: a body over the limit is refused with 413 before any route runs."""

from __future__ import annotations

from collections.abc import Callable

from .auth import ASGIApp, Message, Receive, Scope, Send, deny


class BodyLimitMiddleware:
    """Refuse bodies larger than ``limit_for(path)`` bytes (declared or streamed) with 413."""

    def __init__(self, app: ASGIApp, limit_for: Callable[[str], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = None
        for k, v in scope.get("headers") or ():
            if k.lower() == b"content-length":
                try:
                    declared = int(v)
                except ValueError:
                    declared = None
        if declared is not None and declared > limit:
            await _too_large(send, limit)
            return
        if declared is not None:
            await self.app(scope, receive, send)
            return
        # no declared length (chunked): read it all, within the limit, then replay it
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                await _too_large(send, limit)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _too_large(send: Send, limit: int) -> None:
    await deny(send, 413, "too_large", f"the request body is larger than the limit of {limit} bytes")
