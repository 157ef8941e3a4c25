"""`agentboard watch` and `agentboard tail` are feeds (`watch --json | jq …`): a database that
cannot be reached for a while (a restart, a failover; here the PgBouncer in front of it stopped
and started again) does not end them. Each says once on stderr that it is reconnecting and from
which event, tries again after 1, 2, 4, then 8 s, says when it is back, and goes on from its
cursor: every event of the outage is printed, none twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from testenv import wait_for

import agentboard
from agentboard.kernel import queries

from .bouncer import Bouncer


class Feed:
    """An ``agentboard`` feed in its own process; its stdout and stderr lines collected."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "agentboard", *args], env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=lambda s=stream, i=into: i.extend(iter(s.readline, "")), daemon=True).start()

    def ids(self) -> list[int]:
        return [json.loads(line)["id"] for line in list(self.out)]

    def said(self, text: str) -> list[str]:
        return [line for line in list(self.err) if text in line]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # Ctrl-C: the feed's way out
        return self.proc.wait(60)


def test_watch_and_tail_ride_out_a_database_outage_and_print_every_event_once(pg_url: str, tmp_path: Path) -> None:
    ab = agentboard.connect(pg_url)
    board = ab.board()
    tid = board.create("followed")["id"]
    start = queries.last_event_id(ab.db)
    bouncer = Bouncer(pg_url, 2)
    feeds: list[Feed] = []
    try:
        bouncer.start()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
        env.update(AGENTBOARD_HOME=str(tmp_path), AGENTBOARD_DATABASE_URL=bouncer.url,
                   AGENTBOARD_PG_TRANSACTION_POOLER="true", AGENTBOARD_PG_CONNECT_TIMEOUT="2")
        watch = Feed(env, "watch", "--json", "--since", str(start))
        tail = Feed(env, "tail", tid, "--json", "--since", str(start))
        feeds = [watch, tail]

        def shown(text: str) -> bool:
            want = [e["id"] for e in queries.events_after(ab.db, "default", start) if text in json.dumps(e)]
            return bool(want) and all(want[-1] in f.ids() for f in feeds)

        board.comment(tid, "before the outage")
        wait_for(lambda: shown("before the outage"), 60, "both feeds printing the first comment")
        bouncer.stop()
        wait_for(lambda: all(f.said("reconnecting") for f in feeds), 60, "both feeds saying they reconnect")
        board.comment(tid, "during the outage")
        board.create("made during the outage")
        bouncer.start()
        board.comment(tid, "after the outage")
        wait_for(lambda: shown("after the outage"), 120, "both feeds printing the last comment")
        assert [f.proc.poll() for f in feeds] == [None, None]  # neither feed ended
    finally:
        codes = [f.stop() for f in feeds]
        bouncer.close()
    everything: list[dict[str, Any]] = queries.events_after(ab.db, "default", start)
    ab.close()
    assert watch.ids() == [e["id"] for e in everything]  # none missed, none twice, in the log's order
    assert tail.ids() == [e["id"] for e in everything if e.get("task_id") == tid]
    for feed, what in ((watch, "watch"), (tail, "tail")):
        reconnecting, back = feed.said("reconnecting"), feed.said("reconnected")
        assert len(reconnecting) == 1 and len(back) == 1, feed.err
        assert reconnecting[0].startswith(f"{what}: the database cannot be reached")
        assert "go on after event" in reconnecting[0] and "going on after event" in back[0]
    assert codes == [0, 0]
