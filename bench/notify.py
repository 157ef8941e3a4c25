"""Events per second the notifier delivers to a loopback web hook, against raw HTTP POSTs.

Setup (not timed): ``--n`` tasks completed on a board with one board-wide subscription (an
Apprise ``json://`` target on a receiver in this process). Then, interleaved in the same run:

- ``raw_posts_per_s``: ``--n`` POSTs of the same JSON body to the same receiver with
  ``requests.post`` (the HTTP library Apprise sends with), one after the other;
- ``per_event_events_per_s``: the notifier delivering the ``--n`` completions as one message
  each (digests off): lease, read the events, match, send through Apprise, move the cursor;
- ``digest_events_per_s``: as many new completions delivered to a new subscription with the
  default digest rule (one message for the burst).

Targets: per-event delivery at least 0.5 of the raw POST rate (the notifier's own work —
reading the log, matching, recording the cursor — costs at most as much as the HTTP itself).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from _shared import DEFAULT_PG, load_average, per_backend, report


class Receiver:
    def __init__(self) -> None:
        self.count = 0
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                with lock:
                    receiver.count += 1
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _deliver_all(db: Any, settings: Any, sub_id: int, want: int) -> float:
    from agentboard.kernel import notifications as kn
    from agentboard.notify.notifier import Notifier

    notifier = Notifier(db, settings)
    start = time.perf_counter()
    while kn.get(db, None, sub_id)["delivered"] < want:
        notifier.run_once()
    return time.perf_counter() - start


def measure(url: str | None, n: int) -> dict[str, Any]:
    import requests

    import agentboard
    from agentboard.notify import subscriptions

    receiver = Receiver()
    home = tempfile.mkdtemp(prefix="ab-bench-notify-")
    quick = {"notify_batch_delay": 0.0, "notify_digest_window": 0.0}
    try:
        ab = agentboard.connect(url or home, **quick, notify_digest_after=n + 1)
        board = ab.board()
        target = f"json://127.0.0.1:{receiver.port}/hook"
        per_event = subscriptions.add(ab.db, "default", "board", "", target)
        for i in range(n):
            t = board.create(f"task {i}", assignee="worker")
            board.complete(t["id"], summary=f"finished task {i}", actor="bench")
        body = json.dumps({"version": "1.0", "title": "[default] completed",
                           "message": "completed: t_00000000 task — finished", "type": "success"})
        start = time.perf_counter()
        for _ in range(n):
            requests.post(f"http://127.0.0.1:{receiver.port}/raw", data=body,
                          headers={"Content-Type": "application/json"}, timeout=10)
        raw = time.perf_counter() - start
        per_event_s = _deliver_all(ab.db, ab.settings, per_event["id"], n)
        sent_per_event = receiver.count - n
        # as many new events, to a new subscription, with the default digest rule
        from agentboard.kernel import notifications as kn

        kn.remove(ab.db, None, per_event["id"])
        digest_client = agentboard.connect(url or home, **quick)
        digest = subscriptions.add(digest_client.db, "default", "board", "", target + "2")
        for i in range(n):
            t = board.create(f"more {i}", assignee="worker")
            board.complete(t["id"], summary=f"finished more {i}", actor="bench")
        before = receiver.count
        digest_s = _deliver_all(digest_client.db, digest_client.settings, digest["id"], n)
        digest_messages = receiver.count - before
        digest_client.close()
        ab.close()
    finally:
        receiver.close()
    out = {
        "backend": "postgresql" if url else "sqlite",
        "n": n,
        "raw_posts_per_s": round(n / raw, 1),
        "per_event_events_per_s": round(n / per_event_s, 1),
        "per_event_messages": sent_per_event,
        "digest_events_per_s": round(n / digest_s, 1),
        "digest_messages": digest_messages,
    }
    out["ratios"] = {"per_event_vs_raw": round(out["per_event_events_per_s"] / out["raw_posts_per_s"], 3),
                     "digest_vs_raw": round(out["digest_events_per_s"] / out["raw_posts_per_s"], 3)}
    out["meets_target"] = out["ratios"]["per_event_vs_raw"] >= 0.5
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="events delivered per mode")
    parser.add_argument("--pg", default=DEFAULT_PG, help="PostgreSQL server URL")
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    args = parser.parse_args()
    load_start = load_average()
    results = per_backend(lambda url: measure(url, args.n), args.pg, args.no_pg)
    load = report(results, lambda r: (
        f"raw {r['raw_posts_per_s']}/s · per event {r['per_event_events_per_s']}/s "
        f"({r['ratios']['per_event_vs_raw']}×, {r['per_event_messages']} messages) · digest "
        f"{r['digest_events_per_s']}/s ({r['digest_messages']} message(s))"), load_start)
    print(json.dumps({"bench": "notify", "results": results, "load_average": load}))


if __name__ == "__main__":
    main()
