"""Chat commands through ``serve``: signed Slack slash commands against plain authenticated REST
calls doing the same kernel work, and the time from a verified command to its reply.

- ``agentboard serve --no-dispatch`` runs in its own process over a fresh home with Slack on
  (signing secret and bot token; Slack's API base pointed at a loopback receiver in this
  process) and one linked member.
- Throughput, one client on a keep-alive connection, the two kinds interleaved in rounds of
  ``--batch`` requests so a drift of the machine hits both:
  - ``comment``: ``/kanban comment ID text`` signed with HMAC-SHA256 vs ``POST
    /api/tasks/{id}/comments`` with a bearer token (the same kernel verb);
  - ``create``: ``/kanban create "title"`` vs ``POST /api/tasks`` (the chat create also records
    its thread and subscribes the thread, in the same transaction).
  Target: chat at least 0.8 of REST for each.
- Reply latency: ``--replies`` app mentions (``@agentboard create …`` in a thread), each from the
  moment the signed request is sent to the moment the bot's ``chat.postMessage`` reaches the
  receiver (verification, the link, the command, the answer, the post); p50 and p99.

    python bench/chat.py [--n 300] [--batch 25] [--replies 100]

Prints a table on stderr and one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import load_average  # noqa: E402

SECRET = "bench-signing-secret"
USER = "UBENCH"


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


class Receiver:
    """Slack's Web API on loopback: records when each ``chat.postMessage`` arrives, by channel."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                with receiver.cond:
                    receiver.arrived[str(body.get("channel"))] = time.perf_counter()
                    receiver.cond.notify_all()
                data = b'{"ok": true, "ts": "1700000000.000100"}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, channel: str, timeout: float = 60.0) -> float:
        with self.cond:
            if not self.cond.wait_for(lambda: channel in self.arrived, timeout):
                raise RuntimeError(f"no reply in {channel}")
            return self.arrived[channel]


