"""Verification: a task's ``verify`` commands, run in the workspace after a reported success.

Each command runs through the shell in its own process group (and, where the host has cgroups,
in the run's cgroup) with a timeout; a command that outlives it is killed with its children, and
what a command leaves running when it is done is ended too. The first failure stops the run of
commands.

The commands run the worker's code (its tests, its Makefile), so they run under the same
confinement as the profile that did the work (``dispatch.isolation``): in its sandbox, as the
worker user, with the worker's environment — never the dispatcher's. Under ``none`` they run
on the host as the dispatcher's user: the record says so (``confinement`` in the summary).

An entry ``check:NAME`` is a named check: it runs the command the board's admin configured
under that name *now* (board setting ``checks``), so changing the check changes what runs; a
name no longer configured fails verification with a message saying so.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .. import cgroups
from ..domain.worker_env import names_a_repository
from ..kernel.host_access import CHECK_PREFIX, resolve_checks

TAIL_BYTES = 4000

log = logging.getLogger(__name__)


class Confinement(Protocol):
    """What verification needs of a worker's confinement (``dispatch.isolation.Confinement``)."""

    @property
    def mode(self) -> str: ...

    def command(self, argv: list[str], workspace: Path, *, switch_in_argv: bool = False) -> list[str]: ...

    def popen_ids(self, *, switch_in_argv: bool = False) -> tuple[int | None, int | None, list[int] | None]: ...

    def environment(self, env: dict[str, str], workspace: Path) -> dict[str, str]: ...

    def describe(self) -> str: ...


@dataclass
class CommandResult:
    command: str
    exit_code: int | None
    seconds: float
    output_tail: str
    timed_out: bool = False

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def as_dict(self) -> dict[str, Any]:
        return {"command": self.command, "exit_code": self.exit_code, "seconds": round(self.seconds, 3),
                "timed_out": self.timed_out, "output_tail": self.output_tail}


@dataclass
class Verification:
    results: list[CommandResult] = field(default_factory=list)
    skipped: bool = False
    #: how the commands were confined (``Confinement.describe``); None: not said (a goal's checks)
    confinement: str | None = None

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failed(self) -> CommandResult | None:
        return next((r for r in self.results if not r.passed), None)

    def summary(self) -> dict[str, Any]:
        """What goes into the run metadata: each command with its exit code and a short tail."""
        out = {
            "passed": self.passed,
            "skipped": self.skipped,
            "commands": [{**r.as_dict(), "output_tail": r.output_tail[-500:]} for r in self.results],
        }
        if self.confinement is not None:
            out["confinement"] = self.confinement
        return out


@dataclass(frozen=True)
class Setup:
    """How a task's checks run: the worker's ``confinement`` and environment (``base_env``), or
    why that confinement is ``unavailable`` (then they do not run)."""

    confinement: Confinement | None
    base_env: Mapping[str, str] | None
    unavailable: str | None = None
    #: the run's cgroup, where the host has them: each command joins it, and what a command
    #: leaves running in it is ended with the command
    cgroup: Path | None = None


def _tail(data: bytes, limit: int = TAIL_BYTES) -> str:
    text = data[-limit * 2:].decode("utf-8", "replace")
    return text[-limit:]


def run_command(command: str, workspace: Path, timeout: float, env: dict[str, str] | None = None, *,
                confinement: Confinement | None = None, base_env: Mapping[str, str] | None = None,
                cgroup: Path | None = None) -> CommandResult:
    """Run one shell command in ``workspace``. Its environment: ``base_env`` (else the
    dispatcher's own) with ``env`` on top; under ``confinement`` (a sandbox, another user) the
    shell runs inside it; with ``cgroup`` (the run's, :mod:`agentboard.cgroups`) it joins it first.

    Its output goes to a file, not a pipe: a process it leaves running cannot hold the check
    open. When the shell is done (or killed at the timeout), what it left running is ended: its
    process group, and everything in ``cgroup`` (what left the group: ``setsid``)."""
    started = time.monotonic()
    if cgroup is not None:
        try:
            cgroup.mkdir(exist_ok=True)
        except OSError:
            cgroup = None
    base = os.environ if base_env is None else base_env
    full = {**{k: v for k, v in base.items() if not names_a_repository(k)}, **(env or {})}
    # Python reads compiled modules from a folder of its own for the check, never from the
    # workspace's __pycache__ (ignored by git, so a planted one would not be in the branch)
    pycache = Path(tempfile.gettempdir()) / f"agentboard-check-pycache-{os.getpid()}-{time.monotonic_ns()}"
    full["PYTHONPYCACHEPREFIX"] = str(pycache)
    argv: list[str] = ["/bin/sh", "-c", command]
    user = group = extra_groups = None
    if confinement is not None and confinement.mode != "none":
        argv = confinement.command(argv, workspace, switch_in_argv=cgroup is not None)
        user, group, extra_groups = confinement.popen_ids(switch_in_argv=cgroup is not None)
        full = confinement.environment(full, workspace)
    if cgroup is not None:
        argv = cgroups.wrapped(argv, cgroup)
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            argv, cwd=str(workspace), stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True, env=full, user=user, group=group,
            extra_groups=extra_groups,
        )
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=3)
                    break
                except subprocess.TimeoutExpired:
                    continue
            proc.wait()
        try:  # what the check left running (a server it started, a daemon) ends with it
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if cgroup is not None:
            cgroups.end_cgroup(cgroup, grace=0.0)
        size = out.seek(0, os.SEEK_END)
        out.seek(max(0, size - TAIL_BYTES * 2))
        tail = _tail(out.read())
    shutil.rmtree(pycache, ignore_errors=True)
    if timed_out:
        tail += f"\n[killed: no result within {timeout:g} s]"
    return CommandResult(command, proc.returncode, time.monotonic() - started, tail, timed_out)


def run(commands: list[str], workspace: Path, *, timeout: float, env: dict[str, str] | None = None,
        checks: Mapping[str, str] | None = None, confinement: Confinement | None = None,
        base_env: Mapping[str, str] | None = None, unavailable: str | None = None,
        cgroup: Path | None = None, refused: str | None = None) -> Verification:
    """Run ``commands`` in order in ``workspace``; stop at the first failure. ``checks``: the
    board's named checks, which ``check:NAME`` entries run. ``confinement`` and ``base_env``:
    the worker's (see the module docstring). ``unavailable``: why that confinement cannot be
    had here — then nothing runs and the first command fails saying so; ``refused``: why the
    workspace may not be checked as it is (the same). ``cgroup``: the run's (:func:`run_command`)."""
    out = Verification(confinement=confinement.describe() if confinement is not None else None)
    if confinement is not None or unavailable is not None:
        log.info("verifying in %s: %s", workspace, unavailable or out.confinement)
    for label, command in resolve_checks(commands, checks or {}):
        if command is None:
            result = CommandResult(label, None, 0.0, f"[no check named {label[len(CHECK_PREFIX):]!r} is "
                                   "configured on the board any more; an admin adds it with "
                                   "`agentboard boards checks add`]")
        elif refused is not None:
            result = CommandResult(label, None, 0.0, f"[not run: {refused}]")
        elif unavailable is not None:
            result = CommandResult(label, None, 0.0, f"[not run: it must run confined like the worker, and "
                                   f"{unavailable}]")
        else:
            result = run_command(command, workspace, timeout, env, confinement=confinement, base_env=base_env,
                                 cgroup=cgroup)
            result.command = label
        out.results.append(result)
        if not result.passed:
            break
    return out


__all__ = ["CommandResult", "Confinement", "Setup", "Verification", "run", "run_command"]
