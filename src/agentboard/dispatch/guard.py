"""Workers die with their dispatcher: a guard process per dispatcher, and the host's worker file.

A long-running dispatcher starts one small **guard** process (this file run as a script by the
interpreter, ``-I``: the standard library only, a few MB) in its own session, its standard input
the read end of a pipe whose only writer is the dispatcher. The dispatcher tells it each worker's
process group as the worker starts (``+pgid``) and when it is gone (``-pgid``). When the
dispatcher process ends in any way — ``kill -9`` included — the kernel closes the pipe; the
guard reads end-of-file and ends every process group it still holds (SIGTERM, then SIGKILL after
a grace), then exits. A dispatcher stopping on purpose (``stop()``, SIGTERM, Ctrl-C) first says
``detach N``: its workers keep running for N seconds (half the claim TTL: less than is left of
any renewed claim) and a dispatcher starting on the host meanwhile takes them over (SIGUSR1 to
the guard, whose pid is in ``<home>/run/guard-<host>.pid``); past N the guard ends them, so they
never work on after their claims lapse and their tasks start on another host.

Why not ``PR_SET_PDEATHSIG``: it reaches only the worker itself, not the agent CLI's own
children in its process group; it fires when the *thread* that forked the worker exits (workers
start on a pool thread), and it is cleared across set-uid programs and credential changes (a
confined worker). A pipe is closed when the whole process ends, whatever thread started what.

The **worker file** (``<home>/run/workers-<host>.txt``) lists what this host's dispatcher
started: ``+ run_id pid start`` when a worker starts, ``- run_id`` once it is gone (one short
append each). A dispatcher starting on the host reads it (:func:`leftovers`): the workers of an
earlier dispatcher process that are still alive. Those whose run is still current are adopted
(watched by pid); the others — their task was reclaimed and may run elsewhere now — are stopped
(:meth:`.reaping.Reaper.stop_leftovers`). The file is rewritten with what is still alive.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

#: seconds between SIGTERM and SIGKILL when the guard ends its workers' process groups
GUARD_GRACE = 3.0


class Guard:
    """The dispatcher's side: starts the guard process and tells it about process groups."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        #: process group -> the worker's cgroup (or None)
        self._held: dict[int, Path | None] = {}

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, pid_file: Path | None = None) -> None:
        """Start the guard process (no-op when it runs). ``pid_file``: where its pid is kept,
        so the next dispatcher on the host can take its workers over (:func:`take_over`)."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return
            self._proc = subprocess.Popen(
                [sys.executable, "-I", __file__, str(GUARD_GRACE)], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
            for pgid, cgroup in self._held.items():
                self._send(_hold_line(pgid, cgroup))
            if pid_file is not None:
                try:
                    pid_file.parent.mkdir(parents=True, exist_ok=True)
                    pid_file.write_text(str(self._proc.pid))
                except OSError:
                    pass

    def _send(self, line: str) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return
        try:
            proc.stdin.write(line.encode())
            proc.stdin.flush()
        except (OSError, ValueError):
            pass

    def hold(self, pgid: int, cgroup: Path | None = None) -> None:
        """End process group ``pgid`` (and what is in the worker's ``cgroup``) if this
        dispatcher dies."""
        with self._lock:
            if pgid not in self._held:
                self._held[pgid] = cgroup
                self._send(_hold_line(pgid, cgroup))

    def release(self, pgid: int) -> None:
        """Process group ``pgid`` is gone (or no longer ours to end)."""
        with self._lock:
            if pgid in self._held:
                del self._held[pgid]
                self._send(f"-{pgid}\n")

    def detach(self, keep_for: float) -> None:
        """A dispatcher stopping on purpose: its workers keep running for ``keep_for`` seconds
        (less than what is left of their claims), for the next dispatcher on the host to take
        over; past that the guard ends them, before their claims lapse and their tasks start
        elsewhere."""
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is None:
                return
            try:
                if proc.stdin is not None:
                    proc.stdin.write(f"detach {max(0.0, keep_for):.3f}\n".encode())
                    proc.stdin.close()
            except (OSError, ValueError):
                pass
        threading.Thread(target=proc.wait, name="agentboard-guard-reap", daemon=True).start()


def _hold_line(pgid: int, cgroup: Path | None) -> str:
    """The guard's line for a worker: ``+pgid`` and, where it has one, its cgroup's folder (a
    path without spaces or line breaks: :mod:`.cgroups` names them)."""
    path = str(cgroup) if cgroup is not None and not any(c.isspace() for c in str(cgroup)) else ""
    return f"+{pgid} {path}\n" if path else f"+{pgid}\n"


def guard_pid_file(home: Path, host: str) -> Path:
    """Where the dispatcher of ``host`` keeps its guard's pid."""
    return worker_file(home, host).with_name(worker_file(home, host).name.replace("workers-", "guard-", 1)
                                             .replace(".txt", ".pid"))


def take_over(pid_file: Path) -> bool:
    """Tell the guard of an earlier dispatcher on this host (stopped on purpose, its workers
    kept for a while) that its workers are taken over: it exits without ending them. True when
    there was one."""
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
    if b"guard.py" not in cmdline:
        return False
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return False
    return True


# -- the worker file ------------------------------------------------------------------------------

def worker_file(home: Path, host: str) -> Path:
    """Where the dispatcher of ``host`` lists the workers it started."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", host)[:100] or "host"
    return home / "run" / f"workers-{safe}.txt"


class WorkerFile:
    """The host's worker file: one append per worker started and per worker gone."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _append(self, line: str) -> None:
        try:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, line.encode())
                finally:
                    os.close(fd)
        except OSError:
            pass

    def started(self, run_id: int, pid: int, at: float) -> None:
        self._append(f"+ {run_id} {pid} {at:.3f}\n")

    def gone(self, run_id: int) -> None:
        self._append(f"- {run_id}\n")

    def read(self) -> dict[int, tuple[int, float]]:
        """The workers listed as started and not gone: ``{run_id: (pid, started_at)}``."""
        out: dict[int, tuple[int, float]] = {}
        try:
            text = self.path.read_text()
        except OSError:
            return out
        for line in text.splitlines():
            parts = line.split()
            try:
                if parts[0] == "+" and len(parts) == 4:
                    out[int(parts[1])] = (int(parts[2]), float(parts[3]))
                elif parts[0] == "-" and len(parts) == 2:
                    out.pop(int(parts[1]), None)
            except (ValueError, IndexError):
                continue
        return out

    def rewrite(self, keep: dict[int, tuple[int, float]]) -> None:
        """Replace the file with ``keep`` (at start, once the leftovers are known)."""
        try:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_name(self.path.name + ".tmp")
                tmp.write_text("".join(f"+ {r} {p} {a:.3f}\n" for r, (p, a) in sorted(keep.items())))
                os.chmod(tmp, 0o600)
                tmp.replace(self.path)
        except OSError:
            pass