class Server:
    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentboard", "serve", "--port", "0", "--no-dispatch"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **env, "AGENTBOARD_HOME": str(home), "AGENTBOARD_NOTIFY": "false"})
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            m = re.search(r"(http://\S+)/login\?token=(\S+)", line)
            if m:
                self.url, self.token = m.group(1), m.group(2)
                return
        raise RuntimeError("serve did not start: " + (self.proc.stderr.read() if self.proc.stderr else ""))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def signed(body: bytes) -> dict[str, str]:
    stamp = str(int(time.time()))
    sig = "v0=" + hmac.new(SECRET.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    return {"x-slack-request-timestamp": stamp, "x-slack-signature": sig}


def slash(c: httpx.Client, text: str, i: int) -> None:
    body = urlencode({"command": "/kanban", "text": text, "user_id": USER, "channel_id": f"C{i}",
                      "response_url": "http://127.0.0.1:9/unused"}).encode()
    r = c.post("/api/chat/slack/commands", content=body,
               headers={"content-type": "application/x-www-form-urlencoded", **signed(body)})
    if r.status_code != 200 or "Not done" in r.text or "Working on it" in r.text:
        raise RuntimeError(f"chat command failed: {r.status_code} {r.text[:300]}")


def throughput(server: Server, kind: str, task_id: str, n: int, batch: int) -> dict[str, float]:
    """Requests per second of each side, interleaved in rounds of ``batch``."""
    auth = {"Authorization": f"Bearer {server.token}"}
    spent = {"chat": 0.0, "rest": 0.0}
    done = {"chat": 0, "rest": 0}
    seq = 0
    with httpx.Client(base_url=server.url, timeout=60) as c:
        for side in ("chat", "rest"):  # warm both paths
            seq += 1
            _one(c, side, kind, task_id, seq, auth)
        while done["chat"] < n:
            for side in ("chat", "rest"):
                t0 = time.perf_counter()
                for _ in range(batch):
                    seq += 1
                    _one(c, side, kind, task_id, seq, auth)
                spent[side] += time.perf_counter() - t0
                done[side] += batch
    chat_rps, rest_rps = done["chat"] / spent["chat"], done["rest"] / spent["rest"]
    return {"chat_per_s": chat_rps, "rest_per_s": rest_rps, "ratio": chat_rps / rest_rps}


def _one(c: httpx.Client, side: str, kind: str, task_id: str, seq: int, auth: dict[str, str]) -> None:
    if side == "chat":
        slash(c, f"comment {task_id} note {seq}" if kind == "comment" else f'create "bench task {seq}"', seq)
        return
    if kind == "comment":
        r = c.post(f"/api/tasks/{task_id}/comments", json={"body": f"note {seq}"}, headers=auth)
    else:
        r = c.post("/api/tasks", json={"title": f"bench task {seq}"}, headers=auth)
    if r.status_code != 201:
        raise RuntimeError(f"REST failed: {r.status_code} {r.text[:300]}")


def reply_latency(server: Server, receiver: Receiver, replies: int) -> dict[str, float]:
    """From a signed app mention sent to the bot's reply posted in its thread."""
    lat: list[float] = []
    with httpx.Client(base_url=server.url, timeout=60) as c:
        for i in range(replies):
            channel = f"CREPLY{i}"
            body = json.dumps({"type": "event_callback", "event_id": f"Ev{i}", "event": {
                "type": "app_mention", "user": USER, "channel": channel, "ts": f"1700000000.{i:06d}",
                "text": f'<@UBOT> create "reply {i}"'}}).encode()
            t0 = time.perf_counter()
            r = c.post("/api/chat/slack/events", content=body,
                       headers={"content-type": "application/json", **signed(body)})
            if r.status_code != 200:
                raise RuntimeError(f"event refused: {r.status_code} {r.text[:300]}")
            lat.append(receiver.wait(channel) - t0)
    return {"n": len(lat), "p50_ms": pct(lat, 50) * 1000, "p99_ms": pct(lat, 99) * 1000,
            "mean_ms": statistics.fmean(lat) * 1000}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--n", type=int, default=300, help="requests of each kind per side")
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--replies", type=int, default=100)
    args = ap.parse_args()
    args.n = max(args.batch, args.n - args.n % args.batch)

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import agentboard
    from agentboard.kernel import chat_links

    load_start = load_average()
    receiver = Receiver()
    env = {"AGENTBOARD_CHAT_SLACK_SIGNING_SECRET": SECRET, "AGENTBOARD_CHAT_SLACK_BOT_TOKEN": "xoxb-bench",
           "AGENTBOARD_CHAT_SLACK_API_BASE": receiver.url}
    with tempfile.TemporaryDirectory(prefix="ab-bench-chat-") as tmp:
        home = Path(tmp) / "home"
        ab = agentboard.connect(str(home))
        chat_links.link(ab.db, "slack", USER, role="member")
        task_id = ab.board().create("the task commented on")["id"]
        server = Server(home, env)
        try:
            comment = throughput(server, "comment", task_id, args.n, args.batch)
            create = throughput(server, "create", task_id, args.n, args.batch)
            replies = reply_latency(server, receiver, args.replies)
        finally:
            server.stop()
            ab.close()
            receiver.server.shutdown()
    load_end = load_average()
    result = {
        "benchmark": "chat", "database": "sqlite", "n": args.n,
        "comment": {k: round(v, 3) for k, v in comment.items()},
        "create": {k: round(v, 3) for k, v in create.items()},
        "reply_latency": {k: round(v, 2) for k, v in replies.items()},
        "target_ratio": 0.8,
        "meets_target": comment["ratio"] >= 0.8 and create["ratio"] >= 0.8,
        "load_average": {"start": load_start, "end": load_end},
    }
    err = sys.stderr
    print(f"{'measure':<46}{'value':>16}", file=err)
    for kind, r in (("comment", comment), ("create", create)):
        print(f"{kind + ': REST req/s':<46}{r['rest_per_s']:>16.0f}", file=err)
        print(f"{kind + ': signed slash commands/s':<46}{r['chat_per_s']:>16.0f}", file=err)
        print(f"{'  ratio (target >= 0.8)':<46}{r['ratio']:>16.2f}", file=err)
    print(f"{'command -> reply in thread p50 / p99 ms':<46}{replies['p50_ms']:>8.1f} / {replies['p99_ms']:.1f}",
          file=err)
    print(f"load average {load_start} -> {load_end}: numbers are only comparable on a quiet machine",
          file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
