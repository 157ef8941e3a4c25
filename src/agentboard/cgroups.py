"""Each worker in a cgroup of its own, so nothing it started outlives its run.

A worker runs in its own session, and when its run is judged the dispatcher ends what is left of
its process group. A process that left the group — ``setsid`` (a daemon, Node's ``detached``
children, ``start_new_session``), ``setpgid`` (a shell's job control) — is not in it; a process
cannot leave its cgroup without write access to a cgroup above it, which a worker has not (an
unprivileged one: the cgroup files are the dispatcher's; see ``docs/security.md``).

Where the host has a writable cgroup v2 hierarchy (the dispatcher's own cgroup is delegated to it,
or it runs as root), each worker runs in ``<the dispatcher's cgroup>/agentboard-<host>-<home>/run-<run
id>`` (``<home>``: a digest of the home's path): the small shell that starts it (:data:`WRAPPER`;
a program that is itself a shell's ``-c`` script, its script's first command, :func:`wrapped`)
joins that cgroup before it runs the program, so nothing the program forks is ever outside it (its
checks join it the same way); when its run's exit is handled, what is left there is sent SIGTERM,
then killed (``cgroup.kill``) after the grace, and the cgroup removed. The folder is found again by run id, so a dispatcher that took the worker over, or the
next one-shot pass, ends it too; its path is kept in ``<home>/run/cgroup-<host>``, for passes made
from another cgroup. Without such a hierarchy (a container that mounts it read-only, a user
session without delegation), or with the setting ``worker_cgroups`` off, the process group is all there is: :meth:`WorkerCgroups.probe`
says why.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shlex
import signal
import threading
import time
from pathlib import Path

log = logging.getLogger("agentboard.dispatch")

#: the name of a cgroup folder: letters, digits, '.', '_' and '-'
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _own_cgroup() -> Path | None:
    """The cgroup v2 folder of this process, or None (no unified hierarchy mounted)."""
    try:
        rel = next((line[3:].strip() for line in Path("/proc/self/cgroup").read_text().splitlines()
                    if line.startswith("0::")), None)
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    if rel is None:
        return None
    for line in mounts:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if right.split()[:1] == ["cgroup2"] and len(fields) > 4:
            root, point = fields[3], fields[4]
            if rel == root or rel.startswith(root.rstrip("/") + "/"):
                return Path(point) / rel[len(root):].lstrip("/")
    return None


class WorkerCgroups:
    """The cgroups of one host's workers (``host``), or none (``base is None``; ``why`` says why)."""

    def __init__(self, home: Path, host: str, *, enabled: bool = True) -> None:
        self.record = home / "run" / f"cgroup-{_UNSAFE.sub('_', host)}"
        # run ids are a database's: two homes on one host (two databases) never share a folder
        where = hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:10]
        self.name = f"agentboard-{_UNSAFE.sub('_', host)}-{where}"
        self.base: Path | None = None
        self.why = ""
        self._probed = False
        self._probing = threading.Lock()
        #: the folders runs' cgroups may be in (this process's and the recorded one)
        self._bases: list[Path] = []
        self.enabled = enabled

    def probe(self) -> Path | None:
        """The folder holding the workers' cgroups, made if need be (once; None: unavailable).
        The workers a pass starts at once probe from several threads: each waits for the one
        probing, and none is told there is no folder before it is known."""
        with self._probing:
            if not self._probed:
                self._probe()
                self._probed = True
            return self.base

    def _probe(self) -> Path | None:
        if not self.enabled:
            self.why = "the setting worker_cgroups is off"
            return None
        candidates: list[Path] = []
        try:
            recorded = self.record.read_text().strip()
            if recorded:
                candidates.append(Path(recorded))
                self._bases.append(Path(recorded))
        except OSError:
            pass
        own = _own_cgroup()
        if own is not None:
            candidates.append(own / self.name)
        elif not candidates:
            self.why = "no cgroup v2 hierarchy is mounted"
            log.info("workers run without cgroups of their own: %s", self.why)
            return None
        for base in candidates:
            try:
                base.mkdir(exist_ok=True)
                if not (base / "cgroup.procs").exists():
                    raise OSError("not a cgroup folder")
                test = base / f"probe-{os.getpid()}"
                test.mkdir(exist_ok=True)
                test.rmdir()
            except OSError as exc:
                self.why = f"cannot make cgroups in {base}: {exc.strerror or exc}"
                continue
            self.base, self.why = base, ""
            if base not in self._bases:
                self._bases.insert(0, base)
            try:
                self.record.parent.mkdir(parents=True, exist_ok=True)
                if not self.record.exists() or self.record.read_text().strip() != str(base):
                    self.record.write_text(f"{base}\n")
            except OSError:
                pass
            return base
        log.info("workers run without cgroups of their own (%s): a process a worker takes out of its "
                 "process group (setsid) is not ended with its run", self.why)
        return None

    def runs(self) -> list[int]:
        """The run ids that have a cgroup here."""
        self.probe()
        out: set[int] = set()
        for base in self._bases:
            try:
                names = os.listdir(base)
            except OSError:
                continue
            out.update(int(n[4:]) for n in names if n.startswith("run-") and n[4:].isdigit())
        return sorted(out)

    def close(self) -> None:
        """Remove the folder of the workers' cgroups when none is left in it (a worker still
        running keeps it, for the next dispatcher)."""
        if self.base is not None:
            try:
                self.base.rmdir()
            except OSError:
                pass
            self._probed, self.base = False, None
            self._bases = []

    def _folders(self, run_id: int) -> list[Path]:
        """Where the cgroup of run ``run_id`` may be: under this process's base and the one the
        host's record named when it was probed."""
        self.probe()
        return [b / f"run-{int(run_id)}" for b in self._bases]

    def prepare(self, run_id: int) -> Path | None:
        """Make the cgroup of run ``run_id``, for its worker to join before it runs the agent
        (:data:`WRAPPER`). None when there are no cgroups here."""
        base = self.probe()
        if base is None:
            return None
        folder = base / f"run-{int(run_id)}"
        for _ in range(3):  # another process on the home may remove the base when it empties it
            try:
                folder.mkdir(parents=True, exist_ok=True)
                return folder
            except FileNotFoundError:
                continue
            except OSError:
                return None
        return None

    def folder(self, run_id: int) -> Path | None:
        """The cgroup run ``run_id``'s worker joined, if there are cgroups here (no I/O once probed)."""
        base = self.probe()
        return base / f"run-{int(run_id)}" if base is not None else None

    def end(self, run_id: int, *, grace: float = 2.0) -> list[int]:
        """End what is left in the cgroup of run ``run_id`` (SIGTERM, then ``cgroup.kill`` after
        ``grace`` seconds) and remove it. Returns the pids that were still there."""
        left: list[int] = []
        for folder in self._folders(run_id):
            if folder.is_dir():
                left += end_cgroup(folder, grace=grace)
                try:  # the last run's: nothing of this host's workers is left here
                    folder.parent.rmdir()
                except OSError:
                    pass
        return left


