"""The notifier inside real ``serve`` and ``dispatcher`` processes: at least once across a crash,
and exactly one delivery per event with two hosts on one PostgreSQL database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from testenv import copy_template
from testenv import wait_for as wait_until

import agentboard
from agentboard.kernel import notifications as kn
from agentboard.notify import subscriptions

from .conftest import Receiver

pytestmark = pytest.mark.xdist_group("notify-processes")


@pytest.fixture
def home(home: Path, sqlite_template: Path) -> Path:
    """A fresh home that starts from a copy of the suite's migrated database, as a home that
    has run a first command (each process here would otherwise migrate a new one)."""
    return copy_template(sqlite_template, home)


FAST = {
    "AGENTBOARD_NOTIFY_BATCH_DELAY": "0", "AGENTBOARD_NOTIFY_DIGEST_WINDOW": "0",
    "AGENTBOARD_NOTIFY_POLL_INTERVAL": "0.2", "AGENTBOARD_NOTIFY_RETRY_BASE": "0.2",
    "AGENTBOARD_NOTIFY_LEASE": "3",
}


def start(verb: str, home: Path, log: Path, **env: str) -> subprocess.Popen[str]:
    args = ["serve", "--port", "0", "--no-dispatch"] if verb == "serve" else ["dispatcher", "--interval", "60"]
    home.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "agentboard", *args], stdout=out, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "AGENTBOARD_HOME": str(home), **FAST, **env})


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_an_event_in_flight_when_the_notifier_dies_is_delivered_again_after_a_restart(
        home: Path, tmp_path: Path, receiver: Receiver) -> None:
    with agentboard.connect(str(home)) as ab:
        board = ab.board()
        sub = subscriptions.add(ab.db, "default", "board", "", receiver.url())
        start_cursor = kn.get(ab.db, None, sub["id"])["cursor"]
        first = start("serve", home, tmp_path / "serve1.log")
        try:
            receiver.hold.set()  # the receiver records the message and keeps the sender waiting
            task = board.create("Delivered twice", assignee="worker")
            board.complete(task["id"], summary="done", actor="alice")
            receiver.wait(lambda: len(receiver.received) == 1)
            first.kill()  # mid-delivery: the answer never reaches the notifier
            first.wait()
        finally:
            stop(first)
            receiver.hold.clear()
        row = kn.get(ab.db, None, sub["id"])
        assert row["cursor"] == start_cursor and row["delivered"] == 0, "no success, no cursor move"
        second = start("dispatcher", home, tmp_path / "dispatcher.log")
        try:
            receiver.wait(lambda: len(receiver.received) >= 2)
            wait_until(lambda: kn.get(ab.db, None, sub["id"])["delivered"] == 1, what="the cursor to move")
        finally:
            stop(second)
        mentions = [r for r in receiver.received if task["id"] in r.message]
        assert len(mentions) == 2, "at least once: the event whose answer was lost is sent again"
        assert kn.get(ab.db, None, sub["id"])["cursor"] > start_cursor


@pytest.mark.postgres
def test_two_hosts_on_postgresql_deliver_each_event_exactly_once(
        pg_database: str, tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBOARD_DATABASE_URL", pg_database)
    paths = [f"sub{i}" for i in range(6)]
    with agentboard.connect(pg_database) as ab:
        board = ab.board()
        for path in paths:
            subscriptions.add(ab.db, "default", "board", "", receiver.url(path))
        env: dict[str, Any] = {"AGENTBOARD_DATABASE_URL": pg_database, "AGENTBOARD_NOTIFY_DIGEST_AFTER": "1000",
                               "AGENTBOARD_NOTIFY_LEASE": "10"}  # renewed every 5 s while delivering
        hosts = [start("serve", tmp_path / "host-a", tmp_path / "a.log", AGENTBOARD_HOST_ID="host-a", **env),
                 start("dispatcher", tmp_path / "host-b", tmp_path / "b.log", AGENTBOARD_HOST_ID="host-b", **env)]
        try:
            ids = []
            for i in range(30):
                t = board.create(f"task {i}", assignee="worker")
                board.complete(t["id"], summary="ok", actor="alice")
                ids.append(t["id"])

            def everywhere() -> bool:
                return all(all(any(i in r.message for r in receiver.accepted(p)) for i in ids) for p in paths)

            receiver.wait(everywhere, timeout=120)
        finally:
            for proc in hosts:
                stop(proc)
        for path in paths:
            seen = Counter(i for r in receiver.accepted(path) for i in ids if i in r.message)
            assert seen == Counter({i: 1 for i in ids}), (path, seen)
        assert all(s["delivered"] == 30 for s in kn.list_subscriptions(ab.db, "default"))
