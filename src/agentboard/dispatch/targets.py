"""Board target directories: validation of ``boards create … --workdir DIR``.

``linked-new``: an absolute path that does not exist yet (created here when asked: ``--create``)
or is an empty folder.
``linked-existing``: take over an existing folder, validated once: it exists and is a
directory; it is not a system or sensitive location; it is not another board's target; and if
it is a git repository, its working tree is clean (so an agent's commit cannot sweep up the
owner's uncommitted edits).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..domain.errors import Conflict, InvalidInput
from ..kernel import boards as kboards
from ..kernel import dispatching as kd
from ..kernel.host_access import sensitive_reason
from ..store.engine import Database
from . import gitutil

MODES = ("linked-new", "linked-existing")

__all__ = ["MODES", "is_git_target", "sensitive_reason", "validate_target"]


def validate_target(db: Database, path: str, mode: str | None = None, board: str | None = None,
                    *, home: Path | None = None, create: bool = False) -> str:
    """Check a board target directory; return its normalized absolute path.

    A folder that does not exist is refused (naming it) unless ``create``: then it is made.
    ``mode`` None picks ``linked-existing`` when the folder exists, else ``linked-new``.
    Raises :class:`InvalidInput` (or :class:`Conflict` when another board already owns it)
    with the reason.
    """
    if not path or not str(path).strip():
        raise InvalidInput("the target directory is empty: give an absolute path")
    raw = os.path.expanduser(str(path).strip())
    if not os.path.isabs(raw):
        raise InvalidInput(f"target directory {path!r} is relative: give an absolute path")
    if ".." in raw.split(os.sep):
        raise InvalidInput(f"target directory {path!r} contains '..': give a plain absolute path")
    norm = os.path.normpath(raw)
    p = Path(norm)
    if home is None:
        home = db.settings.home
    why = sensitive_reason(p, home)  # whether it exists or not: never a folder of credentials
    if why:
        raise InvalidInput(f"cannot use {norm} as a target directory: {why}")
    kboards.check_workdir(norm, create=create)
    if mode is None:
        mode = "linked-existing" if p.exists() else "linked-new"
    if mode not in MODES:
        raise InvalidInput(f"unknown target mode {mode!r}: use linked-new or linked-existing")
    other = kd.board_with_workdir(db, norm, board)
    if other:
        raise Conflict(f"{norm} is already the target directory of board {other!r}")
    if mode == "linked-new":
        if p.exists():
            if not p.is_dir():
                raise InvalidInput(f"{norm} exists and is not a directory")
            if any(p.iterdir()):
                raise InvalidInput(
                    f"{norm} is not empty; use --workdir-mode linked-existing to take over an existing folder"
                )
        elif create:
            try:
                p.mkdir(parents=True)
            except OSError as exc:
                raise InvalidInput(f"cannot create target directory {norm}: {exc.strerror or exc}") from None
        return norm
    # linked-existing
    if not p.exists():
        raise InvalidInput(f"{norm} does not exist; create it first or use linked-new")
    if not p.is_dir():
        raise InvalidInput(f"{norm} is not a directory")
    if not os.access(norm, os.R_OK | os.W_OK | os.X_OK):
        raise InvalidInput(f"{norm} is not readable and writable by you")
    top = gitutil.toplevel(p)
    if top is not None:
        try:
            dirty = gitutil.status_lines(top)
        except gitutil.GitError as exc:
            raise InvalidInput(f"{norm} is in a git repository that git cannot read: {exc}") from None
        if dirty:
            sample = ", ".join(ln[3:] for ln in dirty[:3])
            raise InvalidInput(
                f"{norm} is a git repository with uncommitted changes ({len(dirty)} path(s): {sample}); "
                "commit or stash them first so an agent's commit cannot sweep them up"
            )
    return norm


def is_git_target(path: str | None) -> bool:
    """True when ``path`` is inside a git work tree."""
    return bool(path) and gitutil.toplevel(str(path)) is not None