# -- the guard process ----------------------------------------------------------------------------

def _live(groups: set[int]) -> set[int]:
    """The process groups among ``groups`` with a live member in the session of the same id (a
    worker runs in its own session, so a pid reused by anything else never matches): one pass
    over ``/proc`` for all of them."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set(groups)
    found: set[int] = set()
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                raw = fh.read()
        except OSError:
            continue
        tail = raw[raw.rfind(")") + 2:].split()
        if len(tail) > 3 and tail[2] == tail[3] and tail[0] not in ("Z", "X", "x"):
            try:
                found.add(int(tail[2]))
            except ValueError:
                continue
    return found & groups


def _end_groups(groups: set[int], grace: float, cgroups: dict[int, str] | None = None) -> None:
    """End ``groups`` (SIGTERM, SIGKILL after ``grace``), then kill what is left in their
    workers' ``cgroups`` (process group -> cgroup folder): what left the group with them."""
    live = _live(groups)
    for g in live:
        try:
            os.killpg(g, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = _live(live)
    for g in live:
        try:
            os.killpg(g, signal.SIGKILL)
        except OSError:
            pass
    for folder in (cgroups or {}).values():
        _kill_cgroup(folder)


def _kill_cgroup(folder: str) -> None:
    """SIGKILL everything in cgroup ``folder`` and remove it (and the host's folder above it,
    when it was the last). ``agentboard/cgroups.py`` is loaded from its file: it needs the
    standard library only, and this process imports nothing of agentboard's package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "agentboard_guard_cgroups", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                 "cgroups.py"))
    if spec is None or spec.loader is None:
        return
    cgroups = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cgroups)
    cgroups.kill(Path(folder))
    for path in (folder, os.path.dirname(folder)):
        try:
            os.rmdir(path)
        except OSError:
            break


def main(argv: list[str]) -> int:
    """The guard: read ``+pgid`` / ``-pgid`` / ``detach`` lines until end-of-file; at
    end-of-file without ``detach``, end the groups still held."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    taken = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: taken.set())  # the next dispatcher took them over
    grace = float(argv[1]) if len(argv) > 1 else GUARD_GRACE
    groups: set[int] = set()
    cgroups: dict[int, str] = {}  # a held group's cgroup folder, kept while the group is held
    keep_for = 0.0
    for raw in sys.stdin.buffer:
        line = raw.strip().decode("utf-8", "replace")
        head, _, folder = line.partition(" ")
        if line.startswith("detach"):
            try:
                keep_for = float(line.split()[1])
            except (IndexError, ValueError):
                keep_for = 0.0
        elif head[:1] in ("+", "-") and head[1:].isdigit():
            pgid = int(head[1:])
            if pgid <= 1:
                continue
            if head[0] == "+":
                groups.add(pgid)
                if folder.startswith("/"):
                    cgroups[pgid] = folder
            else:
                groups.discard(pgid)
                cgroups.pop(pgid, None)
    deadline = time.monotonic() + keep_for
    held = set(groups)  # a group whose leader is gone may have left processes in its cgroup
    while keep_for and groups and not taken.is_set():  # kept for a takeover: until it, or their end
        groups = _live(groups)
        left = deadline - time.monotonic()
        if left <= 0:
            break
        taken.wait(min(1.0, left))
    if (groups or cgroups) and not taken.is_set():
        _end_groups(groups, grace, {g: f for g, f in cgroups.items() if g in held})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
