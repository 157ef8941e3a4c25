"""Starting a worker process: its environment, its log file, its own session."""

from __future__ import annotations

import ctypes
import fnmatch
import functools
import mmap
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from .. import cgroups
from ..config import Settings, redact
from ..domain import worker_env as worker_env_vars
from ..domain.worker_env import WorkerEnv
from ..protocol import project_env
from . import isolation, liveness
from .isolation import NONE, Confinement

_LOG_KEEP = 3


#: the last answer of :func:`inherited` for this process's own environment: its variables as
#: they were (``os.environ``'s bytes), the deny and allow patterns, and what a worker inherited
_last_inherited: tuple[dict[bytes, bytes], tuple[tuple[str, ...], tuple[str, ...]], dict[str, str]] | None = None


def inherited(settings: Settings, base: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The dispatcher's variables a worker inherits: none named ``AGENTBOARD_*``, none of git's
    that name a repository (:data:`.worker_env.GIT_REPOSITORY_VARS`), none matching a
    ``worker_env_deny`` pattern unless named in ``worker_env_allow`` (names compared in upper case),
    and none whose value carries a credential (``redis://:pw@host``, ``?password=``: what
    ``config.redact`` masks) unless so named. For this process's own environment the answer is
    reused while its variables are the same (every worker of a burst inherits the same)."""
    global _last_inherited
    rules = (tuple(settings.worker_env_deny), tuple(settings.worker_env_allow))
    raw = getattr(base, "_data", None) if base is os.environ else None
    last = _last_inherited
    if isinstance(raw, dict) and last is not None and last[1] == rules and last[0] == raw:
        return dict(last[2])
    keep = _kept_names(tuple(base), *rules)
    allowed = _allowed(rules[1])
    out = {name: base[name] for name in keep if name.upper() in allowed or not _holds_credential(base[name])}
    if isinstance(raw, dict):
        _last_inherited = (dict(raw), rules, dict(out))
    return out


@functools.lru_cache(maxsize=8)
def _allowed(allow: tuple[str, ...]) -> frozenset[str]:
    return frozenset(n.upper() for n in allow)


@functools.lru_cache(maxsize=1024)
def _holds_credential(value: str) -> bool:
    """Whether ``value`` holds a password or token that :func:`config.redact` would mask."""
    if "@" not in value and "=" not in value:
        return False
    return redact(value) != value


@functools.lru_cache(maxsize=8)
def _kept_names(names: tuple[str, ...], deny: tuple[str, ...], allow: tuple[str, ...]) -> tuple[str, ...]:
    """(cached per set of names and patterns: the same for every worker of a dispatcher)"""
    deny_up = [p.upper() for p in deny]
    allow_up = {n.upper() for n in allow}
    out: list[str] = []
    for name in names:
        key = name.upper()
        if worker_env_vars.is_ours(key) or worker_env_vars.names_a_repository(name):
            continue
        if key not in allow_up and any(fnmatch.fnmatchcase(key, p) for p in deny_up):
            continue
        out.append(name)
    return tuple(out)


def worker_env(
    settings: Settings, identity: WorkerEnv, *, profile: dict[str, Any], base: dict[str, str] | None = None,
    board_row: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """A worker's environment: what it inherits (:func:`inherited`), its identity
    (``identity.to_env()``: the task, run, board, workspace, profile, the API's URL and its run
    token — never the home, the database URL or another credential of the dispatcher), then the
    profile's own ``env``.

    ``PATH`` is the user's, without agentboard's own virtualenv: ``agentboard`` is reached
    through a folder holding only that executable, and the project's virtualenv (the board's
    ``env_setup`` or a ``.venv`` in its target directory) comes first
    (:mod:`agentboard.protocol.project_env`)."""
    env = inherited(settings, os.environ if base is None else base)
    env.pop("VIRTUAL_ENV", None)
    env.update(project_env.environment(settings.home, env.get("PATH", os.defpath), board_row))
    env.update(identity.to_env())
    for k, v in (profile.get("env") or {}).items():
        env[str(k)] = str(v)
    return env


def log_path(home: Path, board: str, task_id: str) -> Path:
    return home / "boards" / board / "logs" / f"{task_id}.log"


def exit_path(home: Path, board: str, task_id: str, run_id: int) -> Path:
    """Where a worker's exit status is written, so a dispatcher that did not start it (a one-shot
    ``agentboard dispatch``, or one restarted since) still learns how it ended."""
    return home / "boards" / board / "logs" / f"{task_id}.run{run_id}.exit"


def read_exit(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _resolve(argv0: str, env: dict[str, str]) -> str:
    """The executable a command names, or the same OSError Popen would raise for it."""
    import errno

    if os.sep in argv0:
        found = argv0 if os.path.isfile(argv0) else None
    else:
        found = shutil.which(argv0, mode=os.F_OK, path=env.get("PATH"))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", argv0)
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise PermissionError(errno.EACCES, "Permission denied", argv0)
    return found


def open_log(path: Path, max_bytes: int) -> tuple[IO[bytes], int]:
    """Open the task's log for appending, rotating it first when it is past the size cap.

    Returns the file and the offset this run's output starts at.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        size = 0
    if max_bytes and size >= max_bytes:
        for i in range(_LOG_KEEP - 1, 0, -1):
            older = path.with_name(f"{path.name}.{i}")
            if older.exists():
                older.replace(path.with_name(f"{path.name}.{i + 1}"))
        path.replace(path.with_name(f"{path.name}.1"))
        size = 0
    fh = open(path, "ab", buffering=0)  # noqa: SIM115 - handed to the child
    return fh, size


