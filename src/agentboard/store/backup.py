"""Online backups of a SQLite home and their restore, with SQLite's backup API.

A backup is a folder: ``agentboard.db`` (a consistent copy taken in one step of the backup API
while the dispatcher and the API keep writing: it is the database as of one moment), the boards'
attachment files, the home's task-graph templates (``templates/``), and ``config.toml`` when the
home has one. PostgreSQL is backed up with ``pg_dump`` (see docs/operations.md).

A failed backup (a full disk, a folder it cannot write) removes what it wrote: the folder it
made, or what it put in the empty folder it was given, so the same command works once there is
room. The default folder ``HOME/backups/<UTC time>`` takes a ``-2``, ``-3``... suffix when two
backups start in the same second.

A restore refuses a backup whose schema revision this agentboard does not know (one a newer
agentboard migrated: upgrade first); an older one is accepted and migrated by the next command.
It trusts nothing in the folder it is given: every row's ids, slugs and names must have
the domain's formats (``transfer.check_row``) before anything is replaced, only regular files
are copied (links and hard-linked files are skipped), each only to its one place
(``boards/SLUG/attachments/TASK/NAME``, ``templates/NAME.toml``), written beneath the home
without following links (``store.files``).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..domain import model
from ..domain.errors import Conflict, InvalidInput, NotFound, Unavailable
from . import files
from .engine import disk_full
from .transfer import check_row, tables

DB_NAME = "agentboard.db"


@dataclass
class BackupInfo:
    path: Path
    database: Path
    tasks: int
    events: int
    files: int
    integrity: str
    templates: int = 0
    #: a restore: the backup's ``config.toml``, left where it is (settings are the operator's to
    #: take: a database URL, notification targets, a worker's environment), or None
    config_left: Path | None = None

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"path": str(self.path), "database": str(self.database), "tasks": self.tasks,
                                  "events": self.events, "files": self.files, "templates": self.templates,
                                  "integrity": self.integrity}
        if self.config_left is not None:
            out["config_left"] = str(self.config_left)
        return out


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


def _attachment_parts(parts: tuple[str, ...]) -> tuple[str, ...] | None:
    """``parts`` (relative to ``boards/``) when they are ``SLUG/attachments/TASK/NAME`` with
    each in its domain format; ``None`` otherwise."""
    if len(parts) != 4 or parts[1] != "attachments" or parts[3].startswith((".upload-", ".import-")):
        return None
    slug, _, task, name = parts
    try:
        check_row("attachments", {"board": slug, "task_id": task, "name": name})
    except InvalidInput:
        return None
    return parts


def _template_name(parts: tuple[str, ...]) -> str | None:
    if len(parts) != 1 or not parts[0].endswith(".toml"):
        return None
    return parts[0] if model.TEMPLATE_NAME_RE.match(parts[0].removesuffix(".toml")) else None


#: ``progress(phase, done, total)`` of a backup or a restore (``total`` None: not counted)
Progress = Callable[[str, int, "int | None"], None]


def _copy_tree(src: Path, dest: Path, pick, mode: int = 0o600,  # type: ignore[no-untyped-def]
               progress: Progress | None = None) -> int:
    """Copy the regular files below ``src`` that ``pick`` keeps to the same places below ``dest``
    (written beneath it, never through a link); how many."""
    n = 0
    for parts, path in files.walk_regular(src):
        kept = pick(parts)
        if kept is None:
            continue
        data = files.read_regular(path)
        if data is None:
            continue
        rel = kept if isinstance(kept, tuple) else (kept,)
        files.write_beneath(dest, (src.name, *rel[:-1]), rel[-1], data, mode=mode)
        n += 1
        if progress is not None:
            progress(f"copying {src.name}", n, None)
    return n


def _copy_files(src_home: Path, dest: Path, progress: Progress | None = None) -> int:
    return _copy_tree(src_home / "boards", dest, _attachment_parts, progress=progress)


def _copy_templates(src_home: Path, dest: Path, progress: Progress | None = None) -> int:
    return _copy_tree(src_home / "templates", dest, _template_name, mode=0o644, progress=progress)


def backup(home: Path, db_file: Path, dest: Path | None = None, progress: Progress | None = None, *,
           prefix: str = "") -> BackupInfo:
    """Back up the home whose database is ``db_file`` into the new (or empty) folder ``dest``;
    ``None``: a new folder ``home/backups/<prefix><UTC time>`` (with a suffix when that name is
    taken). On any failure what the backup wrote is removed again."""
    if not db_file.is_file():
        raise NotFound(f"no database at {db_file}; nothing to back up")
    target = dest if dest is not None else home / "backups" / (prefix + _stamp())
    claimed = False  # only what this backup claimed is ever removed
    try:
        if dest is None:
            target = _new_folder(home / "backups", prefix + _stamp())
            made = [target]
        else:
            made = _claim(dest)
        claimed = True
        return _backup_into(home, db_file, target, progress)
    except BaseException as exc:
        if claimed:
            _discard(target, made)
        if disk_full(exc):
            raise Unavailable(f"the disk holding {target} is full: the backup could not be written (what it "
                              "wrote is removed); free some space there and try again") from None
        if isinstance(exc, OSError):
            raise Unavailable(f"cannot write the backup to {target}: {exc.strerror or exc} (what it wrote "
                              "is removed)") from None
        raise


def _backup_into(home: Path, db_file: Path, dest: Path, progress: Progress | None) -> BackupInfo:
    out = dest / DB_NAME
    if progress is not None:
        progress("copying the database", 0, 1)
    _copy(db_file, out)
    out.chmod(0o600)
    if progress is not None:
        progress("copying the database", 1, 1)
    copied = _copy_files(home, dest, progress)
    templates = _copy_templates(home, dest, progress)
    if (home / "config.toml").is_file():
        shutil.copy2(home / "config.toml", dest / "config.toml")
    integrity, tasks, events = check(out)
    return BackupInfo(dest, out, tasks, events, copied, integrity, templates)


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime())


def _new_folder(parent: Path, name: str) -> Path:
    """Create and return a new folder ``parent/name``, or ``name-2``, ``name-3``... when taken
    (``mkdir`` is the claim: two backups in the same second never share a folder)."""
    parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    for n in range(1, 1000):
        path = parent / (name if n == 1 else f"{name}-{n}")
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        return path
    raise Conflict(f"{parent} already holds 999 backups named {name}*; give a folder")


def _claim(dest: Path) -> list[Path]:
    """Make ``dest`` ready for a backup (a new folder, or an empty one); the folders this created,
    ``dest`` first, then its parents."""
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise Conflict(f"{dest} exists and is not a folder; give a new folder")
    if dest.exists() and any(dest.iterdir()):
        raise Conflict(f"{dest} exists and is not empty; give a new folder")
    missing: list[Path] = []
    p = dest
    while not os.path.lexists(p) and p != p.parent:
        missing.append(p)
        p = p.parent
    dest.mkdir(parents=True, exist_ok=True, mode=0o700)
    return missing


def _discard(dest: Path, made: list[Path]) -> None:
    """Remove what a failed backup wrote: ``dest`` and the parents it created (``made``), or, when
    ``dest`` was an empty folder already, everything now in it."""
    if made and made[0] == dest:
        shutil.rmtree(dest, ignore_errors=True)
        for parent in made[1:]:
            try:
                parent.rmdir()
            except OSError:
                break
        return
    try:
        entries = list(dest.iterdir())
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink()
        except OSError:
            pass


def restore(backup_dir: Path, home: Path, db_file: Path, *, keep_current: bool,
            progress: Progress | None = None) -> BackupInfo:
    """Put the backup in ``backup_dir`` back as the home's database and attachment files. The
    current database, if any and ``keep_current``, is first copied to
    ``home/backups/pre-restore-<time>/``."""
    src = backup_dir / DB_NAME if backup_dir.is_dir() else backup_dir
    try:
        regular = stat.S_ISREG(os.lstat(src).st_mode)
    except OSError:
        regular = False
    if not regular:
        raise NotFound(f"no backup at {backup_dir} (expected the file {backup_dir / DB_NAME}, not a link)")
    integrity, _, _ = check(src)
    if integrity != "ok":
        raise InvalidInput(f"{src} fails its integrity check ({integrity}); pick another backup")
    check_schema(src)
    check_rows(src)
    if keep_current and db_file.is_file():
        backup(home, db_file, prefix="pre-restore-")
    home.mkdir(parents=True, exist_ok=True)
    if progress is not None:
        progress("restoring the database", 0, 1)
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
    if progress is not None:
        progress("restoring the database", 1, 1)
    copied = templates = 0
    if backup_dir.is_dir():
        copied = _copy_files(backup_dir, home, progress)
        templates = _copy_templates(backup_dir, home, progress)
    integrity, tasks, events = check(db_file)
    config = backup_dir / "config.toml"
    left = config if backup_dir.is_dir() and config.is_file() and not config.is_symlink() else None
    return BackupInfo(backup_dir, db_file, tasks, events, copied, integrity, templates, config_left=left)


def schema_of(path: Path) -> str | None:
    """The schema revision (``alembic_version``) of the database file at ``path``; None when it
    records none."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.DatabaseError:
        return None
    finally:
        conn.close()
    return None if row is None or row[0] is None else str(row[0])


