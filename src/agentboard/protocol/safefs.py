"""File operations inside a workspace that a worker controls, safe against its links.

A worker owns everything beneath its workspace: it can replace any folder by a symbolic link to
somewhere else, any file by a link, a hard link to a file it may not read, a FIFO or a huge file.
The dispatcher and the server, which run with more rights than the worker, touch workspace files
only through this module:

- a folder chain beneath the workspace is opened one component at a time relative to a
  directory file descriptor, never following a link (``openat2`` with ``RESOLVE_BENEATH |
  RESOLVE_NO_SYMLINKS`` where the kernel has it, else ``O_NOFOLLOW | O_DIRECTORY`` per
  component); a link or a file where a folder belongs is removed and a real folder made
  (``create=True``), or the operation is refused (:class:`Unsafe`);
- a file is written as a fresh temporary file (``O_CREAT | O_EXCL | O_NOFOLLOW``) renamed over
  its name inside that folder: whatever was at the name (a link, a hard link) is replaced, never
  written through; in a folder the same call has just made, a free name is created with the same
  flags and written in place;
- a file is read with ``O_NOFOLLOW | O_NONBLOCK`` and only when it is a regular file with one
  link and at most ``limit`` bytes: a link, a hard link (it could be another user's file), a FIFO
  or a device is refused with a reason;
- a tree is removed by walking it through directory descriptors; links are unlinked, never
  crossed.

The workspace folder itself is the dispatcher's choice (its path is trusted); everything beneath
it is not. Only Linux and other POSIX systems with ``dir_fd`` support are served.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import stat
from pathlib import Path
from types import TracebackType
from typing import Any

BOARD_DIR = ".board"

#: the largest file the dispatcher reads back from a workspace unless told otherwise
READ_LIMIT = 4 * 1024 * 1024

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

# openat2(2): struct open_how {u64 flags; u64 mode; u64 resolve}
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "arm64": 437, "riscv64": 437, "ppc64le": 437, "s390x": 437}


class Unsafe(OSError):
    """A workspace path is not what the operation may touch (a link, a hard link, not a regular
    file, too large); the message says what and where."""


class NotAFolder(Unsafe):
    """A folder on the way beneath the workspace is a link or a file: the path does not exist as
    far as the dispatcher is concerned."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    if not os.uname().sysname == "Linux":
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - no C library to call
        return None


_openat2_ok: bool | None = None