#: a capped log keeps this share of ``log_max_bytes`` from the start of the run's output, and as
#: much of what it printed last
LOG_KEEP_SHARE = 4
#: the line a capped log has between the start of the run's output it keeps and its end
CUT_MARK = b"[agentboard: this run's output passed log_max_bytes ("
#: seconds between two looks at a log past half of ``log_max_bytes`` (or cut already): at most
#: the first, at least the second; in between, what its growth since the last look says is
#: half the time it needs to pass the cap
LOG_LOOK_EVERY = 2.0
LOG_LOOK_MIN = 0.2


class RunLog(Protocol):
    """What :func:`cap_log` reads and keeps of a run's log (a :class:`Worker`, or a :class:`LogCut`)."""

    log_path: Path
    log_offset: int
    log_dropped: int
    log_head_end: int
    scanned: int
    offline_scanned: int
    log_looked: tuple[float, int] | None


@dataclass
class LogCut:
    """:func:`cap_log`'s state for a run whose worker is not this process's child (taken over
    from an earlier dispatcher, or started by a one-shot pass): found in its log by
    :func:`run_log`."""

    log_path: Path
    log_offset: int = 0
    log_dropped: int = 0
    log_head_end: int = 0
    scanned: int = 0
    offline_scanned: int = 0
    log_looked: tuple[float, int] | None = None


