"""How big the files of agentboard's own git work are, read without loading a file or a blob.

A worker may leave a file of any size in its worktree (a sparse file of gigabytes costs it no
disk). Two things agentboard does with git would load such a file whole, with the dispatcher's
or the server's rights and memory: committing what a worker left uncommitted (``git add`` reads,
hashes and stores it in the target's objects) and showing a task's diff (``git diff`` reads both
sides of every changed file into memory: about 2 GB of memory and ten seconds for a 2 GB file,
each time someone opens the diff). So

- agentboard commits on a worker's behalf only files of at most :data:`COMMIT_MAX` bytes
  (``dispatch.integrate.commit_pending``: a larger one is left in the worktree, said so, and its
  integration is refused naming it);
- a diff (:func:`diff`) lists a changed file of more than :data:`SHOWN_MAX` bytes (on either
  side) with its size and a note, its text left out, as git does with a binary file.

Sizes come from ``git diff --raw`` (object names and modes only), ``git cat-file --batch-check``
(an object's size, read from its header) and ``lstat`` of working-tree files (never following a
link). This module imports nothing of agentboard: :mod:`agentboard.gitsafe` uses it, and every git
call here is made through the ``git`` function its caller passes (a protected ``gitsafe`` call).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: the largest file agentboard commits on a worker's behalf (bytes)
COMMIT_MAX = 50 * 1024 * 1024
#: the largest file (either side of a change) whose text a diff shows (bytes)
SHOWN_MAX = 10 * 1024 * 1024
#: a git call: ``git(*args, input=None)`` (check off: the caller looks at the return code)
Git = Callable[..., "subprocess.CompletedProcess[str]"]
_NULL = frozenset({"0" * 40, "0" * 64})


def human(size: int) -> str:
    """``size`` bytes for a person: ``512 bytes``, ``12.5 MiB``, ``2.0 GiB``."""
    if size < 1024:
        return f"{size} bytes"
    value, units = size / 1024, ["KiB", "MiB", "GiB", "TiB"]
    while value >= 1024 and len(units) > 1:
        value, units = value / 1024, units[1:]
    return f"{value:.1f} {units[0]}".replace(".0 ", " ")


def shown_name(name: str) -> str:
    """``name`` as a diff header may hold it: quoted when it has control characters or quotes."""
    if any(ord(c) < 32 or ord(c) == 127 or c in '"\\' for c in name):
        return json.dumps(name)
    return name


def parent_fd(root: Path, name: str) -> tuple[int, str] | None:
    """An open descriptor of the folder holding ``name`` (relative to ``root``) and its last
    part, each folder on the way opened without following a link — a worker that swaps one for
    a symbolic link meanwhile makes the open fail, never lets a read leave its worktree. None for
    a name with ``.``/``..`` parts; OSError when a folder is not there. The caller closes it."""
    parts = [p for p in name.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        return None
    dirfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
            os.close(dirfd)
            dirfd = nxt
    except OSError:
        os.close(dirfd)
        raise
    return dirfd, parts[-1]


def worktree_size(root: Path, name: str) -> int | None:
    """The size of the file ``name`` (relative to ``root``), read without following a link
    (:func:`parent_fd`); a symbolic link's own size; None when it is not there (or not a file)."""
    try:
        found = parent_fd(root, name)
        if found is None:
            return None
        dirfd, leaf = found
        try:
            st = os.lstat(leaf, dir_fd=dirfd)
        finally:
            os.close(dirfd)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode) else None


def too_big(root: Path, names: Iterable[str], limit: int = COMMIT_MAX) -> list[tuple[str, int]]:
    """The files of ``names`` under ``root`` larger than ``limit`` bytes, with their sizes."""
    out = []
    for name in names:
        size = worktree_size(root, name)
        if size is not None and size > limit:
            out.append((name, size))
    return out


