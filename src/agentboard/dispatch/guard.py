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

**Whose guard and workers they are.** Each dispatcher on the host and home has a line in
``<home>/run/dispatchers-<host>.txt`` (:class:`Dispatchers`): its guard's pid and its owner key
(its pid, its start time from ``/proc/<pid>/stat``, which a process reusing the pid does not
share, and a token of the dispatcher object); one that stopped on purpose keeps only its guard's
pid (its workers are for the taking). A dispatcher starting takes over (SIGUSR1) only the guards
whose owner is gone or stopped, and adopts only the workers such an owner listed: another
dispatcher still running on the same host and home keeps its guard and its workers
(:func:`take_over`). Starts and stops hold a lock file, so dispatchers started at the same
moment see each other. The guard is started with SIGUSR1 blocked (the mask is inherited) and
unblocks it once its handler is in place: a signal sent early waits for the handler, it never
ends the guard.

Why not ``PR_SET_PDEATHSIG``: it reaches only the worker itself, not the agent CLI's own
children in its process group; it fires when the *thread* that forked the worker exits (workers
start on a pool thread), and it is cleared across set-uid programs and credential changes (a
confined worker). A pipe is closed when the whole process ends, whatever thread started what.

The **worker file** (``<home>/run/workers-<host>.txt``) lists what this host's dispatchers
started: ``+ run_id pid start owner`` when a worker starts, ``- run_id`` once it is gone (one
short append each). A dispatcher starting on the host reads it
(:meth:`.reaping.Reaper.take_over_leftovers`): the live workers of dispatchers that are gone or
stopped (or of an older version, whose lines name no owner). Those whose run is still current
are adopted (watched by pid); the others — their task was reclaimed and may run elsewhere now —
are stopped. The file is rewritten with what is still alive, or only appended to while another
dispatcher on the host writes it too.

**What the guard ended** (``<home>/run/guard-<host>.ended``, :func:`ended_file`): before it
ends them, a guard appends a line per worker still running — its process group's leader alive —
``pgid time cause`` (``died``: its dispatcher died; ``detached``: its dispatcher stopped on
purpose and no dispatcher took the worker over in time). A dispatcher judging that worker's exit
later (:func:`ended_by_guard`) returns its task to the queue as its dispatcher's loss, not as a
failure of the task; a worker that exited by itself before is not listed, and its exit counts.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
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
        so the next dispatcher on the host can take its workers over (:func:`take_over`); the
        workers it ends are recorded beside it (:func:`ended_file`)."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return
            record = [str(ended_file(pid_file))] if pid_file is not None else []
            # SIGUSR1 (a takeover) stays blocked in the guard until its handler is in place: the
            # child inherits this thread's signal mask, and the guard unblocks it once ready
            old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-I", __file__, str(GUARD_GRACE), *record], stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
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


_SPACE = re.compile(r"\s")


def _hold_line(pgid: int, cgroup: Path | None) -> str:
    """The guard's line for a worker: ``+pgid`` and, where it has one, its cgroup's folder (a
    path without spaces or line breaks: :mod:`.cgroups` names them)."""
    path = str(cgroup) if cgroup is not None else ""
    path = "" if _SPACE.search(path) else path
    return f"+{pgid} {path}\n" if path else f"+{pgid}\n"


def guard_pid_file(home: Path, host: str) -> Path:
    """Where the dispatcher of ``host`` keeps its guard's pid."""
    return worker_file(home, host).with_name(worker_file(home, host).name.replace("workers-", "guard-", 1)
                                             .replace(".txt", ".pid"))


def ended_file(pid_file: Path) -> Path:
    """Where the guard whose pid is kept in ``pid_file`` records the workers it ended."""
    return pid_file.with_suffix(".ended")


#: the lines :func:`prune_ended` keeps of a file of ended workers grown past twice as many
ENDED_KEEP = 1000


def ended_by_guard(path: Path, pid: int, since: float) -> tuple[float, str] | None:
    """When and why (``died`` / ``detached``) a guard ended worker ``pid`` at ``since`` or
    later (the start of its run: a pid recorded before belonged to another process), from the
    file of ended workers ``path``; None when no guard did (it exited by itself, or was ended by
    someone else)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    found: tuple[float, str] | None = None
    for line in text.splitlines():
        parts = line.split()
        try:
            if len(parts) >= 3 and int(parts[0]) == pid and float(parts[1]) >= since - 1.0:
                found = (float(parts[1]), parts[2])
        except ValueError:
            continue
    return found


def prune_ended(path: Path) -> None:
    """Keep the last :data:`ENDED_KEEP` lines of the file of ended workers once it holds twice
    as many (a dispatcher starting on the host; the older lines are of runs long judged)."""
    try:
        lines = path.read_text().splitlines(keepends=True)
        if len(lines) > 2 * ENDED_KEEP:
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text("".join(lines[-ENDED_KEEP:]))
            tmp.replace(path)
    except OSError:
        pass


def _signal_guard(pid: int) -> bool:
    """SIGUSR1 to the guard process ``pid`` (a pid reused by another program is left alone)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    if b"guard.py" not in cmdline:
        return False
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return False
    return True