def run_log(path: Path, run_id: int, task_id: str, max_bytes: int) -> LogCut:
    """Where run ``run_id``'s output starts in its task's log (after its ``=== run N of …``
    line, within the first ``max_bytes``: the log was rotated at its start when past them) and
    where the part kept by an earlier cut ends; from the log's start when its line is missing."""
    cut = LogCut(path)
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
            limit = min(len(m), max_bytes + 4096)
            at = m.find(f"=== run {run_id} of {task_id}".encode(), 0, limit)
            if at < 0:
                return cut
            end = m.find(b"\n", at, limit)
            cut.log_offset = end + 1 if end >= 0 else at
            mark = m.find(CUT_MARK, cut.log_offset, cut.log_offset + max_bytes // LOG_KEEP_SHARE + (1 << 17))
            if mark >= 0:
                end = m.find(b"\n", mark)
                cut.log_head_end = end + 1 if end >= 0 else 0
    except (OSError, ValueError):  # (an empty log cannot be mapped)
        pass
    return cut


def next_log_look(w: RunLog, before: int, after: int, now: float, max_bytes: int) -> float | None:
    """When to look at the log again (None: the passes that come anyway are enough), given its
    size ``before`` and ``after`` the cut of this look: soon while it grows fast towards
    ``max_bytes``, so a worker printing without end is cut before its log is many times the cap
    (the cut when its exit is handled ends it within the cap in any case)."""
    last, w.log_looked = w.log_looked, (now, after)
    grown = after - w.log_offset
    near = grown > max_bytes // 2 or bool(w.log_dropped)
    rate = (before - last[1]) / (now - last[0]) if last is not None and now > last[0] else 0.0
    if last is None:  # its first look: the next, soon, tells the pace of one that has printed much already
        return now + LOG_LOOK_MIN if near or grown > max_bytes // 64 else None
    if rate <= 0:
        return now + LOG_LOOK_EVERY if near else None
    reach = max(0.0, max_bytes - grown) / rate  # seconds until it passes the cap at this pace
    if not near and reach > 2 * LOG_LOOK_EVERY:
        return None
    return now + min(LOG_LOOK_EVERY, max(LOG_LOOK_MIN, reach / 2))


#: one cut of a log at a time in this process: a pass's look and the handling of the worker's exit
#: may come for the same run at once
_CUTTING = threading.Lock()


def cap_log(w: RunLog, max_bytes: int) -> int:
    """Keep a running worker's log near ``max_bytes``: when this run's output (past
    ``log_offset``) has grown beyond it, cut it back to its first ``max_bytes / 4`` bytes, a line
    saying output was dropped, and its last ``max_bytes / 4`` bytes; what the worker writes next
    follows (its output is appended). The worker writes its log directly, so this is how a run
    that prints without end (a loop, or on purpose) cannot fill the home's disk. Returns the
    bytes dropped now (0: within the cap, or no cap).

    The worker may be writing while its log is cut. Where the file system can take a range out
    of a file's middle (ext4, XFS: :func:`_collapse`), the middle is taken out in one step that
    the worker's appends wait for, so nothing it writes meanwhile is lost: its last line is the
    log's last line. Elsewhere the log is truncated and its kept end written back at the offset
    it was cut to, never where the worker's appends have taken the log's end by then, so the part
    kept at the start ends with that line wherever the worker got to (what it wrote in between,
    in the few calls between the last look at the log's size and the cut, is lost)."""
    if not max_bytes:
        return 0
    try:
        size = os.stat(w.log_path).st_size
    except OSError:
        return 0
    if size - w.log_offset <= max_bytes:
        return 0
    with _CUTTING:
        try:
            fd = os.open(w.log_path, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            return 0
        try:
            dropped = _cut(fd, w, max_bytes)
        finally:
            os.close(fd)
    if dropped:
        w.scanned = w.offline_scanned = w.log_head_end
    return dropped


def _mark(max_bytes: int) -> bytes:
    return (f"\n[agentboard: this run's output passed log_max_bytes ({max_bytes} bytes); "
            "the middle of it is dropped]\n").encode()


def _cut(fd: int, w: RunLog, max_bytes: int) -> int:
    share = max_bytes // LOG_KEEP_SHARE
    st = os.fstat(fd)
    size = st.st_size
    if size - w.log_offset <= max_bytes:  # (cut by the other look meanwhile)
        return 0
    collapsed = _collapse(fd, w, max_bytes, size, st.st_blksize)
    if collapsed is not None:
        return collapsed
    head_end = w.log_head_end or w.log_offset + share
    tail = os.pread(fd, share, max(head_end, size - share))
    dropped = size - head_end - len(tail)
    if dropped <= 0:
        return 0
    mark = b"" if w.log_head_end else _mark(max_bytes)
    os.ftruncate(fd, head_end)
    kept = mark + tail
    at = 0
    while at < len(kept):
        at += os.pwrite(fd, kept[at:], head_end + at)
    w.log_head_end = head_end + len(mark)
    w.log_dropped += dropped
    return dropped



#: ``fallocate``'s mode that takes a range out of a file, the rest of it moved up (Linux)
_FALLOC_FL_COLLAPSE_RANGE = 0x08


@functools.cache
def _fallocate() -> Callable[[int, int, int, int], int] | None:
    """libc's ``fallocate`` (None where there is none): Python's ``os`` has no call that takes
    its mode."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.fallocate
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn


def _collapse(fd: int, w: RunLog, max_bytes: int, size: int, block: int) -> int | None:
    """Cut the log by taking whole blocks out of its middle (``FALLOC_FL_COLLAPSE_RANGE``): the
    kernel holds the file while it does, so the worker's appends land after what is kept, never
    in what is dropped. Its start is kept up to a block boundary whose last bytes become the
    line saying output was dropped, and at least ``max_bytes / 4`` bytes of its end. None where
    it cannot be done here (a file system without it, a cap too small for whole blocks, a start
    cut before at no block boundary): the caller cuts as before."""
    fallocate = _fallocate()
    if fallocate is None or block <= 0 or max_bytes < 16 * block:
        return None
    share = max_bytes // LOG_KEEP_SHARE
    mark = b"" if w.log_head_end else _mark(max_bytes)
    head_end = w.log_head_end or -(-(w.log_offset + share + len(mark)) // block) * block
    if head_end % block:
        return None
    dropped = (size - share - head_end) // block * block
    if dropped <= 0:
        return 0
    if fallocate(fd, _FALLOC_FL_COLLAPSE_RANGE, head_end, dropped) != 0:
        return None  # (EOPNOTSUPP, EINVAL: this file system, or this file, cannot)
    if mark:  # (the bytes it is written over are dropped too)
        os.pwrite(fd, mark, head_end - len(mark))
    w.log_head_end = head_end
    w.log_dropped += dropped + len(mark)
    return dropped + len(mark)


#: what is said of a worker whose exit status cannot be known (taken over from an earlier
#: dispatcher process, it is not this one's child, and no wrapper of it wrote its status)
UNKNOWN_EXIT = "its exit status is unknown: it was not started by this dispatcher process"


class Adopted(subprocess.Popen[bytes]):
    """The process of a worker an earlier dispatcher process on this host started, taken over
    (:meth:`.reaping.Reaper.take_over_leftovers`): a ``Popen`` in name only, for the
    :class:`Worker` that holds it — nothing is started, and not being our child it is looked at
    by pid (:func:`.liveness.pid_alive`: a zombie, or a pid reused by a process started since,
    is gone). Its exit status is known only where its wrapper wrote it (``exit_file``)."""

    #: its ``returncode`` once it is gone with its status unknown (no status is this number; the
    #: :class:`Worker` holding it reads it as None)
    UNKNOWN = -(2**31)

    def __init__(self, pid: int, started: float, exit_file: Path | None = None) -> None:
        # (Popen.__init__ is not called: it would start a process)
        self.pid = pid
        self.args = [f"pid {pid}"]
        self.returncode = None
        self.started = started
        self.exit_file = exit_file

    def poll(self) -> int | None:
        if self.returncode is None and not liveness.pid_alive(self.pid, started_after=self.started):
            code = read_exit(self.exit_file)
            self.returncode = self.UNKNOWN if code is None else code
        return self.returncode


@dataclass
class Worker:
    """A worker process this dispatcher started (its child), or one it took over from an
    earlier dispatcher process on the host (its ``proc`` an :class:`Adopted`)."""

    board: str
    task_id: str
    run_id: int
    proc: subprocess.Popen[bytes]
    profile: dict[str, Any]
    workspace: Path
    log_path: Path
    log_offset: int
    started: float = field(default_factory=time.time)
    attempt: int = 0
    deadline: float | None = None
    exit_code: int | None = None
    exited: bool = False
    #: how far the dispatcher has read the log for signs of progress (tool calls)
    scanned: int = 0
    #: how far it has read the log for an agent CLI waiting for a network it cannot reach
    offline_scanned: int = 0
    #: fetches the branch of its task repository back into the target (called once it exited)
    collect: Callable[[], None] | None = None
    #: bytes of this run's output dropped from its log so far, and where the part kept from its
    #: start ends (:func:`cap_log`)
    log_dropped: int = 0
    log_head_end: int = 0
    #: when its log was last looked at, and its size then (:func:`next_log_look`)
    log_looked: tuple[float, int] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def adopted(self) -> bool:
        """Taken over from an earlier dispatcher process (not our child)."""
        return isinstance(self.proc, Adopted)

    def poll(self) -> bool:
        """Reap: True once the process has exited (its status is then in ``exit_code``: None
        for an adopted worker whose status is unknown, :data:`UNKNOWN_EXIT`).

        Safe from any thread: ``Popen`` serializes reaping, and the fields only ever go from
        "running" to the one exit status."""
        if not self.exited:
            code = self.proc.poll()
            if code is not None:
                self.exit_code = None if code == Adopted.UNKNOWN and self.adopted else code
                self.exited = True
        return self.exited


def start(argv: list[str], *, cwd: Path, env: dict[str, str], log: Path, log_max_bytes: int,
          header: str | None = None, exit_file: Path | None = None,
          confinement: Confinement = NONE, show: Sequence[Path] = (),
          cgroup: Path | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """Start a worker in its own session, its output appended to ``log``; ``exit_file``: wrap it
    to record its exit status; ``confinement``: the OS user and sandbox it runs in (a sandbox
    shows what the program needs, :func:`.isolation.needed_paths`; a program it would hide is an
    :class:`.isolation.IsolationError`; ``show``: more paths it needs); ``cgroup``: the folder of
    the cgroup it joins before its program runs (:mod:`agentboard.cgroups`)."""
    wrapped = exit_file is not None or cgroup is not None
    # its working directory by name too: a program that takes its folder from $PWD (opencode does)
    # would otherwise work in the dispatcher's (a shell in between corrects it; none may be)
    env = {**env, "PWD": str(cwd)}
    if confinement.mode != "none":
        argv = [_resolve(argv[0], env), *argv[1:]]
        if confinement.bwrap is not None:
            isolation.check_program(argv, env, confinement)
            confinement = confinement.showing(isolation.needed_paths(argv, env, extra=show))
        argv = confinement.command(argv, cwd, switch_in_argv=wrapped)
        env = confinement.environment(env, cwd)
    user, group, extra_groups = confinement.popen_ids(switch_in_argv=wrapped)
    if exit_file is not None:
        exit_file.unlink(missing_ok=True)
    if wrapped:  # a shell joins the cgroup before the program runs (and records its exit status)
        argv = cgroups.wrapped([_resolve(argv[0], env), *argv[1:]], cgroup, exit_file)
    fh, offset = open_log(log, log_max_bytes)
    try:
        if header:
            fh.write(header.encode() + b"\n")
            offset += len(header.encode()) + 1
        proc = subprocess.Popen(
            argv, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, user=user, group=group, extra_groups=extra_groups,
        )
    finally:
        fh.close()
    return proc, offset


def log_tail(path: Path | None, since: int = 0, limit: int = 600) -> str:
    if path is None:
        return ""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            fh.seek(max(since, size - limit))
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [ln for ln in data.strip().splitlines() if ln.strip() and not ln.startswith("=== run ")]
    return "\n".join(lines[-8:])[-limit:]
