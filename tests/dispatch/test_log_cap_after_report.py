"""``log_max_bytes`` bounds the log of a worker that goes on printing after it reported: its run is
closed, it is given a grace to exit, and meanwhile its log is cut back like a running task's; once
it is stopped its log is cut within the cap."""

from __future__ import annotations

import shlex

from agentboard.dispatch import reaping
from agentboard.dispatch.liveness import pid_alive

from .conftest import all_in, events, wait_for
from .test_log_cap_at_exit import _log

CAP = 100_000
GOES_ON = "sh -c " + shlex.quote(
    "agentboard complete --summary 'done, but I keep going'; "
    "while true; do head -c 500000 /dev/zero | tr '\\0' x; echo; echo the-last-line; sleep 0.1; done")


def test_a_worker_that_keeps_printing_after_it_reported_keeps_its_log_within_the_cap(
        ab, board, dispatcher, monkeypatch):
    monkeypatch.setattr(reaping, "REPORTED_GRACE", 4)  # (30 s in use)
    ab.add_profile("goes_on", command=GOES_ON)
    t = board.create("report then loop", assignee="goes_on")
    d = dispatcher(log_max_bytes=CAP)
    wait_for(lambda: all_in(board, [t["id"]], {"done"}), what="the report")
    pid = int(board.runs(t["id"])[0]["worker_pid"])
    capped = wait_for(lambda: events(board, t["id"], "log_capped"), timeout=10, what="its log cut while it prints")
    assert pid_alive(pid), "the log was cut only once the worker was gone"
    assert capped[0]["payload"]["max_bytes"] == CAP
    wait_for(lambda: not pid_alive(pid), timeout=30, what="the worker stopped after its grace")
    assert d.wait_idle(30)  # its stop handled: its log cut once more
    text = _log(ab, t["id"]).read_text()
    assert len(text) <= CAP, f"the log is {len(text)} bytes, the cap {CAP}"
    head, mark, tail = text.partition(f"this run's output passed log_max_bytes ({CAP} bytes); the middle of it "
                                      "is dropped]\n")
    assert mark and tail and set(tail) <= set("x\nthe-last-line"), tail[-200:]  # what it printed last
    assert len(events(board, t["id"], "log_capped")) == 1
