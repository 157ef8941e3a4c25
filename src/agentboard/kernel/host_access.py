"""Running commands and placing workers on the host: who may decide it, and what an admin
configured for everyone else.

A task's ``verify`` commands run through the shell on the host, and its workspace decides
where on the host a worker runs and writes. Both are decisions for the installation's admin:

- an **admin** (an admin token limited to no board, or the home's owner through the CLI and the
  Python client) may give raw ``verify`` commands and ``dir:PATH`` / ``worktree:PATH``
  workspaces;
- a **member** (any other person's token, a board-limited admin included) picks what an admin
  configured on the board by name: ``check:NAME`` in ``verify`` (the board setting ``checks``,
  ``{name: command}``, resolved when verification runs, so changing the check changes what
  runs) and ``path:NAME`` as the workspace (the board setting ``paths``, ``{name:
  "dir:/abs" | "worktree:/abs"}``, resolved when the task is created);
- a **run** token (a worker's) proposes tasks that carry no commands, no workspace and no
  branch.

Whoever asks, a workspace never points at a sensitive location (:func:`sensitive_reason`: the
user's credentials folders, system folders, the agentboard home), as for a board's target
directory.
"""

from __future__ import annotations

import enum
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..domain import model
from ..domain.errors import Forbidden, InvalidInput
from ..store.engine import Database, Tx
from .common import board_settings

CHECK_PREFIX = "check:"
PATH_PREFIX = "path:"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
COMMAND_MAX = 10_000
#: the board settings an admin configures for members to pick by name
HOST_SETTINGS = ("checks", "paths")


class Access(enum.Enum):
    """How much of the host a caller may decide about."""

    ADMIN = "admin"  # raw commands and any workspace path that is not sensitive
    MEMBER = "member"  # named checks and named paths only
    RUN = "run"  # a worker's token: no commands, workspaces or branches at all


# -- sensitive locations ---------------------------------------------------------------------------

_SYSTEM = (
    "/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc",
    "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/home", "/Users", "/System",
    "/Library", "/Applications", "/private", "/snap", "/mnt", "/media",
)
_SENSITIVE_IN_HOME = (".ssh", ".gnupg", ".aws", ".config", ".kube", ".docker", ".agentboard", ".local", ".cache")
_SYSTEM_TREES = ("/etc", "/proc", "/sys", "/dev", "/boot", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/var/lib")


def _user_home() -> Path:
    return Path(os.path.expanduser("~")).absolute()


def sensitive_reason(path: Path, agentboard_home: Path | None = None) -> str | None:
    """Why ``path`` must not be a board's target directory or a task's workspace, or None
    when it may be."""
    p = str(path)
    real = os.path.realpath(p)
    home = _user_home()
    if real in (str(home), os.path.realpath(str(home))) or p == str(home):
        return f"{p} is your home folder itself; pick a project folder inside it"
    for cand in {p, real}:
        if cand in _SYSTEM:
            return f"{cand} is a system location"
        for tree in _SYSTEM_TREES:
            if cand.startswith(tree + "/"):
                return f"{cand} is inside the system folder {tree}"
    for name in _SENSITIVE_IN_HOME:
        s = home / name
        if real == str(s) or real.startswith(str(s) + "/") or p == str(s) or p.startswith(str(s) + "/"):
            return f"{p} is inside {s}, which holds credentials or settings"
    if agentboard_home is not None:
        ah = os.path.realpath(str(agentboard_home))
        if real == ah or real.startswith(ah + "/") or ah.startswith(real + "/"):
            return f"{p} overlaps the agentboard home {agentboard_home}"
    return None


# -- the board settings ``checks`` and ``paths`` -----------------------------------------------------


def entry_name(value: str, what: str) -> str:
    """A named check's or named path's name, checked."""
    name = (value or "").strip()
    if not NAME_RE.match(name):
        raise InvalidInput(f"invalid {what} name {value!r}: use 1-64 letters, digits, '.', '-' or '_'")
    return name


def check_command(value: Any) -> str:
    """A named check's command: a non-empty shell command line."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("a named check needs a command: a non-empty shell command line")
    if len(value) > COMMAND_MAX:
        raise InvalidInput(f"a named check's command is {len(value)} characters; the limit is {COMMAND_MAX}")
    return value.strip()


def path_spec(value: Any) -> str:
    """A named path's workspace: ``dir:/abs/path`` or ``worktree:/abs/repo`` (a bare absolute
    path means ``dir:``). Returns the normalized ``kind:path``."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("a named path needs a workspace: dir:/absolute/path or worktree:/absolute/repo")
    text = value.strip()
    if text.startswith("/"):
        text = "dir:" + text
    kind, path = model.workspace(text)
    if kind not in ("dir", "worktree") or not path:
        raise InvalidInput(f"invalid named path {value!r}: use dir:/absolute/path or worktree:/absolute/repo")
    return f"{kind}:{path}"


