"""Files written beneath the home by import and restore, never through a link.

Every folder below the home is opened relative to its parent's descriptor with ``O_NOFOLLOW``
(created first when missing), and the file is written as a temporary file in that folder and
renamed over the name, relative to the same descriptor: a symbolic link planted anywhere on the
way (``boards/x -> /etc``, ``attachments/t_1 -> ~/.ssh``, a link in place of the file itself)
makes the write fail or replaces the link itself; nothing is ever written outside the home.
Names are single path components (no ``/``, not ``.`` or ``..``), checked here too.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..domain.errors import InvalidInput, Unavailable

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def component(name: str) -> str:
    """``name`` when it is one plain path component."""
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\x00" in name:
        raise InvalidInput(f"invalid file or folder name {str(name)[:60]!r}")
    return name


@contextlib.contextmanager
def folder_beneath(root: Path, parts: Sequence[str], *, create: bool = True) -> Iterator[int]:
    """A descriptor of ``root/parts[0]/parts[1]/…``, each folder opened without following a
    link (and created 0700 when missing and ``create``). ``root`` itself is the home."""
    fd = os.open(root, _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
    try:
        for part in parts:
            component(part)
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise Unavailable(f"cannot use {root.joinpath(*parts)}: {part} is not a plain folder "
                                  f"({exc.strerror})") from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def same_content(dir_fd: int, name: str, data: bytes) -> bool:
    """Whether ``name`` in the folder is a regular file (not a link) holding ``data``."""
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=dir_fd)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.digest() == hashlib.sha256(data).digest()
    finally:
        os.close(fd)


def write_beneath(root: Path, parts: Sequence[str], name: str, data: bytes, *, mode: int = 0o600) -> Path:
    """Write ``data`` as ``root/parts…/name`` (see the module doc); its path. Unchanged (and not
    rewritten) when the same bytes are already there."""
    component(name)
    with folder_beneath(root, parts) as dfd:
        if same_content(dfd, name, data):
            return root.joinpath(*parts, name)
        tmp = f".import-{secrets.token_hex(8)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    return root.joinpath(*parts, name)


def read_regular(path: Path, limit: int | None = None) -> bytes | None:
    """The bytes of ``path`` when it is a regular file with one link, opened without following
    a link in its last component; ``None`` otherwise (a link, a folder, a hard link to
    something else)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or (limit is not None and st.st_size > limit):
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def walk_regular(root: Path) -> Iterator[tuple[tuple[str, ...], Path]]:
    """Every regular file below ``root`` as ``(parts relative to root, path)``, without
    entering or returning links (a link to a folder or a file is skipped)."""
    try:
        if stat.S_ISLNK(os.lstat(root).st_mode) or not root.is_dir():
            return
    except OSError:
        return
    for folder, dirs, names in os.walk(root, followlinks=False):
        base = Path(folder)
        dirs[:] = sorted(d for d in dirs if not (base / d).is_symlink())
        for n in sorted(names):
            p = base / n
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                yield p.relative_to(root).parts, p
