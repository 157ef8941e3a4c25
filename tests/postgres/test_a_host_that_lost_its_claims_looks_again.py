"""A host whose pass lost the claims of the tasks it chose to other hosts looks at the board
again soon. Other hosts' claims wake no dispatcher, because they give no one anything to do. A
host that claimed nothing in its pass wrote nothing that would wake it either. Without a second
look it would sleep until its interval while ready tasks wait, for example once the hosts that
won are full."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psycopg
from testenv import wait_for

import agentboard
from agentboard.kernel import dispatching


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _passes(port: int) -> float:
    """Passes the dispatcher serving /metrics on ``port`` has finished."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return 0.0
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("agentboard_dispatcher_pass_seconds_count"))


def test_a_host_whose_pass_lost_every_claim_takes_what_is_still_ready_without_waiting_for_its_interval(
        pg_url: str, tmp_path: Path) -> None:
    ab = agentboard.connect(pg_url)
    ab.add_profile("w", command="sleep 60")  # no completion wakes anyone while the test runs
    board = ab.board()
    ids = [board.create(f"t{i}", assignee="w", priority=10 - i)["id"] for i in range(4)]
    port = _free_port()
    home = tmp_path / "host-a"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    env.update(AGENTBOARD_HOME=str(home), AGENTBOARD_DATABASE_URL=pg_url, AGENTBOARD_HOST_ID="host-a",
               AGENTBOARD_DISPATCH_INTERVAL="600", AGENTBOARD_CLAIM_TTL="600")
    other = psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://", 1))
    # another host's claim of all four under way as host-a starts: its first passes take none
    other.execute("SELECT id FROM tasks WHERE id = ANY(%s) FOR UPDATE", (ids,))
    with open(home / "dispatcher.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "agentboard", "dispatcher", "--metrics-port", str(port)],
                                env=env, stdout=log, stderr=log, start_new_session=True)
    try:
        wait_for(lambda: _passes(port) >= 1, 60, "host-a's first pass")
        settled = [_passes(port)]

        def quiet() -> bool:  # no pass for a second: the ones its start asked for are over
            time.sleep(1.0)
            now = _passes(port)
            done, settled[0] = now == settled[0], now
            return done
        wait_for(quiet, 60, "host-a idle")
        assert [board.show(i)["status"] for i in ids] == ["ready"] * 4
        # the other host claims the first two and has no room for more: its claims wake no one
        other.rollback()
        assert len(dispatching.claim_batch(ab.db, "default", ids[:2], host="host-b", limit=2)) == 2
        wait_for(lambda: all(board.show(i)["status"] == "running" for i in ids[2:]), 60,
                 "host-a to claim the two still ready (its interval is ten minutes)")
        assert {board.show(i)["worker_host"] for i in ids[2:]} == {"host-a"}
    finally:
        other.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        for pid in ab.db.read(lambda tx: tx.all("SELECT worker_pid FROM task_runs WHERE worker_pid IS NOT NULL")):
            with contextlib.suppress(OSError):
                os.killpg(int(pid["worker_pid"]), signal.SIGKILL)
        ab.close()
