"""``kill -9`` of a real ``agentboard dispatcher`` process while the supervisor works on a wake:
no wake is lost and none is handled twice."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import events, spawns, supervise, supervision_tasks, wait_for, wakes


@pytest.fixture
def dispatchers(tmp_path: Path) -> Iterator[Any]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str) -> subprocess.Popen[bytes]:
        out = open(tmp_path / f"{name}.log", "wb")
        p = subprocess.Popen(["agentboard", "dispatcher", "--interval", "1"], stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_kill_9_of_the_dispatcher_mid_wake_loses_no_wake_and_doubles_none(
        ab: Any, board: Any, dispatchers: Any, tmp_path: Path) -> None:
    hold, log = tmp_path / "hold", tmp_path / "sup.log"
    supervise(ab, board, {"log": str(log), "hold": str(hold), "priority": 3})
    t = board.create("choose a licence")["id"]
    board.block(t, "MIT or Apache-2.0?", actor="alice")

    first = dispatchers("first")
    wait_for(lambda: spawns(log), what="the supervisor started on the wake")
    os.kill(first.pid, signal.SIGKILL)
    first.wait(30)
    assert [w["status"] for w in wakes(ab, board)] == ["running"]  # taken, not lost

    dispatchers("second")
    hold.write_text("go")
    wait_for(lambda: wakes(ab, board, "handled"), timeout=120, what="the wake handled after the restart")
    (w,) = wakes(ab, board)
    assert w["status"] == "handled"
    assert len(supervision_tasks(ab, board)) == 1
    assert len(events(board, kind="wake_handled")) == 1
    assert [c["author"] for c in board.show(t)["comments"]] == ["supervisor:sup"]
    assert board.show(t)["priority"] == 3
    # every start of the supervisor read the same one wake
    assert {tuple(map(tuple, s["wakes"])) for s in spawns(log)} == {((str(w["id"]), "blocked", t),)}
