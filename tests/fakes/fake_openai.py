"""An OpenAI-compatible chat-completions server on 127.0.0.1 for tests and benchmarks.

    with FakeOpenAI() as server:
        server.script("first answer", {"status": 429}, "second answer")
        ... AGENTBOARD_LLM_BASE_URL=server.url ...
        server.requests  # the JSON bodies received, in order

Each request to ``POST /v1/chat/completions`` takes the next scripted reply; with the script
used up it answers ``default`` ("OK"). A reply is the assistant's text (a string) or a dict:
``{"status": 429}`` / ``{"status": 500}`` (an OpenAI-style error body), ``{"garbage": True}``
(a 200 whose body is not JSON), ``{"delay": 2.0, "text": "..."}`` (answer after a pause),
``{"hold": True, "text": "..."}`` (answer only once ``release()`` is called),
``{"text": "...", "usage": {...}}`` (extra usage fields, e.g. ``{"cost": 0.01}``). Replies
carry usage: ``prompt_tokens`` = words of the prompt, ``completion_tokens`` = words of the
answer. Any other path answers 404. ``requests`` holds the body of every POST that reached
the server, ``headers`` their headers (lower-case names), ``paths`` the path of every request
(GET included).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = str | dict[str, Any]


class FakeOpenAI:
    def __init__(self, default: str = "OK") -> None:
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control -------------------------------------------------------------------------------

    def script(self, *replies: Reply) -> FakeOpenAI:
        """Queue replies for the next requests (after those already queued)."""
        with self._lock:
            self._script.extend(replies)
        return self

    def release(self) -> None:
        """Let every held reply (``{"hold": True}``) answer, now and from now on."""
        self._released.set()

    @property
    def url(self) -> str:
        """The base URL to give the SDK (``http://127.0.0.1:<port>/v1``)."""
        assert self._server is not None, "the server is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed ACK

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                with fake._lock:
                    fake.requests.append(body)
                    fake.paths.append(self.path)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    reply: Reply = fake._script.popleft() if fake._script else fake.default
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                fake._answer(self, body, reply)

            def do_GET(self) -> None:
                with fake._lock:
                    fake.paths.append(self.path)
                self._send(404, {"error": {"message": "not found"}})

            def _send(self, status: int, obj: Any, raw: bytes | None = None,
                      content_type: str = "application/json") -> None:
                data = raw if raw is not None else json.dumps(obj).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.release()
        self.stop()

    # -- answering -----------------------------------------------------------------------------

    def _answer(self, handler: Any, body: dict[str, Any], reply: Reply) -> None:
        spec: dict[str, Any] = {"text": reply} if isinstance(reply, str) else dict(reply)
        if spec.get("delay"):
            time.sleep(float(spec["delay"]))
        if spec.get("hold"):
            self._released.wait(300)
        status = int(spec.get("status", 200))
        if status != 200:
            kind = "rate_limit_exceeded" if status == 429 else "server_error"
            message = spec.get("message") or ("Rate limit reached, slow down" if status == 429
                                               else "The server had an error while processing your request")
            handler._send(status, {"error": {"message": message, "type": kind, "code": kind}})
            return
        if spec.get("garbage"):
            handler._send(200, None, raw=b"<html>this is not JSON", content_type="application/json")
            return
        text = str(spec.get("text", self.default))
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict))
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        usage.update(spec.get("usage") or {})
        handler._send(200, {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or "fake-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": usage,
        })


if __name__ == "__main__":  # a server to point a manual `agentboard llm check` at
    import sys

    with FakeOpenAI(default=sys.argv[1] if len(sys.argv) > 1 else "OK") as server:
        print(server.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