#: the shell a process starts in to join a cgroup (``$1``, or empty) and, when ``$2`` names a
#: file, to record its exit status there: it joins the cgroup first, so nothing the program
#: forks is ever outside it, then becomes the program (or waits for it and writes its status)
WRAPPER = ('c=$1; f=$2; shift 2; '
           'if [ -n "$c" ]; then echo $$ 2>/dev/null > "$c/cgroup.procs" '
           '|| echo "agentboard: could not join the cgroup $c" >&2; fi; '
           'if [ -z "$f" ]; then exec "$@"; fi; '
           '"$@"; s=$?; printf "%s" "$s" > "$f.tmp" && mv "$f.tmp" "$f"; exit $s')


#: shells whose ``-c`` script can begin with the join itself: they read no start-up file of
#: their own before a non-interactive script (``bash`` reads ``$BASH_ENV``, ``zsh`` its
#: ``.zshenv``: they go through :data:`WRAPPER`)
_SHELLS = frozenset({"sh", "dash"})


def wrapped(argv: list[str], cgroup: Path | None, exit_file: Path | None = None) -> list[str]:
    """``argv`` started through :data:`WRAPPER` (``argv[0]`` as given: resolve it first). A
    program that is itself a shell running a ``-c`` script (a profile's command with shell syntax
    runs as ``/bin/sh -c``) joins the cgroup as its script's first command instead: the same
    order — joined before anything of the script runs — without a second shell's start."""
    if (cgroup is not None and exit_file is None and len(argv) >= 3 and argv[1] == "-c"
            and os.path.basename(argv[0]) in _SHELLS):
        where = shlex.quote(str(cgroup))
        join = (f"echo $$ 2>/dev/null > {where}/cgroup.procs "
                f"|| echo \"agentboard: could not join the cgroup \"{where} >&2; ")
        return [argv[0], "-c", join + argv[2], *argv[3:]]
    return ["/bin/sh", "-c", WRAPPER, "agentboard-worker", str(cgroup or ""), str(exit_file or ""), *argv]


def members(folder: Path) -> list[int]:
    """The processes in cgroup ``folder`` (none when it is gone)."""
    try:
        return [int(p) for p in (folder / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def end_cgroup(folder: Path, *, grace: float = 2.0) -> list[int]:
    """SIGTERM every process in ``folder``, wait up to ``grace`` for them to go, then kill what
    is left with the cgroup (no process can fork its way out meanwhile) and remove the folder.
    Returns the pids found at first."""
    first = members(folder)
    if first:
        for pid in first:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        deadline = time.monotonic() + grace
        delay = 0.005
        while members(folder) and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        kill(folder)
    try:
        folder.rmdir()
    except OSError:
        pass
    return first


def kill(folder: Path) -> None:
    """SIGKILL every process in cgroup ``folder``, and wait (2 s at most) until it is empty."""
    deadline = time.monotonic() + 2.0
    try:
        (folder / "cgroup.kill").write_text("1\n")
    except OSError:  # a kernel before 5.14: one by one, until none is left
        pass
    while time.monotonic() < deadline:
        pids = members(folder)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


__all__ = ["WRAPPER", "WorkerCgroups", "end_cgroup", "kill", "members", "wrapped"]
