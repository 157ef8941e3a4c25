"""A log cut while its worker goes on writing (:func:`agentboard.dispatch.spawn.cap_log`): the
part kept at its start ends with the cut's line wherever the worker's appends took the log's end,
so the next cut (the one when its exit is handled) brings it back within the cap."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from agentboard.dispatch import spawn

CAP = 100_000


def _worker_appends(path: Path, data: bytes) -> None:
    """What the worker does: write its output to the end of its log (it holds it open for appending)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _printed(path: Path, n: int, *, line: bytes = b"y" * 99 + b"\n") -> None:
    _worker_appends(path, line * (n // len(line)))


def test_a_worker_writing_while_its_log_is_cut_leaves_it_within_the_cap_at_the_next_cut(tmp_path, monkeypatch):
    log = tmp_path / "t.log"
    _printed(log, 20 * CAP)
    run = spawn.LogCut(log)
    truncate = os.ftruncate

    def cut_while_the_worker_prints(fd: int, length: int) -> None:
        truncate(fd, length)
        _printed(log, 10 * CAP)  # a megabyte lands between the cut and the writing of what it keeps

    monkeypatch.setattr(os, "ftruncate", cut_while_the_worker_prints)
    assert spawn.cap_log(run, CAP) > 0
    monkeypatch.setattr(os, "ftruncate", truncate)

    data = log.read_bytes()
    line = data[:run.log_head_end].splitlines()[-1]
    assert line.startswith(spawn.CUT_MARK), "the part kept at the start ends with the cut's line"
    assert run.log_head_end <= CAP // spawn.LOG_KEEP_SHARE + 200

    _worker_appends(log, b"the-last-line\n")  # it ends; its exit is handled: the log is cut once more
    spawn.cap_log(run, CAP)
    data = log.read_bytes()
    assert len(data) <= CAP, f"the log is {len(data)} bytes, the cap {CAP}"
    assert data.count(spawn.CUT_MARK) == 1
    assert data.endswith(b"the-last-line\n")


@pytest.mark.parametrize("attempt", range(8))
def test_two_cuts_of_the_same_log_at_once_leave_one_line_and_the_end(tmp_path, attempt):
    """A pass's look and the handling of the worker's exit cut the same run's log together (eight
    tries: the threads' order is the machine's)."""
    log = tmp_path / "t.log"
    _printed(log, 30 * CAP)
    _worker_appends(log, b"the-last-line\n")
    run = spawn.LogCut(log)
    start = threading.Barrier(4)

    def look() -> None:
        start.wait()
        spawn.cap_log(run, CAP)

    threads = [threading.Thread(target=look) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    data = log.read_bytes()
    assert len(data) <= CAP
    assert data.count(spawn.CUT_MARK) == 1
    assert data.endswith(b"the-last-line\n")
    printed = 30 * CAP // 100 * 100 + len(b"the-last-line\n")
    mark_line = run.log_head_end - CAP // spawn.LOG_KEEP_SHARE
    assert run.log_dropped == printed - (len(data) - mark_line), "what was dropped is counted once"


@pytest.mark.parametrize("cuts", [1, 3])
def test_a_log_cut_again_keeps_its_start_its_line_and_its_end(tmp_path, cuts):
    log = tmp_path / "t.log"
    run = spawn.LogCut(log)
    for i in range(cuts):
        _printed(log, 5 * CAP, line=f"{i:>98}\n".encode())
        spawn.cap_log(run, CAP)
    data = log.read_bytes()
    head, _, rest = data.partition(b"\n[agentboard: ")
    assert len(head) == CAP // spawn.LOG_KEEP_SHARE and set(head.splitlines()[0].strip()) == {ord("0")}
    assert rest.endswith(f"{cuts - 1:>98}\n".encode())
    assert len(data) <= CAP
