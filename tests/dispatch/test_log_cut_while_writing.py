"""A log cut while its worker goes on writing (:func:`agentboard.dispatch.spawn.cap_log`), on a
file system that takes a range out of a file's middle (ext4, XFS: the worker's appends wait for
the cut, so nothing it writes is lost) and on one that does not (tmpfs: the log is truncated and
its end written back; the part kept at its start ends with the cut's line wherever the worker's
appends took the log's end, so the next cut brings it back within the cap)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from agentboard.dispatch import spawn

CAP = 100_000
SHARE = CAP // spawn.LOG_KEEP_SHARE
BLOCK = 4096


def _takes_a_range_out(folder: Path) -> bool:
    probe = folder / ".probe"
    probe.write_bytes(b"y" * 64 * BLOCK)
    fd = os.open(probe, os.O_RDWR)
    try:
        fallocate = spawn._fallocate()
        return fallocate is not None and fallocate(fd, spawn._FALLOC_FL_COLLAPSE_RANGE, BLOCK, BLOCK) == 0
    finally:
        os.close(fd)
        probe.unlink()


@pytest.fixture(params=["range-taken-out", "truncated"])
def folder(request, tmp_path):
    """A folder on a file system of each kind: the test's own (ext4 here) and tmpfs."""
    if request.param == "range-taken-out":
        if not _takes_a_range_out(tmp_path):
            pytest.skip(f"{tmp_path}'s file system cannot take a range out of a file")
        yield tmp_path
        return
    if not Path("/dev/shm").is_dir():
        pytest.skip("no tmpfs at /dev/shm")
    made = Path(tempfile.mkdtemp(prefix="agentboard-logcut-", dir="/dev/shm"))
    try:
        assert not _takes_a_range_out(made), "tmpfs cannot take a range out of a file"
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def _worker_appends(path: Path, data: bytes) -> None:
    """What the worker does: write its output to the end of its log (it holds it open for appending)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _printed(path: Path, n: int, *, line: bytes = b"y" * 99 + b"\n") -> None:
    _worker_appends(path, line * (n // len(line)))


def _head_is_kept(run: spawn.LogCut, data: bytes) -> None:
    line = data[:run.log_head_end].splitlines()[-1]
    assert line.startswith(spawn.CUT_MARK), "the part kept at the start ends with the cut's line"
    assert SHARE < run.log_head_end <= SHARE + 200 + BLOCK


def test_a_worker_writing_between_the_look_at_its_log_and_the_cut_leaves_it_within_the_cap_at_the_next(
        folder, monkeypatch):
    """A megabyte lands between the cut's look at the log's size and what it does to the log."""
    log = folder / "t.log"
    _printed(log, 20 * CAP)
    run = spawn.LogCut(log)
    fstat = os.fstat
    looked: list[int] = []

    def the_worker_prints_after_the_look(fd: int) -> os.stat_result:
        st = fstat(fd)
        if not looked:
            looked.append(fd)
            _printed(log, 10 * CAP)
        return st

    monkeypatch.setattr(os, "fstat", the_worker_prints_after_the_look)
    assert spawn.cap_log(run, CAP) > 0
    monkeypatch.setattr(os, "fstat", fstat)
    _head_is_kept(run, log.read_bytes())

    _worker_appends(log, b"the-last-line\n")  # it ends; its exit is handled: the log is cut once more
    spawn.cap_log(run, CAP)
    data = log.read_bytes()
    assert len(data) <= CAP, f"the log is {len(data)} bytes, the cap {CAP}"
    assert data.count(spawn.CUT_MARK) == 1
    assert data.endswith(b"the-last-line\n")


WRITER = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
for i in range(int(sys.argv[2])):
    os.write(fd, b"line %09d\\n" % i)
"""


def test_nothing_a_worker_writes_while_its_log_is_cut_again_and_again_is_lost(tmp_path):
    """A worker printing numbered lines as fast as it can while its log is cut as often as it
    can be: the log's end is every line it printed after the last line its start keeps, in
    order, up to its last (where the file system can take a range out of a file)."""
    if not _takes_a_range_out(tmp_path):
        pytest.skip(f"{tmp_path}'s file system cannot take a range out of a file")
    log = tmp_path / "t.log"
    log.touch()
    lines = 400_000
    worker = subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(lines)])
    run = spawn.LogCut(log)
    cuts = 0
    while worker.poll() is None:
        cuts += bool(spawn.cap_log(run, CAP))
    spawn.cap_log(run, CAP)
    assert worker.returncode == 0 and cuts >= 5, f"{cuts} cuts while it printed"
    data = log.read_bytes()
    assert len(data) <= CAP and data.count(spawn.CUT_MARK) == 1
    tail = data[run.log_head_end:].split(b"\n")[1:-1]  # (its first line may be cut in two)
    numbers = [int(t.split()[1]) for t in tail]
    assert numbers[-1] == lines - 1, "its last line is the log's last"
    gaps = [(a, b) for a, b in zip(numbers[:-1], numbers[1:], strict=True) if b != a + 1]
    assert not gaps, f"lines lost while the log was cut: {gaps[:5]}"


@pytest.mark.parametrize("attempt", range(8))
def test_two_cuts_of_the_same_log_at_once_leave_one_line_and_the_end(folder, attempt):
    """A pass's look and the handling of the worker's exit cut the same run's log together (eight
    tries: the threads' order is the machine's)."""
    log = folder / "t.log"
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
    mark = len(data[:run.log_head_end].splitlines(keepends=True)[-1]) + 1  # (it starts a line)
    assert run.log_dropped == printed - (len(data) - mark), "what was dropped is counted once"


@pytest.mark.parametrize("cuts", [1, 3])
def test_a_log_cut_again_keeps_its_start_its_line_and_its_end(folder, cuts):
    log = folder / "t.log"
    header = b"=== run 7 of t_1 by a (command) ===\n"
    log.write_bytes(header)
    run = spawn.LogCut(log, log_offset=len(header))
    for i in range(cuts):
        _printed(log, 5 * CAP, line=f"{i:>98}\n".encode())
        spawn.cap_log(run, CAP)
    data = log.read_bytes()
    head, _, rest = data[len(header):].partition(b"\n[agentboard: ")
    assert SHARE <= len(head) <= SHARE + BLOCK and set(head.splitlines()[0].strip()) == {ord("0")}
    assert rest.endswith(f"{cuts - 1:>98}\n".encode())
    assert len(data) <= CAP
    found = spawn.run_log(log, 7, "t_1", CAP)  # a dispatcher that takes the run over finds where its start ends
    assert found.log_head_end == run.log_head_end
