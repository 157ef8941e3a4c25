"""Files attached to tasks, stored under the board folder (size-capped)."""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
import time
from pathlib import Path

from ..domain import model
from ..domain.errors import Conflict, InvalidInput, NotFound, TooLarge, Unavailable
from ..store.engine import Database, Row, Tx
from .common import get_task


def attachments_dir(home: Path, board: str, task_id: str) -> Path:
    return home / "boards" / board / "attachments" / task_id


#: a plain, printable file name (no control, bidirectional or zero-width characters)
attachment_name = model.attachment_name


def attach(
    db: Database, board: str, task_id: str, source: str | os.PathLike[str], *, home: Path | None = None,
    name: str | None = None, max_bytes: int | None = None, actor: str | None = None,
    data: bytes | None = None,
) -> Row:
    """Copy ``source`` (or ``data``) next to the task and record it.

    Each call writes its own temporary file in the task's folder (so concurrent uploads never
    share one), flushes it to disk, and renames it into place inside the write transaction that
    records it: the row is committed only once the file is there, and a refused or failed call
    leaves neither a row without its file nor a temporary file. A full disk is
    :class:`Unavailable`.

    ``home`` and ``max_bytes`` default to the database's settings (``home``,
    ``attachment_max_bytes``).
    """
    if home is None:
        home = db.settings.home
    if max_bytes is None:
        max_bytes = db.settings.attachment_max_bytes
    src = Path(source)
    fname = attachment_name(name or src.name)
    if data is None:
        if not src.is_file():
            raise NotFound(f"no file {src}")
        size = src.stat().st_size
    else:
        size = len(data)
    if size > max_bytes:
        raise TooLarge(f"{fname} is {size} bytes; the attachment limit is {max_bytes} bytes")
    db.read(lambda tx: get_task(tx, board, task_id))
    folder = attachments_dir(home, board, task_id)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _disk_error(exc) from None
    dest = folder / fname
    if dest.resolve().parent != folder.resolve():
        raise InvalidInput(f"invalid attachment name {fname!r}")
    digest = hashlib.sha256()
    placed = False
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=".upload-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise _disk_error(exc) from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fout:
            if data is None:
                with open(src, "rb") as fin:
                    for chunk in iter(lambda: fin.read(1 << 20), b""):
                        digest.update(chunk)
                        fout.write(chunk)
            else:
                digest.update(data)
                fout.write(data)
            fout.flush()
            os.fsync(fout.fileno())
            inode = os.fstat(fout.fileno()).st_ino

        def _w(tx: Tx) -> Row:
            nonlocal placed
            get_task(tx, board, task_id, lock=True)  # uploads to one task: one at a time
            if tx.one("SELECT id FROM attachments WHERE task_id = :t AND name = :n", {"t": task_id, "n": fname}):
                raise Conflict(f"task {task_id} already has an attachment named {fname}")
            if not placed:  # the task's row is locked: no other upload of this name runs now
                os.replace(tmp, dest)
                placed = True
                _fsync_dir(folder)
            now = time.time()
            aid = tx.scalar(
                "INSERT INTO attachments (task_id, board, name, path, size, sha256, created_by, created_at) "
                "VALUES (:t, :b, :n, :p, :s, :h, :a, :now) RETURNING id",
                {"t": task_id, "b": board, "n": fname, "p": str(dest), "s": size, "h": digest.hexdigest(),
                 "a": actor, "now": now},
            )
            tx.event(board, task_id, "attached", {"name": fname, "size": size}, actor=actor, at=now)
            return {"id": aid, "task_id": task_id, "name": fname, "path": str(dest), "size": size,
                    "sha256": digest.hexdigest(), "created_at": now}

        return db.write(_w)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if placed:
            _unlink_if_ours(dest, inode)
        if isinstance(exc, OSError):
            raise _disk_error(exc) from None
        raise


def _disk_error(exc: OSError) -> Exception:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return Unavailable(f"the disk is full: cannot store the attachment ({exc.strerror})")
    return exc


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_if_ours(path: Path, inode: int) -> None:
    """Remove ``path`` if it is still the file this call put there."""
    try:
        if path.stat().st_ino == inode:
            path.unlink()
    except FileNotFoundError:
        pass


def list_attachments(db: Database, board: str, task_id: str) -> list[Row]:
    def _r(tx: Tx) -> list[Row]:
        get_task(tx, board, task_id)
        return tx.all("SELECT * FROM attachments WHERE task_id = :t ORDER BY id", {"t": task_id})
    return db.read(_r)


def remove_attachment(db: Database, board: str, task_id: str, which: str | int, *, home: Path | None = None,
                      actor: str | None = None) -> Row:
    """Remove one attachment (by id or by name): its row, then its file. Event ``detached``."""
    folder = attachments_dir(home if home is not None else db.settings.home, board, task_id)

    def _w(tx: Tx) -> Row:
        get_task(tx, board, task_id)
        key = str(which)
        row = None
        if key.isdigit():
            row = tx.one("SELECT * FROM attachments WHERE task_id = :t AND id = :i", {"t": task_id, "i": int(key)})
        if row is None:
            row = tx.one("SELECT * FROM attachments WHERE task_id = :t AND name = :n", {"t": task_id, "n": key})
        if row is None:
            raise NotFound(f"task {task_id} has no attachment {key!r} (see: agentboard attachments {task_id})")
        tx.execute("DELETE FROM attachments WHERE id = :i", {"i": row["id"]})
        tx.event(board, task_id, "detached", {"name": row["name"], "id": row["id"]}, actor=actor)
        return row

    row = db.write(_w)
    path = Path(row["path"])
    try:  # only a file in the task's own folder is removed
        if path.resolve().parent == folder.resolve():
            path.unlink(missing_ok=True)
    except OSError:
        pass
    return {**row, "removed": True}
