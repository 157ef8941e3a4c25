"""Files attached to tasks, stored under the board folder (size-capped)."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

from ..domain import model
from ..domain.errors import Conflict, InvalidInput, NotFound, TooLarge
from ..store.engine import Database, Row, Tx
from .common import get_task


def attachments_dir(home: Path, board: str, task_id: str) -> Path:
    return home / "boards" / board / "attachments" / task_id


def attach(
    db: Database, board: str, task_id: str, source: str | os.PathLike[str], *, home: Path | None = None,
    name: str | None = None, max_bytes: int | None = None, actor: str | None = None,
    data: bytes | None = None,
) -> Row:
    """Copy ``source`` (or ``data``) next to the task and record it.

    ``home`` and ``max_bytes`` default to the database's settings (``home``,
    ``attachment_max_bytes``).
    """
    if home is None:
        home = db.settings.home
    if max_bytes is None:
        max_bytes = db.settings.attachment_max_bytes
    src = Path(source)
    fname = model.attachment_name(name or src.name)
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
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / fname
    if dest.resolve().parent != folder.resolve():
        raise InvalidInput(f"invalid attachment name {fname!r}")
    tmp = folder / f".{fname}.tmp{os.getpid()}"
    digest = hashlib.sha256()
    if data is None:
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            for chunk in iter(lambda: fin.read(1 << 20), b""):
                digest.update(chunk)
                fout.write(chunk)
    else:
        digest.update(data)
        tmp.write_bytes(data)

    def _w(tx: Tx) -> Row:
        get_task(tx, board, task_id)
        if tx.one("SELECT id FROM attachments WHERE task_id = :t AND name = :n", {"t": task_id, "n": fname}):
            raise Conflict(f"task {task_id} already has an attachment named {fname}")
        now = time.time()
        aid = tx.scalar(
            "INSERT INTO attachments (task_id, board, name, path, size, sha256, created_by, created_at) "
            "VALUES (:t, :b, :n, :p, :s, :h, :a, :now) RETURNING id",
            {"t": task_id, "b": board, "n": fname, "p": str(dest), "s": size, "h": digest.hexdigest(), "a": actor, "now": now},
        )
        tx.event(board, task_id, "attached", {"name": fname, "size": size}, actor=actor, at=now)
        return {"id": aid, "task_id": task_id, "name": fname, "path": str(dest), "size": size,
                "sha256": digest.hexdigest(), "created_at": now}

    try:
        out = db.write(_w)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    shutil.move(str(tmp), dest)
    return out


def list_attachments(db: Database, board: str, task_id: str) -> list[Row]:
    def _r(tx: Tx) -> list[Row]:
        get_task(tx, board, task_id)
        return tx.all("SELECT * FROM attachments WHERE task_id = :t ORDER BY id", {"t": task_id})
    return db.read(_r)