def check_schema(path: Path) -> None:
    """Refuse a backup whose schema this agentboard does not know (a newer agentboard migrated
    it: every command would refuse the home after the restore). An older schema is accepted: the
    next command migrates it."""
    from .migrate import HEAD, known_revisions

    rev = schema_of(path)
    if rev is None:
        raise InvalidInput(f"{path} records no schema revision (no alembic_version row); it is not an "
                           "agentboard backup. Nothing was restored")
    if rev in known_revisions():
        return
    try:
        newer = int(rev) > int(HEAD)
    except ValueError:
        newer = False
    if newer:
        raise InvalidInput(f"{path} comes from a newer agentboard (schema {rev}, this one knows up to {HEAD}); "
                           "upgrade agentboard before restoring it. Nothing was restored")
    raise InvalidInput(f"{path} is at schema {rev!r}, which this agentboard does not know (it knows up to "
                       f"{HEAD}). Nothing was restored")


def check_rows(path: Path) -> None:
    """Refuse a backup whose database holds a row with an id, slug or name out of the domain's
    formats (a task id ``../../x`` would put its attachments anywhere)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for t in tables():
            if t.name not in present:
                continue
            have = {r[1] for r in conn.execute(f"PRAGMA table_info({t.name})")}
            cols = [c for c in t.columns.keys() if c in have]
            for r in conn.execute(f"SELECT {', '.join(chr(34) + c + chr(34) for c in cols)} FROM {t.name}"):  # noqa: S608
                try:
                    check_row(t.name, dict(r))
                except InvalidInput as exc:
                    raise InvalidInput(f"{path} is refused: {exc.message}; nothing was restored") from None
    finally:
        conn.close()


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
