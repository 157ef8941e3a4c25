"""Verification: a task's ``verify`` commands, run in the workspace after a reported success.

Each command runs through the shell in its own process group with a timeout; a command that
outlives it is killed with its children. The first failure stops the run of commands.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def run(commands: list[str], workspace: Path, *, timeout: float, env: dict[str, str] | None = None) -> Verification:
    """Run ``commands`` in order in ``workspace``; stop at the first failure."""
    out = Verification()
    for command in commands:
        result = run_command(command, workspace, timeout, env)
        out.results.append(result)
        if not result.passed:
            break
    return out


__all__ = ["CommandResult", "Verification", "run", "run_command"]