def blob_sizes(git: Git, shas: Iterable[str]) -> dict[str, int]:
    """The size of each object named (``git cat-file --batch-check``: its header only)."""
    wanted = sorted({s for s in shas if s and s not in _NULL})
    if not wanted:
        return {}
    proc = git("cat-file", "--batch-check=%(objectname) %(objectsize)", input="\n".join(wanted) + "\n")
    sizes = {}
    for line in proc.stdout.splitlines():
        sha, _, size = line.partition(" ")
        if size.isdigit():
            sizes[sha] = int(size)
    return sizes


@dataclass(frozen=True)
class Change:
    """One changed path of ``git diff --raw``: its modes, object names and status letter."""

    path: str
    old_mode: str
    new_mode: str
    old: str
    new: str
    status: str


def changes(git: Git, args: Sequence[str], specs: Sequence[str] = ()) -> list[Change]:
    """The changed paths of ``git diff --raw <args> -- <specs>`` (no rename detection, so no
    content is read). A working-tree side git has not hashed has a null object name."""
    proc = git("diff", "--raw", "-z", "--no-abbrev", "--no-renames", "--no-ext-diff", "--no-textconv",
               *args, "--", *(specs or [":(top)"]))
    if proc.returncode not in (0, 1):
        return []
    fields = proc.stdout.split("\0")
    out = []
    for i in range(0, len(fields) - 1, 2):
        head, path = fields[i].split(" "), fields[i + 1]
        if len(head) >= 5 and head[0].startswith(":"):
            out.append(Change(path, head[0][1:], head[1], head[2], head[3], head[4][:1]))
    return out


def oversized(git: Git, found: Sequence[Change], *, root: Path | None = None,
              limit: int = SHOWN_MAX) -> list[tuple[Change, int, int]]:
    """The changes of ``found`` with a side larger than ``limit`` bytes, with both sides' sizes
    (0 for a side that does not exist); a working-tree side (null object name) is measured under
    ``root``. Submodules are left alone."""
    blobs = blob_sizes(git, [s for c in found if "160000" not in (c.old_mode, c.new_mode) for s in (c.old, c.new)])
    out = []
    for c in found:
        if "160000" in (c.old_mode, c.new_mode):
            continue
        old = blobs.get(c.old, 0)
        new = blobs.get(c.new, 0)
        if c.new in _NULL and c.new_mode != "000000" and root is not None:
            new = worktree_size(root, c.path) or 0
        if max(old, new) > limit:
            out.append((c, old, new))
    return out


def note(path: str, old: int, new: int, limit: int = SHOWN_MAX, *, status: str = "M", mode: str = "") -> str:
    """The diff section of a file too big to show: its header, then a line saying its size (a
    ``# …`` line ending in "not shown", which ``dispatch.diffs.split`` lists as binary)."""
    name = shown_name(path)
    head = f"diff --git a/{name} b/{name}\n"
    if status == "A":
        head += f"new file mode {mode or '100644'}\n"
        size = human(new)
    elif status == "D":
        head += f"deleted file mode {mode or '100644'}\n"
        size = human(old)
    else:
        size = f"{human(old)} before, {human(new)} now"
    return head + f"# {name}: {size}, more than the {human(limit)} a diff shows: its text is not shown\n"


def diff(git: Git, args: Sequence[str], specs: Sequence[str] = (), *, root: Path | None = None,
         limit: int = SHOWN_MAX) -> str:
    """``git diff <args> -- <specs>`` as text, each file of more than ``limit`` bytes left out of
    it (never loaded) and listed at the end with its size (:func:`note`). ``root``: the working
    tree, when one side of the diff is it."""
    big = oversized(git, changes(git, args, specs), root=root, limit=limit)
    left_out = [f":(top,literal,exclude){c.path}" for c, _, _ in big]
    proc = git("diff", "--no-ext-diff", "--no-textconv", "--no-color", *args, "--",
               *(specs or [":(top)"]), *left_out)
    text = proc.stdout if proc.returncode in (0, 1) else ""
    for c, old, new in big:
        text += note(c.path, old, new, limit, status=c.status, mode=c.new_mode if c.status == "A" else c.old_mode)
    return text


__all__ = ["COMMIT_MAX", "SHOWN_MAX", "Change", "blob_sizes", "changes", "diff", "human", "note", "oversized",
           "shown_name", "too_big", "worktree_size"]