# -- whose guard and workers they are -------------------------------------------------------------

def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, ``/proc/<pid>/stat``), or None when
    it is gone or a zombie: with the pid, it names one process for as long as the host runs."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            raw = fh.read()
    except OSError:
        return None
    tail = raw[raw.rfind(")") + 2:].split()
    if not tail or tail[0] in ("Z", "X", "x"):
        return None
    try:
        return int(tail[19])
    except (IndexError, ValueError):
        return None


def owner_key() -> str:
    """A new dispatcher's owner key, ``pid:start:token`` (the token tells two dispatcher objects
    of one process apart)."""
    pid = os.getpid()
    return f"{pid}:{process_start(pid) or 0}:{secrets.token_hex(4)}"


def owner_alive(key: str) -> bool:
    """Whether the process of owner ``key`` still runs (the same process: the same start time)."""
    try:
        pid, start, _ = key.split(":", 2)
        return process_start(int(pid)) == int(start)
    except ValueError:
        return False


def dispatchers_file(home: Path, host: str) -> Path:
    """Where the dispatchers of ``host`` on ``home`` are listed with their guards."""
    path = worker_file(home, host)
    return path.with_name(path.name.replace("workers-", "dispatchers-", 1))


class Dispatchers:
    """The host's dispatchers on one home: a line each, ``guard_pid owner`` (``guard_pid``
    alone: a dispatcher that stopped on purpose, its detached guard keeping its workers for a
    while, or an older version's guard found in :func:`guard_pid_file`)."""

    def __init__(self, home: Path, host: str) -> None:
        self.path = dispatchers_file(home, host)
        #: the single pid of the last guard started, still written (and read: an older version's)
        self.pid_file = guard_pid_file(home, host)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the host's dispatcher lock (a start, a stop): one at a time reads and writes."""
        import fcntl

        fd = -1
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        try:
            yield
        finally:
            if fd >= 0:
                os.close(fd)  # (releases the lock)

    def read(self) -> list[tuple[int, str | None]]:
        out: list[tuple[int, str | None]] = []
        try:
            text = self.path.read_text()
        except OSError:
            text = ""
        for line in text.splitlines():
            parts = line.split()
            if parts and parts[0].isdigit():
                out.append((int(parts[0]), parts[1] if len(parts) > 1 else None))
        try:  # an older version's guard is recorded only there
            legacy = int(self.pid_file.read_text().split()[0])
            if all(g != legacy for g, _ in out):
                out.append((legacy, None))
        except (OSError, ValueError, IndexError):
            pass
        return out

    def write(self, entries: list[tuple[int, str | None]]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text("".join(f"{g} {o}\n" if o else f"{g}\n" for g, o in entries))
            os.chmod(tmp, 0o600)
            tmp.replace(self.path)
        except OSError:
            pass

    def register(self, guard_pid: int, owner: str) -> None:
        """A dispatcher started with its guard (under :meth:`locked`)."""
        self.write([e for e in self.read() if e[0] != guard_pid and e[1] != owner] + [(guard_pid, owner)])

    def release(self, owner: str) -> None:
        """The dispatcher ``owner`` stopped on purpose: its detached guard and its workers are
        for the next dispatcher on the host to take over."""
        with self.locked():
            self.write([(g, None if o == owner else o) for g, o in self.read()])


def take_over(reg: Dispatchers, me: str) -> set[str]:
    """Under ``reg.locked()``: tell the guards of this host's dispatchers that are gone (or
    stopped on purpose, their workers kept for a while) that their workers are taken over: each
    exits without ending them. The guards of dispatchers still running are left alone. Returns
    the owner keys of those (their workers are theirs, not to adopt)."""
    kept: list[tuple[int, str | None]] = []
    live: set[str] = set()
    for guard, owner in reg.read():
        if owner is not None and owner != me and owner_alive(owner):
            kept.append((guard, owner))
            live.add(owner)
        else:
            _signal_guard(guard)
    reg.write(kept)
    return live


# -- the worker file ------------------------------------------------------------------------------

def worker_file(home: Path, host: str) -> Path:
    """Where the dispatcher of ``host`` lists the workers it started."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", host)[:100] or "host"
    return home / "run" / f"workers-{safe}.txt"


class WorkerFile:
    """The host's worker file: one append per worker started and per worker gone."""

    def __init__(self, path: Path, owner: str = "") -> None:
        self.path = path
        #: the owner key of the dispatcher writing it (:func:`owner_key`)
        self.owner = owner
        self._lock = threading.Lock()

    def _append(self, line: str) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            with self._lock:
                try:
                    fd = os.open(self.path, flags, 0o600)
                except FileNotFoundError:  # its folder first (made once: not looked for each time)
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    fd = os.open(self.path, flags, 0o600)
                try:
                    os.write(fd, line.encode())
                finally:
                    os.close(fd)
        except OSError:
            pass

    def _line(self, run_id: int, pid: int, at: float) -> str:
        return f"+ {run_id} {pid} {at:.3f} {self.owner}\n" if self.owner else f"+ {run_id} {pid} {at:.3f}\n"

    def started(self, run_id: int, pid: int, at: float) -> None:
        self._append(self._line(run_id, pid, at))

    def gone(self, run_id: int) -> None:
        self._append(f"- {run_id}\n")

    def read(self) -> dict[int, tuple[int, float, str | None]]:
        """The workers listed as started and not gone: ``{run_id: (pid, started_at, owner)}``
        (owner None: a line of an older version)."""
        out: dict[int, tuple[int, float, str | None]] = {}
        try:
            text = self.path.read_text()
        except OSError:
            return out
        for line in text.splitlines():
            parts = line.split()
            try:
                if parts[0] == "+" and len(parts) in (4, 5):
                    out[int(parts[1])] = (int(parts[2]), float(parts[3]), parts[4] if len(parts) == 5 else None)
                elif parts[0] == "-" and len(parts) == 2:
                    out.pop(int(parts[1]), None)
            except (ValueError, IndexError):
                continue
        return out

    def adopted(self, keep: dict[int, tuple[int, float]], dropped: list[int]) -> None:
        """While another dispatcher on the host appends to the file too (a rewrite could lose
        its lines): the workers taken over, listed again as ours, and those gone."""
        for r, (p, a) in sorted(keep.items()):
            self.started(r, p, a)
        for r in dropped:
            self.gone(r)

    def rewrite(self, keep: dict[int, tuple[int, float]]) -> None:
        """Replace the file with ``keep``, as ours (at start, once the leftovers are known and no
        other dispatcher on the host writes it)."""
        try:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_name(self.path.name + ".tmp")
                tmp.write_text("".join(self._line(r, p, a) for r, (p, a) in sorted(keep.items())))
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


def _leaders_live(groups: set[int]) -> set[int]:
    """The groups among ``groups`` whose leader (the worker itself: its pid is the group's and
    its session's id) is a live process: a worker whose leader exited by itself is not ended by
    the guard, whatever it left running."""
    out: set[int] = set()
    for g in groups:
        try:
            with open(f"/proc/{g}/stat") as fh:
                raw = fh.read()
        except OSError:
            continue
        tail = raw[raw.rfind(")") + 2:].split()
        if len(tail) > 3 and tail[0] not in ("Z", "X", "x") and tail[2] == tail[3] == str(g):
            out.add(g)
    return out


def _record_ended(path: str, groups: set[int], cause: str) -> None:
    """Append ``pgid time cause`` for each worker about to be ended to the file of ended
    workers (:func:`ended_by_guard`), before any signal: a dispatcher starting meanwhile finds it."""
    if not path or not groups:
        return
    now = time.time()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, "".join(f"{g} {now:.3f} {cause}\n" for g in sorted(groups)).encode())
        finally:
            os.close(fd)
    except OSError:
        pass


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
    taken = threading.Event()
    # the next dispatcher took them over; SIGUSR1 was blocked until now (:meth:`Guard.start`),
    # so one sent early is delivered here, never by its default action (ending the guard)
    signal.signal(signal.SIGUSR1, lambda *_: taken.set())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    grace = float(argv[1]) if len(argv) > 1 else GUARD_GRACE
    record = argv[2] if len(argv) > 2 else ""  # the file of ended workers (:func:`ended_file`)
    groups: set[int] = set()
    cgroups: dict[int, str] = {}  # a held group's cgroup folder, kept while the group is held
    keep_for = 0.0
    detached = False
    for raw in sys.stdin.buffer:
        line = raw.strip().decode("utf-8", "replace")
        head, _, folder = line.partition(" ")
        if line.startswith("detach"):
            detached = True
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
        _record_ended(record, _leaders_live(groups), "detached" if detached else "died")
        _end_groups(groups, grace, {g: f for g, f in cgroups.items() if g in held})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