def _openat2(dir_fd: int, rel: str, flags: int) -> int | None:
    """``openat2(dir_fd, rel, flags, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)``; None when the
    kernel (or the platform) has no ``openat2``; ``OSError`` as ``open`` raises it (a link on
    the way: ``ELOOP``; an escape: ``EXDEV``)."""
    global _openat2_ok
    if _openat2_ok is False:
        return None
    nr = _SYS_OPENAT2.get(platform.machine())
    libc = _libc()
    if nr is None or libc is None:
        _openat2_ok = False
        return None
    how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
    fd = libc.syscall(ctypes.c_long(nr), ctypes.c_int(dir_fd), ctypes.c_char_p(os.fsencode(rel)),
                      ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    if fd < 0:
        err = ctypes.get_errno()
        if err in (errno.ENOSYS, errno.EPERM) and _openat2_ok is None:  # no openat2 (or a seccomp filter)
            _openat2_ok = False
            return None
        _openat2_ok = True
        raise OSError(err, os.strerror(err), rel)
    _openat2_ok = True
    return int(fd)


def _parts(rel: str | os.PathLike[str]) -> list[str]:
    if isinstance(rel, str) and rel and "/" not in rel and "\0" not in rel:  # one plain name: the common case
        if rel == ".":
            return []
        if rel != "..":
            return [rel]
    parts = [p for p in Path(rel).parts if p not in ("", ".")]
    for p in parts:
        if p == ".." or "/" in p or p.startswith("/"):
            raise Unsafe(errno.EINVAL, f"{os.fspath(rel)!r} is not a path beneath the workspace")
    return parts


class Dir:
    """An open folder beneath a workspace: every operation is relative to its descriptor.

    Use as a context manager (the descriptor is closed on exit)."""

    def __init__(self, fd: int, path: Path, rel: tuple[str, ...] = ()):
        self.fd = fd
        self._base = path
        self._rel = rel
        self._path: Path | None = path if not rel else None
        #: what was removed because it stood where a folder or file of ours belongs
        self.removed: list[str] = []
        #: this folder was made empty by the call that opened it: no one else knows it yet
        self.fresh = False

    @property
    def path(self) -> Path:
        """Where this folder is (for messages; every operation goes through :attr:`fd`)."""
        if self._path is None:
            self._path = self._base.joinpath(*self._rel)
        return self._path

    # -- lifetime --------------------------------------------------------------------------------

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Dir:
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- folders ---------------------------------------------------------------------------------

    def sub(self, rel: str | os.PathLike[str], *, create: bool = False) -> Dir:
        """Open the folder ``rel`` beneath this one without following any link on the way.

        ``create``: make missing folders, and replace a link or a non-folder standing where a
        folder belongs (it is unlinked, never followed). Without it such a path raises
        :class:`Unsafe` (a missing one ``FileNotFoundError``)."""
        parts = _parts(rel)
        if not parts:
            return self._child(os.dup(self.fd))
        if not create:
            try:
                fd = _openat2(self.fd, "/".join(parts), _DIR_FLAGS)
            except FileNotFoundError:
                raise
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR):
                    raise NotAFolder(exc.errno, f"{self.path / os.path.join(*parts)} is reached through a "
                                            "link or a file, not folders; refused") from None
                raise
            if fd is not None:
                return self._child(fd, tuple(parts))
        fd = os.dup(self.fd)
        made = False
        try:
            for i, name in enumerate(parts):
                nfd, made = self._step(fd, parts[:i], name, create)
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        child = self._child(fd, tuple(parts))
        child.fresh = made
        return child

    def _child(self, fd: int, rel: tuple[str, ...] = ()) -> Dir:
        """The folder ``rel`` beneath this one, open as ``fd``."""
        d = Dir(fd, self._base, self._rel + rel)
        d._path = self._path if not rel else None
        d.removed = self.removed  # one account for the whole chain
        return d

    def _step(self, fd: int, above: list[str], name: str, create: bool) -> tuple[int, bool]:
        """The folder ``name`` in the folder ``fd`` (``above``: that one's path beneath this one)
        opened, and whether this call made it."""
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd), False
        except FileNotFoundError:
            if not create:
                raise
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            if not create:
                raise NotAFolder(exc.errno, f"{self.path.joinpath(*above, name)} is a link or a file, not a folder; refused") from None
            os.unlink(name, dir_fd=fd)  # a link (or a file) where our folder belongs: removed, not followed
            self.removed.append(str(self.path.joinpath(*above, name)))
        made = True
        try:
            os.mkdir(name, 0o755, dir_fd=fd)
        except FileExistsError:
            made = False
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd), made
        except OSError as exc:  # replaced again between mkdir and open: give up rather than follow
            raise Unsafe(exc.errno, f"{self.path.joinpath(*above, name)} keeps changing under the dispatcher; refused") from None

    # -- looking -----------------------------------------------------------------------------------

    def lstat(self, name: str) -> os.stat_result | None:
        """The entry ``name`` itself (a link is not followed), or None when there is none."""
        try:
            return os.stat(_name(name), dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def exists(self, name: str) -> bool:
        return self.lstat(name) is not None

    def is_file(self, name: str) -> bool:
        st = self.lstat(name)
        return st is not None and stat.S_ISREG(st.st_mode)

    # -- reading ---------------------------------------------------------------------------------

    def read_bytes(self, name: str, *, limit: int = READ_LIMIT) -> bytes | None:
        """The content of the regular file ``name``, or None when there is none. A link, a hard
        link (another name of the same file: it may be anyone's), a FIFO, a device or a file over
        ``limit`` bytes raises :class:`Unsafe` saying which."""
        try:
            fd = os.open(_name(name), _READ_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Unsafe(exc.errno, f"{self.path / name} is a symbolic link; it is not read") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise Unsafe(errno.EINVAL, f"{self.path / name} is not a regular file; it is not read")
            if st.st_nlink > 1:
                raise Unsafe(errno.EMLINK, f"{self.path / name} is hard-linked ({st.st_nlink} names for one file); "
                                           "it is not read")
            if st.st_size > limit:
                raise Unsafe(errno.EFBIG, f"{self.path / name} is {st.st_size} bytes, over the {limit}-byte limit; "
                                          "it is not read")
            chunks, left = [], limit + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            data = b"".join(chunks)
            if len(data) > limit:  # grew while read
                raise Unsafe(errno.EFBIG, f"{self.path / name} is over the {limit}-byte limit; it is not read")
            return data
        finally:
            os.close(fd)

    def read_text(self, name: str, *, limit: int = READ_LIMIT) -> str | None:
        data = self.read_bytes(name, limit=limit)
        return None if data is None else data.decode("utf-8", "replace")

    # -- writing ---------------------------------------------------------------------------------

    def write_bytes(self, name: str, data: bytes, *, mode: int = 0o644) -> None:
        """Write ``name`` atomically: a fresh temporary file renamed over it (whatever stood at
        the name — a link, a hard link — is replaced, never written through).

        In a folder this process has just made (:attr:`fresh`), where no one can be reading yet,
        a name that is still free is created and written in place (``O_EXCL | O_NOFOLLOW``: it
        fails if anything stands there, and then the file is written as above)."""
        name = _name(name)
        if self.fresh and self._write_new(name, data, mode):
            return
        tmp = f".{name}.tmp"
        try:
            fd = os.open(tmp, _NEW_FLAGS, mode, dir_fd=self.fd)
        except FileExistsError:  # a leftover, or something a worker planted: removed, never followed
            self.remove(tmp)
            fd = os.open(tmp, _NEW_FLAGS, mode, dir_fd=self.fd)
        try:
            _write_all(fd, data)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=self.fd)
            except OSError:
                pass
            raise

    def _write_new(self, name: str, data: bytes, mode: int) -> bool:
        """Create ``name`` with ``data``; False (nothing written) when something stands there."""
        try:
            fd = os.open(name, _NEW_FLAGS, mode, dir_fd=self.fd)
        except FileExistsError:
            return False
        try:
            _write_all(fd, data)
        except BaseException:
            try:
                os.unlink(name, dir_fd=self.fd)
            except OSError:
                pass
            raise
        return True

    def write_text(self, name: str, text: str, *, mode: int = 0o644) -> None:
        self.write_bytes(name, text.encode("utf-8"), mode=mode)

    def append_text(self, name: str, text: str, *, header: str = "", limit: int = READ_LIMIT) -> None:
        """Add ``text`` at the end of ``name`` (created with ``header`` first when missing): read
        as :meth:`read_bytes` reads and written again as :meth:`write_bytes` writes, so a link or
        a hard link at the name is replaced by our own file, never written through."""
        try:
            old = self.read_text(name, limit=limit)
        except Unsafe:
            old = None
            self.remove(name)
            self.removed.append(str(self.path / name))
        self.write_text(name, (header if old is None else old) + text)

    def rename(self, name: str, to: Dir, new_name: str) -> None:
        """Move the entry ``name`` (a link moves as a link) to ``to``/``new_name``."""
        os.rename(_name(name), _name(new_name), src_dir_fd=self.fd, dst_dir_fd=to.fd)

    # -- removing --------------------------------------------------------------------------------

    def remove(self, name: str) -> bool:
        """Remove the entry ``name`` whatever it is: a file or a link is unlinked (a link's target
        is untouched), a folder removed with everything in it, never crossing a link. False when
        there was nothing."""
        name = _name(name)
        try:
            os.unlink(name, dir_fd=self.fd)
            return True
        except FileNotFoundError:
            return False
        except IsADirectoryError:
            pass
        except PermissionError:  # Linux says EISDIR; others EPERM for a folder
            st = self.lstat(name)
            if st is None or not stat.S_ISDIR(st.st_mode):
                raise
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link meanwhile
                os.unlink(name, dir_fd=self.fd)
                return True
            raise
        with Dir(fd, self._base, self._rel + (name,)) as d:
            d.clear()
        os.rmdir(name, dir_fd=self.fd)
        return True

    def clear(self) -> None:
        """Remove everything in this folder (see :meth:`remove`)."""
        for entry in os.scandir(self.fd):
            self.remove(entry.name)


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, then close it."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _name(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise Unsafe(errno.EINVAL, f"{name!r} is not a plain file name")
    return name


def open_root(workspace: str | os.PathLike[str]) -> Dir:
    """The workspace folder itself (its path is the dispatcher's: trusted)."""
    path = workspace if isinstance(workspace, Path) else Path(workspace)
    return Dir(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), path)


