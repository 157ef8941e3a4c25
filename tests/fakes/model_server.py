"""A scripted model server on loopback: the real agent CLIs take real turns against it.

It speaks the streaming protocols the agent CLIs call:

- Anthropic Messages (Claude Code): ``POST /v1/messages`` with ``stream: true``, answered as
  server-sent events (``message_start``, ``content_block_*``, ``message_delta``,
  ``message_stop``);
- OpenAI Responses (Codex): ``POST /v1/responses``, answered as ``response.*`` events;
- OpenAI Chat Completions (opencode through an OpenAI-compatible provider, the board's own LLM
  transport): ``POST /v1/chat/completions``, streamed or not;
- Gemini (Gemini CLI): ``POST /v1beta/models/<model>:streamGenerateContent``.

Run it as a process (``python model_server.py SCRIPT.json LOG.jsonl``: it prints its URL on the
first line of its output and serves until killed), or in a thread (:class:`ModelServer`).

The script (a JSON file, read again at every request, so a test may rewrite it) is
``{"turns": [REPLY, ...], "usage": {"input_tokens": N, "output_tokens": N}}`` (a new
``"generation"`` value starts the turns over). Each request that
offers tools (an agent's turn) takes the next reply; with the script used up, or for a request
without tools (a CLI's side requests: titles, quota checks), the reply is the text ``OK``. A
reply is a dict:

- ``{"text": "..."}``: the assistant says this and ends its turn;
- ``{"calls": [CALL, ...], "text": "..."}``: tool calls (the turn ends with ``tool_use``); a CALL
  is ``{"write": {"path": P, "content": C}}`` (the CLI's own file tool), ``{"shell": CMD}``
  (its shell tool), ``{"mcp": NAME, "args": {...}}`` (a tool of the board's MCP server, e.g.
  ``kanban_complete``) or ``{"tool": NAME, "input": {...}}`` (any tool by its exact name);
- ``{"status": 429, "reset_in": SECONDS}``, ``{"status": 401}``, ``{"status": 500}``: an
  error response of the protocol's shape (never to be retried: ``x-should-retry: false``);
- ``{"cut": true}``: a 200 whose stream stops in the middle;
- ``{"hang": REPLY}``: nothing at all until the script file says ``"release": true``, then REPLY
  (a model that takes its time; the client may go away meanwhile).

``{cwd}`` in a path, a command or an argument is replaced by the working folder the CLI
named in its request (its system prompt or environment context).

A request whose body is one already answered (a client's retry of a step) gets the same reply
again rather than the next turn: a turn is never lost to a response the client dropped.

Every request is appended to the log (one JSON line: time, path, the body, which reply it got,
whether it repeated an earlier request).
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DEFAULT_USAGE = {"input_tokens": 1200, "output_tokens": 30}
_CWD = [re.compile(r"<cwd>([^<\n]+)</cwd>"), re.compile(r"Primary working directory: (\S+)"),
        re.compile(r"Workspace Directories:\*\*\n\s*- (/\S+)"),
        re.compile(r"Working directory: (\S+)"), re.compile(r"working directory is:? ?`?(/[^\s`'\"]+)"),
        re.compile(r"current working directory[^/\n]*?(/[^\s`'\"]+)", re.I)]


class Script:
    """The replies, read from a file at every request; the position is kept here."""

    def __init__(self, path: Path, log: Path) -> None:
        self.path = path
        self.log = log
        self.used = 0
        self.generation: object = None
        #: the reply each agentic request body was given: a client that sends a request again (its
        #: retry after a dropped connection or a timeout) gets the same reply, as from a model that
        #: answers the same conversation the same way, instead of taking the next turn
        self.answered: dict[str, tuple[dict[str, Any], int | None]] = {}
        self.lock = threading.Lock()

    def next_reply(self, agentic: bool, body: dict[str, Any], route: str, self_path: str = "") -> dict[str, Any]:
        with self.lock:
            try:
                data = json.loads(self.path.read_text())
            except (OSError, ValueError):
                data = {}
            if data.get("generation") != self.generation:  # a new script: from its first reply
                self.generation, self.used = data.get("generation"), 0
                self.answered.clear()
            turns = data.get("turns") or []
            reply: dict[str, Any] = {"text": "OK"}
            index = None
            key = json.dumps([route, body], sort_keys=True)
            repeat = agentic and key in self.answered
            if repeat:
                reply, index = self.answered[key]
                reply = dict(reply)
            elif agentic and self.used < len(turns):
                reply, index = dict(turns[self.used]), self.used
                self.used += 1
            if agentic and not repeat and index is not None:
                self.answered[key] = (dict(reply), index)
            reply.setdefault("usage", data.get("usage") or DEFAULT_USAGE)
            with self.log.open("a") as fh:
                fh.write(json.dumps({"at": time.time(), "route": route, "path": self_path, "turn": index,
                                     "agentic": agentic, "repeat": repeat, "body": body}) + "\n")
            return reply


def _cwd_of(body: dict[str, Any]) -> str:
    text = json.dumps(body)
    for pattern in _CWD:
        m = pattern.search(text.replace("\\n", "\n"))
        if m:
            return m.group(1).rstrip(".,")
    return "."


def _fill(value: Any, cwd: str) -> Any:
    if isinstance(value, str):
        return value.replace("{cwd}", cwd)
    if isinstance(value, dict):
        return {k: _fill(v, cwd) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, cwd) for v in value]
    return value


def _tool_names(body: dict[str, Any]) -> list[str]:
    """The tools the request offers, by the names the model calls them (Codex groups MCP tools
    in namespaces: ``namespace/name``)."""
    names: list[str] = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace":
            names += [f"{t.get('name')}/{s.get('name')}" for s in t.get("tools") or [] if isinstance(s, dict)]
        elif isinstance(t.get("function"), dict):
            names.append(str(t["function"].get("name")))
        elif t.get("name"):
            names.append(str(t["name"]))
        for decl in t.get("functionDeclarations") or []:
            names.append(str(decl.get("name")))
    return names


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script: Script

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}],
                             "models": [{"slug": "scripted", "display_name": "scripted"}]})
            return
        self._json(404, {"error": {"message": "not found"}})

    def do_HEAD(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            self._json(200, {"input_tokens": 1000})
            return
        if path.endswith("/messages"):
            route = "anthropic"
        elif path.endswith("/responses"):
            route = "responses"
        elif path.endswith("/chat/completions"):
            route = "chat"
        elif ":streamGenerateContent" in path or ":generateContent" in path:
            route = "gemini"
        elif path.endswith(":countTokens"):
            self._json(200, {"totalTokens": 1000})
            return
        else:
            self._json(404, {"error": {"message": f"no route {path}"}})
            return
        reply = self.script.next_reply(bool(_tool_names(body)), body, route, self.path)
        reply = _fill(reply, _cwd_of(body))
        if reply.get("status"):
            self._error(route, reply)
            return
        if reply.get("hang"):
            if not self._hang():
                return
            reply = _fill(dict(reply["hang"]), _cwd_of(body))
            reply.setdefault("usage", DEFAULT_USAGE)
        {"anthropic": self._anthropic, "responses": self._responses, "chat": self._chat,
         "gemini": self._gemini}[route](body, reply)

    # -- plumbing ------------------------------------------------------------------------------

    def _json(self, status: int, data: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        out = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(out)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _event(self, name: str | None, data: dict[str, Any]) -> None:
        head = f"event: {name}\n" if name else ""
        self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def _cut(self) -> None:
        self.wfile.flush()
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True

    def _hang(self) -> bool:
        """Send nothing until the script says ``"release": true`` (True) or the client goes away."""
        self.connection.settimeout(0.1)
        while True:
            try:
                data = json.loads(self.script.path.read_text())
            except (OSError, ValueError):
                data = {}
            if data.get("release"):
                self.connection.settimeout(None)
                return True
            try:
                if not self.connection.recv(1, socket.MSG_PEEK):
                    return False
            except TimeoutError:
                continue
            except OSError:
                return False

    def _error(self, route: str, reply: dict[str, Any]) -> None:
        status = int(reply["status"])
        headers = {"x-should-retry": "false"}
        message = {429: "Rate limit exceeded: you have used your quota for this period",
                   401: "invalid x-api-key", 500: "Internal server error"}.get(status, "error")
        if status == 429:
            reset = int(time.time() + float(reply.get("reset_in", 3600)))
            message = str(reply.get("message") or f"{message}. Please try again in {int(reply.get('reset_in', 3600))}s.")
            headers.update({"retry-after": str(int(reply.get("reset_in", 3600))),
                            "anthropic-ratelimit-unified-status": "rejected",
                            "anthropic-ratelimit-unified-reset": str(reset),
                            "anthropic-ratelimit-unified-representative-claim": "five_hour",
                            "x-ratelimit-reset-requests": f"{int(reply.get('reset_in', 3600))}s"})
        if route == "anthropic":
            kind = {429: "rate_limit_error", 401: "authentication_error", 500: "api_error"}.get(status, "api_error")
            self._json(status, {"type": "error", "error": {"type": kind, "message": message}}, headers)
        elif route == "gemini":
            error = {"code": status, "message": message,
                     "status": {429: "RESOURCE_EXHAUSTED", 401: "UNAUTHENTICATED"}.get(status, "INTERNAL")}
            if status == 429:  # as the Gemini API says it: the quota, and when to retry
                reset_in = int(reply.get("reset_in", 3600))
                error["message"] = (f"You exceeded your current quota, please check your plan and billing details. "
                                    f"Please retry in {reset_in}s.")
                error["details"] = [
                    {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                        {"quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                         "quotaId": "GenerateRequestsPerMinutePerProjectPerModel"}]},
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{reset_in}s"}]
            self._json(status, {"error": error}, headers)
        else:
            code = {429: "rate_limit_exceeded", 401: "invalid_api_key", 500: "server_error"}.get(status, "error")
            error: dict[str, Any] = {"message": message, "type": code, "code": code}
            if status == 429 and route == "responses":  # a plan's usage limit, with when it resets
                reset_in = int(reply.get("reset_in", 3600))
                error.update({"type": "usage_limit_reached", "code": "usage_limit_reached", "plan_type": "plus",
                              "resets_in_seconds": reset_in, "resets_at": int(time.time()) + reset_in})
            self._json(status, {"error": error}, headers)

    # -- Anthropic Messages ------------------------------------------------------------------

    def _anthropic(self, body: dict[str, Any], reply: dict[str, Any]) -> None:
        usage = reply["usage"]
        blocks: list[dict[str, Any]] = []
        if reply.get("text"):
            blocks.append({"type": "text", "text": str(reply["text"])})
        for call in reply.get("calls") or []:
            name, args = _anthropic_call(call)
            blocks.append({"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20], "name": name, "input": args})
        if not blocks:
            blocks.append({"type": "text", "text": "OK"})
        msg_id = "msg_" + uuid.uuid4().hex[:20]
        if not body.get("stream"):
            self._json(200, {"id": msg_id, "type": "message", "role": "assistant", "model": body.get("model"),
                             "content": blocks, "stop_reason": "tool_use" if reply.get("calls") else "end_turn",
                             "stop_sequence": None, "usage": usage})
            return
        self._start_stream()
        self._event("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": body.get("model") or "scripted",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                self._event("content_block_start", {"type": "content_block_start", "index": i,
                                                    "content_block": {"type": "text", "text": ""}})
                self._event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                    "delta": {"type": "text_delta", "text": block["text"]}})
                if reply.get("cut"):
                    self._cut()
                    return
            else:
                self._event("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                    "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
                self._event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
            self._event("content_block_stop", {"type": "content_block_stop", "index": i})
        self._event("message_delta", {"type": "message_delta", "delta": {
            "stop_reason": "tool_use" if reply.get("calls") else "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]}})
        self._event("message_stop", {"type": "message_stop"})

    # -- OpenAI Responses --------------------------------------------------------------------

    def _responses(self, body: dict[str, Any], reply: dict[str, Any]) -> None:
        usage = reply["usage"]
        tools = _tool_names(body)
        items: list[dict[str, Any]] = []
        for call in reply.get("calls") or []:
            items.append(_responses_call(call, tools))
        if reply.get("text") or not items:
            items.append({"type": "message", "role": "assistant", "id": "msg_" + uuid.uuid4().hex[:16],
                          "status": "completed",
                          "content": [{"type": "output_text", "text": str(reply.get("text") or "OK"),
                                       "annotations": []}]})
        resp_id = "resp_" + uuid.uuid4().hex[:16]
        self._start_stream()
        base = {"id": resp_id, "object": "response", "created_at": int(time.time()), "status": "in_progress",
                "model": body.get("model") or "scripted", "output": []}
        self._event("response.created", {"type": "response.created", "response": base})
        for i, item in enumerate(items):
            self._event("response.output_item.added", {"type": "response.output_item.added", "output_index": i,
                                                       "item": item})
            if item["type"] == "message":
                text = item["content"][0]["text"]
                self._event("response.output_text.delta", {"type": "response.output_text.delta",
                                                           "item_id": item["id"], "output_index": i,
                                                           "content_index": 0, "delta": text})
                if reply.get("cut"):
                    self._cut()
                    return
            self._event("response.output_item.done", {"type": "response.output_item.done", "output_index": i,
                                                      "item": item})
        total = usage["input_tokens"] + usage["output_tokens"]
        self._event("response.completed", {"type": "response.completed", "response": {
            **base, "status": "completed", "output": items,
            "usage": {"input_tokens": usage["input_tokens"], "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": usage["output_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": total}}})

    # -- OpenAI Chat Completions -------------------------------------------------------------

    def _chat(self, body: dict[str, Any], reply: dict[str, Any]) -> None:
        usage = reply["usage"]
        calls = [_chat_call(c, i) for i, c in enumerate(reply.get("calls") or [])]
        text = str(reply.get("text") or ("" if calls else "OK"))
        finish = "tool_calls" if calls else "stop"
        cu = {"prompt_tokens": usage["input_tokens"], "completion_tokens": usage["output_tokens"],
              "total_tokens": usage["input_tokens"] + usage["output_tokens"]}
        cid = "chatcmpl-" + uuid.uuid4().hex[:16]
        if not body.get("stream"):
            msg: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                msg["tool_calls"] = calls
            self._json(200, {"id": cid, "object": "chat.completion", "created": int(time.time()),
                             "model": body.get("model") or "scripted",
                             "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": cu})
            return
        self._start_stream()
        head = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                "model": body.get("model") or "scripted"}
        self.wfile.write(f"data: {json.dumps({**head, 'choices': [{'index': 0, 'delta': {'role': 'assistant', 'content': ''}, 'finish_reason': None}]})}\n\n".encode())  # noqa: E501
        if text:
            self.wfile.write(f"data: {json.dumps({**head, 'choices': [{'index': 0, 'delta': {'content': text}, 'finish_reason': None}]})}\n\n".encode())  # noqa: E501
            if reply.get("cut"):
                self._cut()
                return
        if calls:
            delta = {"tool_calls": [{**c, "index": i} for i, c in enumerate(calls)]}
            self.wfile.write(f"data: {json.dumps({**head, 'choices': [{'index': 0, 'delta': delta, 'finish_reason': None}]})}\n\n".encode())  # noqa: E501
        self.wfile.write(f"data: {json.dumps({**head, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': finish}], 'usage': cu})}\n\n".encode())  # noqa: E501
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    # -- Gemini ------------------------------------------------------------------------------

    def _gemini(self, body: dict[str, Any], reply: dict[str, Any]) -> None:
        usage = reply["usage"]
        parts: list[dict[str, Any]] = []
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if schema and not reply.get("calls") and config.get("responseMimeType") == "application/json":
            # a side request that wants JSON (Gemini CLI's model router): the smallest valid answer
            parts.append({"text": json.dumps(_example(schema))})
        elif reply.get("text") or not reply.get("calls"):
            parts.append({"text": str(reply.get("text") or "OK")})
        for call in reply.get("calls") or []:
            name, args = _gemini_call(call)
            parts.append({"functionCall": {"name": name, "args": args}})
        chunk = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": usage["input_tokens"],
                                   "candidatesTokenCount": usage["output_tokens"],
                                   "totalTokenCount": usage["input_tokens"] + usage["output_tokens"]},
                 "modelVersion": "scripted"}
        if ":streamGenerateContent" not in self.path:
            self._json(200, chunk)
            return
        self._start_stream()
        if reply.get("cut"):
            self._cut()
            return
        self._event(None, chunk)


# -- a scripted call in each CLI's own tool names ------------------------------------------------

def _anthropic_call(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if "write" in call:
        return "Write", {"file_path": call["write"]["path"], "content": call["write"]["content"]}
    if "shell" in call:
        return "Bash", {"command": call["shell"], "description": "run a command"}
    if "mcp" in call:
        return f"mcp__agentboard__{call['mcp']}", dict(call.get("args") or {})
    return str(call["tool"]), dict(call.get("input") or {})


def _responses_call(call: dict[str, Any], tools: list[str]) -> dict[str, Any]:
    cid = "call_" + uuid.uuid4().hex[:16]
    item: dict[str, Any] = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:16], "call_id": cid,
                            "status": "completed"}
    if "write" in call:
        path, content = call["write"]["path"], call["write"]["content"]
        if "apply_patch" in tools:
            patch = "*** Begin Patch\n*** Add File: " + path + "\n" + "".join(
                "+" + line + "\n" for line in content.splitlines()) + "*** End Patch\n"
            return {"type": "custom_tool_call", "id": "ctc_" + uuid.uuid4().hex[:16], "call_id": cid,
                    "name": "apply_patch", "input": patch, "status": "completed"}
        call = {"shell": f"cat > {json.dumps(path)} <<'EOF'\n{content}\nEOF"}
    if "shell" in call:
        if "exec_command" in tools:
            return {**item, "name": "exec_command", "arguments": json.dumps({"cmd": call["shell"]})}
        if "shell_command" in tools:
            return {**item, "name": "shell_command", "arguments": json.dumps({"command": call["shell"]})}
        return {**item, "name": "shell", "arguments": json.dumps({"command": ["bash", "-lc", call["shell"]]})}
    if "mcp" in call:
        return {**item, "namespace": "mcp__agentboard", "name": str(call["mcp"]),
                "arguments": json.dumps(call.get("args") or {})}
    return {**item, "name": str(call["tool"]), "arguments": json.dumps(call.get("input") or {})}


def _chat_call(call: dict[str, Any], i: int) -> dict[str, Any]:
    if "write" in call:
        name, args = "write", {"filePath": call["write"]["path"], "content": call["write"]["content"]}
    elif "shell" in call:
        name, args = "bash", {"command": call["shell"], "description": "run a command"}
    elif "mcp" in call:
        name, args = f"agentboard_{call['mcp']}", dict(call.get("args") or {})
    else:
        name, args = str(call["tool"]), dict(call.get("input") or {})
    return {"id": f"call_{i}_{uuid.uuid4().hex[:8]}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


def _example(schema: dict[str, Any]) -> Any:
    """The smallest value that fits a JSON schema (OpenAPI-style upper-case types too)."""
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type") or "object").lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: _example(v) for k, v in props.items() if k in (schema.get("required") or props)}
    return {"string": "scripted", "integer": 10, "number": 0.5, "boolean": False, "array": []}.get(kind)


def _gemini_call(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if "write" in call:
        return "write_file", {"file_path": call["write"]["path"], "content": call["write"]["content"]}
    if "shell" in call:
        return "run_shell_command", {"command": call["shell"], "description": "run a command"}
    if "mcp" in call:
        return f"mcp_agentboard_{call['mcp']}", dict(call.get("args") or {})
    return str(call["tool"]), dict(call.get("input") or {})


class ModelServer:
    """The server in a thread of this process (``url``; ``stop()``)."""

    def __init__(self, script: Path, log: Path) -> None:
        handler = type("ScriptedHandler", (Handler,), {"script": Script(script, log)})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> ModelServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main(argv: list[str]) -> None:
    server = ModelServer(Path(argv[0]), Path(argv[1]))
    print(server.url, flush=True)
    server.httpd.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
