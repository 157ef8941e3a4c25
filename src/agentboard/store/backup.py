"""Online backups of a SQLite home and their restore, with SQLite's backup API.

A backup is a folder: ``agentboard.db`` (a consistent copy taken in one step of the backup API
while the dispatcher and the API keep writing: it is the database as of one moment), the boards'
attachment files, and ``config.toml`` when the home has one. PostgreSQL is backed up with
``pg_dump`` (see docs/operations.md).
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from ..domain.errors import Conflict, InvalidInput, NotFound

DB_NAME = "agentboard.db"


@dataclass
class BackupInfo:
    path: Path
    database: Path
    tasks: int
    events: int
    files: int
    integrity: str

    def as_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "database": str(self.database), "tasks": self.tasks,
                "events": self.events, "files": self.files, "integrity": self.integrity}


def _copy(src: Path, dest: Path) -> None:
    """Copy the database at ``src`` into ``dest`` in one step of the backup API (one read
    snapshot: writers go on in WAL mode and none of their later commits is half in the copy)."""
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=30)
    try:
        source.execute("PRAGMA busy_timeout = 30000")
        target = sqlite3.connect(dest)
        try:
            source.backup(target, pages=-1)
            target.execute("PRAGMA journal_mode = DELETE")
        finally:
            target.close()
    finally:
        source.close()


def check(path: Path) -> tuple[str, int, int]:
    """``PRAGMA integrity_check`` of a database file, and its task and event counts."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        integrity = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        tasks = int(conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0])
        events = int(conn.execute("SELECT COUNT(*) FROM task_events").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        return f"not a readable agentboard database ({exc})", 0, 0
    finally:
        conn.close()
    return integrity, tasks, events


def _copy_files(src_home: Path, dest: Path) -> int:
    n = 0
    for folder in sorted((src_home / "boards").glob("*/attachments")):
        rel = folder.relative_to(src_home)
        for f in folder.rglob("*"):
            if f.is_file() and not f.name.startswith(".upload-"):
                out = dest / rel / f.relative_to(folder)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, out)
                n += 1
    return n


def backup(home: Path, db_file: Path, dest: Path) -> BackupInfo:
    """Back up the home whose database is ``db_file`` into the new folder ``dest``."""
    if not db_file.is_file():
        raise NotFound(f"no database at {db_file}; nothing to back up")
    if dest.exists() and any(dest.iterdir()):
        raise Conflict(f"{dest} exists and is not empty; give a new folder")
    dest.mkdir(parents=True, exist_ok=True, mode=0o700)
    out = dest / DB_NAME
    _copy(db_file, out)
    out.chmod(0o600)
    files = _copy_files(home, dest)
    if (home / "config.toml").is_file():
        shutil.copy2(home / "config.toml", dest / "config.toml")
    integrity, tasks, events = check(out)
    return BackupInfo(dest, out, tasks, events, files, integrity)


def default_destination(home: Path) -> Path:
    return home / "backups" / time.strftime("%Y%m%dT%H%M%S", time.gmtime())


def restore(backup_dir: Path, home: Path, db_file: Path, *, keep_current: bool) -> BackupInfo:
    """Put the backup in ``backup_dir`` back as the home's database and attachment files. The
    current database, if any and ``keep_current``, is first copied to
    ``home/backups/pre-restore-<time>/``."""
    src = backup_dir / DB_NAME if backup_dir.is_dir() else backup_dir
    if not src.is_file():
        raise NotFound(f"no backup at {backup_dir} (expected {backup_dir / DB_NAME})")
    integrity, _, _ = check(src)
    if integrity != "ok":
        raise InvalidInput(f"{src} fails its integrity check ({integrity}); pick another backup")
    if keep_current and db_file.is_file():
        backup(home, db_file, home / "backups" / ("pre-restore-" + time.strftime("%Y%m%dT%H%M%S", time.gmtime())))
    home.mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    try:
        target = sqlite3.connect(db_file, timeout=30)
        try:
            source.backup(target, pages=-1)
        finally:
            target.close()
    finally:
        source.close()
    _rehome_attachments(db_file, home)
    files = 0
    if backup_dir.is_dir():
        boards = backup_dir / "boards"
        if boards.is_dir():
            for f in boards.rglob("*"):
                if f.is_file():
                    out = home / f.relative_to(backup_dir)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, out)
                    files += 1
    integrity, tasks, events = check(db_file)
    return BackupInfo(backup_dir, db_file, tasks, events, files, integrity)


def _rehome_attachments(db_file: Path, home: Path) -> None:
    """Point the attachment rows at their files under ``home`` (a backup restored into another
    home keeps working)."""
    conn = sqlite3.connect(db_file, timeout=30)
    try:
        rows = conn.execute("SELECT id, board, task_id, name FROM attachments").fetchall()
        conn.executemany("UPDATE attachments SET path = ? WHERE id = ?",
                         [(str(home / "boards" / b / "attachments" / t / n), i) for i, b, t, n in rows])
        conn.commit()
    finally:
        conn.close()


def has_tasks(db_file: Path) -> int:
    """How many tasks the database at ``db_file`` holds (0 when there is none)."""
    if not db_file.is_file():
        return 0
    return check(db_file)[1]
