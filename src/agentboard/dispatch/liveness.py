"""Is a worker alive? Stopping a worker's whole process group, and ending what an exited
worker left running in it.

A worker started by this process is a child: its exit status comes from ``Popen.poll``. A
worker started by an earlier dispatcher process is checked by pid: ``os.kill(pid, 0)`` plus
``/proc/<pid>/stat`` (a zombie counts as gone, and a pid whose process started after the run
began belongs to someone else: pids are reused).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_boot_time: float | None = None


def _btime() -> float | None:
    global _boot_time
    if _boot_time is None:
        try:
            for line in Path("/proc/stat").read_text().splitlines():
                if line.startswith("btime "):
                    _boot_time = float(line.split()[1])
                    break
        except OSError:
            return None
    return _boot_time


def _stat(pid: int) -> tuple[str, float | None] | None:
    """(state letter, start time as epoch seconds) from /proc, or None when unavailable."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return ("X", None)
    except OSError:
        return None
    tail = raw[raw.rfind(")") + 2:].split()
    state = tail[0] if tail else "?"
    start = None
    bt = _btime()
    if bt is not None and len(tail) > 19:
        try:
            start = bt + int(tail[19]) / _CLK_TCK
        except ValueError:
            start = None
    return state, start


def pid_alive(pid: int | None, *, started_after: float | None = None) -> bool:
    """True when ``pid`` is a live (non-zombie) process that could be the worker.

    ``started_after``: when the run was claimed; a process that started clearly later is a
    different process that reused the pid.
    """
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    st = _stat(pid)
    if st is None:
        return True
    state, start = st
    if state in ("Z", "X", "x"):
        return False
    if started_after is not None and start is not None and start > started_after + 5.0:
        return False
    return True


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the worker's process group (its own session), falling back to the pid."""
    try:
        os.killpg(pid, sig)
        return
    except ProcessLookupError:
        pass
    except PermissionError:
        pass
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_worker(pid: int, *, grace: float = 5.0, proc: subprocess.Popen[bytes] | None = None,
                started_after: float | None = None) -> bool:
    """SIGTERM the worker's process group, wait up to ``grace``, then SIGKILL it.

    Returns True when the worker (and its group) is gone, False when it survived SIGKILL
    (e.g. stuck in uninterruptible I/O): the caller must not start a duplicate then.

    A worker that is this process's child (``proc``) and has been reaped may have had its pid
    handed to a new process since, which leads a group of its own (another run's worker, say).
    The kernel hands out no pid that still names a live process group, so the worker's group is
    empty then: nothing is signalled.
    """
    def gone() -> bool:
        if proc is not None:
            if proc.poll() is None:
                return False
            if pid_alive(pid):
                return True  # the pid is another process's now: the worker's group has no one left
        elif pid_alive(pid, started_after=started_after):
            return False
        return not group_has_live(pid)

    return _terminate(lambda sig: signal_group(pid, sig), gone, grace)


def end_group(pgid: int | None, *, grace: float = 2.0) -> bool:
    """End what is left of an exited worker's process group (its background children): SIGTERM,
    then SIGKILL after ``grace`` seconds. Returns True when nothing of the group is left.

    The worker ran in its own session, so its pid is the group's and the session's id; only a
    group in that session is signalled (a pid reused by an unrelated group leader is not). The
    worker has exited, so a live process holding its pid is another one that took the pid over
    (another run's worker, also a session's leader): the kernel hands out no pid that still names
    a live group, so the worker's group is empty then and nothing is signalled."""
    if not pgid or pgid <= 0:
        return True
    if pid_alive(pgid):
        return True
    group = pgid
    return _terminate(lambda sig: _killpg(group, sig), lambda: not group_has_live(group, own_session=True), grace)


def _terminate(send: Callable[[int], None], gone: Callable[[], bool], grace: float) -> bool:
    """SIGTERM through ``send``, wait up to ``grace`` for ``gone()``, then SIGKILL and wait up to
    2 s more. True when ``gone()`` holds at the end (at once when it already holds)."""
    if gone():
        return True
    send(signal.SIGTERM)
    deadline = time.monotonic() + grace
    delay = 0.005
    while time.monotonic() < deadline:
        if gone():
            return True
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    send(signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        if gone():
            return True
        time.sleep(0.02)
    return gone()


def _killpg(pgid: int, sig: int) -> None:
    """Signal the group only (its leader is gone: its pid alone may belong to someone else)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_has_live(pgid: int, *, own_session: bool = False) -> bool:
    """True when some non-zombie process is still in process group ``pgid`` (with
    ``own_session``: and in session ``pgid``, as a worker started in its own session is)."""
    if not group_alive(pgid):
        return False
    proc = Path("/proc")
    if not proc.exists():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        tail = raw[raw.rfind(")") + 2:].split()
        if len(tail) > 3 and tail[2] == str(pgid) and tail[0] not in ("Z", "X", "x") and (
                not own_session or tail[3] == str(pgid)):
            return True
    return False


def stop_if_local(worker: dict[str, Any] | None, host_id: str) -> bool | None:
    """Stop a worker described as ``{"pid": ..., "host": ...}`` when it runs on this host
    (``host_id``); None when there is nothing to stop here, else whether it is gone."""
    if not worker or not worker.get("pid") or worker.get("host") != host_id:
        return None
    return stop_worker(int(worker["pid"]), grace=2.0)
