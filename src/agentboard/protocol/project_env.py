"""The project's environment for workers and verify commands.

A worker and its task's verify commands run with the user's ``PATH``, not agentboard's own
virtualenv: agentboard is reachable through a folder that holds only an ``agentboard``
executable (:func:`shim_dir`, in the temporary folder), so ``python`` and ``pytest`` are the project's.
When the board names a virtualenv (board setting ``env_setup``: a folder, absolute or relative
to the board's target directory) or its target directory has a ``.venv`` (or ``venv``) with a
``bin/python``, that virtualenv's ``bin`` comes first and ``VIRTUAL_ENV`` names it.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..domain.worker_env import user_path

#: the virtualenv folders looked for in a board's target directory, in order
DETECTED = (".venv", "venv")
SHIM_NAME = "agentboard"


_SHIM_DIRS: dict[str, Path] = {}


def _own_dir(d: Path) -> bool:
    """``d`` is a real folder (no link) owned by this user and writable by no one else."""
    try:
        st = d.lstat()
    except FileNotFoundError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def shim_dir(home: Path | None = None) -> Path:
    """A folder holding only an ``agentboard`` executable that runs this agentboard's
    interpreter: ``<temp dir>/agentboard-bin-<uid>-<hash of the interpreter>`` (readable by a
    worker user; it names neither the home nor the database). One a process, made once."""
    key = sys.executable
    if key in _SHIM_DIRS and (_SHIM_DIRS[key] / SHIM_NAME).is_file():
        return _SHIM_DIRS[key]
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    d = Path(tempfile.gettempdir()) / f"agentboard-bin-{os.getuid()}-{digest}"
    text = f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m agentboard \"$@\"\n"
    try:
        if not d.exists():
            d.mkdir(mode=0o755)
        if not _own_dir(d):  # someone else's folder (or a link) at that name: a fresh one of our own
            d = Path(tempfile.mkdtemp(prefix="agentboard-bin-"))
            d.chmod(0o755)
        shim = d / SHIM_NAME
        if not shim.is_file() or shim.is_symlink() or shim.read_text() != text:
            tmp = d / f".{SHIM_NAME}.{os.getpid()}.tmp"
            tmp.write_text(text)
            tmp.chmod(0o755)
            tmp.replace(shim)
    except OSError:
        pass
    _SHIM_DIRS[key] = d
    return d


def venv_of(board_row: Mapping[str, Any] | None) -> Path | None:
    """The project's virtualenv for a board: its ``env_setup`` setting, else a ``.venv`` / ``venv``
    with ``bin/python`` in its target directory, else None."""
    board_row = board_row or {}
    target = board_row.get("default_workdir")
    named = _named(board_row)
    if named is not None:
        return named if (named / "bin").is_dir() else None
    if target:
        for name in DETECTED:
            p = Path(target) / name
            if (p / "bin" / "python").exists():
                return p
    return None


def check_venv(board_row: dict[str, Any] | None) -> str | None:
    """Why a board's ``env_setup`` cannot be used (None when it can or is not set)."""
    board_row = board_row or {}
    named = (board_row.get("settings") or {}).get("env_setup")
    if not named:
        return None
    if venv_of(board_row) is None:
        return f"env_setup {named!r} is not a virtualenv (no bin/ folder in {_named(board_row)})"
    return None


def _named(board_row: Mapping[str, Any]) -> Path | None:
    """The folder a board's ``env_setup`` names (relative to its target directory), or None."""
    named = (board_row.get("settings") or {}).get("env_setup")
    if not named:
        return None
    p = Path(os.path.expanduser(str(named)))
    target = board_row.get("default_workdir")
    return Path(target) / p if not p.is_absolute() and target else p


def path_for(home: Path | None, base_path: str | None, venv: Path | None) -> str:
    """A worker's PATH: the project's virtualenv (if any), the user's PATH without agentboard's
    own virtualenv, then the folder holding only ``agentboard``."""
    parts = [p for p in user_path(base_path or os.defpath).split(os.pathsep) if p]
    front = [str(venv / "bin")] if venv is not None else []
    shim = str(shim_dir(home))
    out: list[str] = []
    for p in [*front, *parts, shim]:
        if p not in out:
            out.append(p)
    return os.pathsep.join(out)


def environment(home: Path, base_path: str | None, board_row: Mapping[str, Any] | None) -> dict[str, str]:
    """``PATH`` (and ``VIRTUAL_ENV`` when the project has one) for a worker or a verify command."""
    venv = venv_of(board_row)
    env = {"PATH": path_for(home, base_path, venv)}
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
    return env


__all__ = ["DETECTED", "check_venv", "environment", "path_for", "shim_dir", "venv_of"]