def check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with its ``checks`` and ``paths`` keys checked and normalized (raises
    ``InvalidInput``); the other keys are returned as they are."""
    out = dict(settings)
    for key, what, norm in (("checks", "check", check_command), ("paths", "path", path_spec)):
        if key not in out or out[key] is None:
            out.pop(key, None)
            continue
        value = out[key]
        if not isinstance(value, dict):
            raise InvalidInput(f"board setting {key!r} must be an object of name → "
                               + ("command" if key == "checks" else "workspace"))
        out[key] = {entry_name(str(k), what): norm(v) for k, v in value.items()}
    for spec in (out.get("paths") or {}).values():
        refuse_sensitive(spec.partition(":")[2], None)  # the agentboard home: when a task uses it
    return out


def host_settings_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """True when ``new`` board settings change the named checks or named paths of ``old``
    (changing them is an admin decision, like a raw command)."""
    return any((old.get(k) or {}) != (new.get(k) or {}) for k in HOST_SETTINGS)


def named(settings: Mapping[str, Any], key: str) -> dict[str, str]:
    value = settings.get(key)
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items() if isinstance(v, str)}


def board_checks(db: Database, board: str) -> dict[str, str]:
    """The board's named checks, ``{name: command}``."""
    return db.read(lambda tx: named(board_settings(tx, board), "checks"))


def board_paths(db: Database, board: str) -> dict[str, str]:
    """The board's named paths, ``{name: "dir:/abs" | "worktree:/abs"}``."""
    return db.read(lambda tx: named(board_settings(tx, board), "paths"))


# -- what a task asks for ----------------------------------------------------------------------------


def check_name(entry: str) -> str | None:
    """The name of a named check (``check:NAME``), or None for a raw command."""
    return entry[len(CHECK_PREFIX):].strip() if entry.startswith(CHECK_PREFIX) else None


def authorize(access: Access, *, verify: Iterable[str] | None = None, workspace: str | None = None,
              branch: str | None = None) -> None:
    """Refuse (``Forbidden``) what ``access`` may not decide about the host; a malformed
    workspace is ``InvalidInput`` first. Names and paths are checked when the task is written."""
    commands = [v for v in (verify or ()) if v and v.strip()]
    kind, _path = model.workspace(workspace)
    if access is Access.RUN:
        asked = [what for what, given in (("verify", commands), ("workspace", kind != "scratch"),
                                          ("branch", bool(branch))) if given]
        if asked:
            raise Forbidden(
                f"a run token's tasks carry no {', '.join(asked)}: what runs on the host and where "
                "is decided by a person; propose the task and a person sets it up")
        return
    if access is Access.ADMIN:
        return
    raw = [c for c in commands if check_name(c) is None]
    if raw:
        raise Forbidden(
            f"running a shell command on the host needs an admin token (not limited to a board): "
            f"{raw[0]!r}; pick a named check an admin configured on the board instead "
            f"(\"{CHECK_PREFIX}NAME\")")
    if kind in ("dir", "worktree") and _path is not None:
        raise Forbidden(
            f"choosing a workspace path ({kind}:{_path}) needs an admin token (not limited to a "
            f"board); pick a named path an admin configured on the board instead (\"{PATH_PREFIX}NAME\")")


def checked_verify(tx: Tx, board: str, verify: Iterable[str]) -> None:
    """Every ``check:NAME`` in ``verify`` names a check configured on ``board`` (else
    ``InvalidInput``)."""
    names = [n for n in (check_name(v) for v in verify) if n is not None]
    if not names:
        return
    checks = named(board_settings(tx, board), "checks")
    for name in names:
        if name not in checks:
            have = ", ".join(sorted(checks)) or "none"
            raise InvalidInput(f"board {board!r} has no named check {name!r} (it has: {have}); "
                               f"an admin adds one with `agentboard boards checks add {name} CMD`")


def placed(tx: Tx, board: str, kind: str, path: str | None) -> tuple[str, str | None]:
    """Where a task's workspace is, checked: ``path:NAME`` becomes the named path configured on
    ``board``; a ``dir:`` or ``worktree:`` path must not be a sensitive location."""
    if kind == "path":
        paths = named(board_settings(tx, board), "paths")
        if path not in paths:
            have = ", ".join(sorted(paths)) or "none"
            raise InvalidInput(f"board {board!r} has no named path {path!r} (it has: {have}); "
                               f"an admin adds one with `agentboard boards paths add {path} /absolute/path`")
        kind, path = model.workspace(path_spec(paths[path]))
    if kind in ("dir", "worktree") and path:
        refuse_sensitive(path, tx.db.settings.home)
    return kind, path


def refuse_sensitive(path: str, home: Path | None) -> None:
    why = sensitive_reason(Path(path), home)
    if why:
        raise InvalidInput(f"cannot use {path} as a workspace: {why}")


def resolve_checks(commands: Iterable[str], checks: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """``(label, command)`` for each verify entry: a raw command is its own label; a named check
    is labelled ``check:NAME`` and runs the board's current command (None when it is no longer
    configured)."""
    out: list[tuple[str, str | None]] = []
    for entry in commands:
        name = check_name(entry)
        out.append((entry, entry) if name is None else (f"{CHECK_PREFIX}{name}", checks.get(name)))
    return out


def decoded_verify(value: Any) -> list[str]:
    """A task's ``verify`` as stored (JSON text) or decoded (a list)."""
    if isinstance(value, str):
        value = json.loads(value or "[]")
    return [str(v) for v in value or []]


__all__ = [
    "CHECK_PREFIX", "HOST_SETTINGS", "PATH_PREFIX", "Access", "authorize", "board_checks",
    "board_paths", "check_command", "check_name", "check_settings", "checked_verify",
    "decoded_verify", "entry_name", "host_settings_changed", "path_spec", "placed",
    "resolve_checks", "sensitive_reason",
]