def open_board(workspace: str | os.PathLike[str], *, create: bool = True) -> Dir:
    """The workspace's ``.board/`` folder; ``create``: made when missing, a link or a file in its
    place removed first."""
    with open_root(workspace) as root:
        return root.sub(BOARD_DIR, create=create)


def locate(path: str | os.PathLike[str]) -> tuple[Path, str, str]:
    """Split a workspace file path into (workspace, folder beneath it, file name): a path with a
    ``.board`` component belongs to the workspace above its last ``.board``; any other path is a
    file directly in the workspace (``<workspace>/.mcp.json``)."""
    p = Path(path)
    parts = p.parts
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == BOARD_DIR:
            return Path(*parts[:i]), "/".join(parts[i:-1]), parts[-1]
    return p.parent, "", p.name


def write_file(path: str | os.PathLike[str], data: str | bytes, *, mode: int = 0o644) -> None:
    """Write a workspace file named by its path (see :func:`locate`): the folders beneath the
    workspace are made or opened without following links, the file replaced atomically."""
    root_path, folder, name = locate(path)
    with open_root(root_path) as root, root.sub(folder, create=True) as d:
        d.write_bytes(name, data.encode("utf-8") if isinstance(data, str) else data, mode=mode)


def read_file(path: str | os.PathLike[str], *, limit: int = READ_LIMIT) -> bytes | None:
    """Read a workspace file named by its path (see :func:`locate` and :meth:`Dir.read_bytes`);
    None when it (or its folder) is missing; :class:`Unsafe` when a link or hard link is in the
    way."""
    root_path, folder, name = locate(path)
    try:
        with open_root(root_path) as root, root.sub(folder) as d:
            return d.read_bytes(name, limit=limit)
    except FileNotFoundError:
        return None


