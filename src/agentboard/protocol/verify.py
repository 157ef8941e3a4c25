"""Verification: a task's ``verify`` commands, run in the workspace after a reported success.

Each command runs through the shell in its own process group with a timeout; a command that
outlives it is killed with its children. The first failure stops the run of commands.

An entry ``check:NAME`` is a named check: it runs the command the board's admin configured
under that name *now* (board setting ``checks``), so changing the check changes what runs; a
name no longer configured fails verification with a message saying so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..kernel.host_access import CHECK_PREFIX, resolve_checks

TAIL_BYTES = 4000


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

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failed(self) -> CommandResult | None:
        return next((r for r in self.results if not r.passed), None)

    def summary(self) -> dict[str, Any]:
        """What goes into the run metadata: each command with its exit code and a short tail."""
        return {
            "passed": self.passed,
            "skipped": self.skipped,
            "commands": [{**r.as_dict(), "output_tail": r.output_tail[-500:]} for r in self.results],
        }


def _tail(data: bytes, limit: int = TAIL_BYTES) -> str:
    text = data[-limit * 2:].decode("utf-8", "replace")
    return text[-limit:]


def run_command(command: str, workspace: Path, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
    started = time.monotonic()
    proc = subprocess.Popen(
        command, shell=True, cwd=str(workspace), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **(env or {})},
    )
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout)
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
        out, _ = proc.communicate()
    tail = _tail(out or b"")
    if timed_out:
        tail += f"\n[killed: no result within {timeout:g} s]"
    return CommandResult(command, proc.returncode, time.monotonic() - started, tail, timed_out)


def run(commands: list[str], workspace: Path, *, timeout: float, env: dict[str, str] | None = None,
        checks: Mapping[str, str] | None = None) -> Verification:
    """Run ``commands`` in order in ``workspace``; stop at the first failure. ``checks``: the
    board's named checks, which ``check:NAME`` entries run."""
    out = Verification()
    for label, command in resolve_checks(commands, checks or {}):
        if command is None:
            result = CommandResult(label, None, 0.0, f"[no check named {label[len(CHECK_PREFIX):]!r} is "
                                   "configured on the board any more; an admin adds it with "
                                   "`agentboard boards checks add`]")
        else:
            result = run_command(command, workspace, timeout, env)
            result.command = label
        out.results.append(result)
        if not result.passed:
            break
    return out


__all__ = ["CommandResult", "Verification", "run", "run_command"]
