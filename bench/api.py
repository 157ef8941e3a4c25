"""API benchmark: board view throughput and event push latency, against a real server.

- ``agentboard serve --no-dispatch`` runs in its own process over a home whose board holds
  10,000 tasks (spread over the columns, with links and comments).
- Throughput: 8 concurrent clients (threads, one keep-alive connection each) request
  ``GET /api/board`` for a fixed time. Baseline in the same run: the same clients on
  ``GET /api/config``, a trivial authenticated route (auth + routing + JSON, no board query).
- Push latency: a WebSocket on the board; one change at a time, measured from the moment the
  commit returned to the moment the message arrived, for a change made by another process
  (this one, through the kernel: the server finds it by polling the event log) and for a change
  made through the API (the server's own commit listener; measured from the event's
  ``created_at``, stamped just before the commit).

    python bench/api.py [--tasks 10000] [--clients 8] [--seconds 8] [--events 150] [--pg URL]

Prints a table and one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def populate(ab: Any, n: int) -> None:
    from agentboard.kernel import comments, runs

    board = ab.board()
    profiles = [f"agent{i}" for i in range(6)]
    for p in profiles:
        ab.add_profile(p, command="true", description=f"profile {p}")
    ids: list[str] = []
    rng = random.Random(7)
    for i in range(n):
        parents = [ids[-1]] if ids and i % 10 == 3 else []
        t = board.create(f"task {i}: do the thing number {i}", assignee=profiles[i % len(profiles)],
                         priority=rng.randint(0, 5), tenant=("acme" if i % 3 == 0 else None),
                         parents=parents, triage=(i % 37 == 0), body="some **markdown** body " * 5)
        ids.append(t["id"])
    ready = [t["id"] for t in board.list(status="ready", limit=n)]
    for task_id in ready[: n // 5]:  # done
        run = runs.claim(ab.db, "default", task_id)
        runs.complete(ab.db, "default", task_id, summary="finished", run_id=run["run_id"])
    for task_id in ready[n // 5: n // 5 + 120]:  # running
        runs.claim(ab.db, "default", task_id)
    for task_id in ids[: n // 20]:
        comments.comment(ab.db, "default", task_id, "a note", author="bench", mentions=False)


class Server:
    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentboard", "serve", "--port", "0", "--no-dispatch"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **env, "AGENTBOARD_HOME": str(home)})
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


def hammer(url: str, token: str, path: str, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` threads requesting ``path`` back to back for ``seconds``."""
    counts = [0] * clients
    errors = [0] * clients
    lat: list[list[float]] = [[] for _ in range(clients)]
    stop = threading.Event()
    start_gate = threading.Barrier(clients + 1)

    def worker(i: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
            c.get(path)  # warm the connection
            start_gate.wait()
            while not stop.is_set():
                t0 = time.perf_counter()
                r = c.get(path)
                lat[i].append(time.perf_counter() - t0)
                if r.status_code == 200:
                    counts[i] += 1
                else:
                    errors[i] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    start_gate.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    all_lat = [x for per in lat for x in per]
    return {"path": path, "requests": sum(counts), "errors": sum(errors),
            "rps": sum(counts) / elapsed, "p50_ms": pct(all_lat, 50) * 1000, "p99_ms": pct(all_lat, 99) * 1000}


def push_latency(url: str, token: str, ab: Any, n: int) -> dict[str, Any]:
    from websockets.sync.client import connect

    ws_url = url.replace("http://", "ws://") + f"/api/events?board=default&token={token}"
    board = ab.board()
    rng = random.Random(3)
    other_process: list[float] = []
    through_api: list[float] = []
    target = board.create("latency probe", assignee="agent0")["id"]
    with connect(ws_url) as ws, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
        json.loads(ws.recv(timeout=10))

        def wait_for(kind: str, key: str) -> tuple[float, dict[str, Any]]:
            while True:
                msg = json.loads(ws.recv(timeout=10))
                now = time.time()
                for e in msg["events"]:
                    if e["kind"] == kind and key in json.dumps(e["payload"]):
                        return now, e

        for i in range(n):
            time.sleep(rng.uniform(0, 0.06))  # do not phase-lock with the server's poll
            key = f"other-{i}"
            board.comment(target, key, author="bench", mentions=False)
            committed = time.time()
            got, _ = wait_for("commented", key)
            other_process.append(got - committed)
        for i in range(n):
            time.sleep(rng.uniform(0, 0.06))
            key = f"api-{i}"
            c.post(f"/api/tasks/{target}/comments", json={"body": key, "mentions": False})
            got, event = wait_for("commented", key)
            through_api.append(got - float(event["created_at"]))

    def summary(values: list[float]) -> dict[str, float]:
        return {"n": len(values), "p50_ms": pct(values, 50) * 1000, "p99_ms": pct(values, 99) * 1000,
                "mean_ms": statistics.fmean(values) * 1000}

    return {"other_process": summary(other_process), "through_api": summary(through_api)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--events", type=int, default=150)
    ap.add_argument("--pg", default=None, help="PostgreSQL URL of a server to create a fresh database on")
    args = ap.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import agentboard

    env: dict[str, str] = {}
    pg_name = None
    with tempfile.TemporaryDirectory(prefix="ab-bench-api-") as tmp:
        home = Path(tmp) / "home"
        if args.pg:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from _shared import drop_pg, fresh_pg

            url, pg_name = fresh_pg(args.pg)
            env["AGENTBOARD_DATABASE_URL"] = url
            os.environ["AGENTBOARD_DATABASE_URL"] = url
        ab = agentboard.connect(str(home))
        t0 = time.perf_counter()
        populate(ab, args.tasks)
        setup_s = time.perf_counter() - t0
        server = Server(home, env)
        try:
            base = hammer(server.url, server.token, "/api/config", args.clients, args.seconds)
            view = hammer(server.url, server.token, "/api/board", args.clients, args.seconds)
            size = len(httpx.get(server.url + "/api/board", headers={"Authorization": f"Bearer {server.token}"}).content)
            push = push_latency(server.url, server.token, ab, args.events)
        finally:
            server.stop()
            ab.close()
            if pg_name and args.pg:
                drop_pg(args.pg, pg_name)

    result = {
        "benchmark": "api",
        "database": "postgresql" if args.pg else "sqlite",
        "tasks": args.tasks,
        "clients": args.clients,
        "setup_seconds": round(setup_s, 1),
        "board_view": {k: round(v, 2) if isinstance(v, float) else v for k, v in view.items()},
        "board_view_bytes": size,
        "baseline_config": {k: round(v, 2) if isinstance(v, float) else v for k, v in base.items()},
        "board_view_vs_baseline": round(view["rps"] / base["rps"], 3) if base["rps"] else None,
        "push_latency": {k: {kk: round(vv, 2) for kk, vv in v.items()} for k, v in push.items()},
        "target_push_ms": 100,
    }
    print(f"{'measure':<42}{'value':>14}")
    print(f"{'GET /api/config (baseline) req/s':<42}{base['rps']:>14.0f}")
    print(f"{'GET /api/board, ' + str(args.tasks) + ' tasks, req/s':<42}{view['rps']:>14.0f}")
    print(f"{'  ratio to baseline':<42}{result['board_view_vs_baseline']:>14}")
    print(f"{'  p50 / p99 request ms':<42}{view['p50_ms']:>7.1f} / {view['p99_ms']:.1f}")
    for k, v in push.items():
        print(f"{'push latency ' + k.replace('_', ' ') + ' p50 / p99 ms':<42}{v['p50_ms']:>7.1f} / {v['p99_ms']:.1f}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