def remove(path: str | os.PathLike[str]) -> bool:
    """Remove a workspace entry named by its path (see :meth:`Dir.remove`)."""
    root_path, folder, name = locate(path)
    try:
        with open_root(root_path) as root, root.sub(folder) as d:
            return d.remove(name)
    except FileNotFoundError:
        return False


def exists(path: str | os.PathLike[str]) -> bool:
    """Whether a workspace entry exists, reached without following any link beneath the workspace."""
    root_path, folder, name = locate(path)
    try:
        with open_root(root_path) as root, root.sub(folder) as d:
            return d.exists(name)
    except (FileNotFoundError, Unsafe):
        return False


def exists_in(workspace: str | os.PathLike[str], rel: str) -> bool:
    """Whether ``rel`` exists beneath ``workspace``, reached without following any link."""
    folder, _, name = rel.rpartition("/")
    try:
        with open_root(workspace) as root, root.sub(folder) as d:
            return d.exists(name)
    except (FileNotFoundError, Unsafe):
        return False


def walk_chown(d: Dir, uid: int, gid: int) -> None:
    """Give ``uid:gid`` everything in ``d`` (and ``d`` itself) through descriptors: links and
    hard-linked files are left alone, folders are entered only through ``O_NOFOLLOW``."""
    os.chown(d.fd, uid, gid)
    for entry in os.scandir(d.fd):
        st = d.lstat(entry.name)
        if st is None or stat.S_ISLNK(st.st_mode):
            continue
        if stat.S_ISDIR(st.st_mode):
            try:
                sub = d.sub(entry.name)
            except (Unsafe, FileNotFoundError):
                continue
            with sub:
                walk_chown(sub, uid, gid)
        elif stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
            try:
                fd = os.open(entry.name, _READ_FLAGS, dir_fd=d.fd)
            except OSError:
                continue
            try:
                if os.fstat(fd).st_nlink == 1:
                    os.chown(fd, uid, gid)
            finally:
                os.close(fd)


def has_openat2() -> bool:
    """Whether ``openat2`` answered here (after the first folder chain was opened)."""
    return bool(_openat2_ok)


__all__ = ["BOARD_DIR", "READ_LIMIT", "Dir", "NotAFolder", "Unsafe", "exists", "exists_in", "has_openat2", "locate", "open_board",
           "open_root", "read_file", "remove", "walk_chown", "write_file"]


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def loads(data: str | bytes) -> Any:
    """JSON a worker may have written (``result.json``, a verdict, ``.mcp.json``): ``ValueError``
    for anything but plain JSON — invalid text (a :class:`json.JSONDecodeError`), ``NaN`` or
    ``Infinity``, or nesting deeper than the parser can follow (which would otherwise raise
    ``RecursionError`` out of every reader)."""
    import json

    try:
        return json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
