"""Bring a database to the current schema with Alembic; fast when it already is."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Settings
from ..domain.errors import Unavailable, one_line
from .engine import Database, Tx, create_sqlite_file, sqlite_file

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")
#: the newest revision in migrations/versions; a database at this revision needs nothing
HEAD = "0035"


def current_revision(db: Database) -> str | None:
    def _q(tx: Tx) -> str | None:
        value = tx.scalar("SELECT version_num FROM alembic_version")
        return None if value is None else str(value)

    try:
        return db.read(_q)
    except Unavailable:  # the server is unreachable, the disk full: say so, do not migrate
        raise
    except Exception as exc:
        if _no_version_table(exc):
            return None  # a new database: migrate it
        # a database that cannot be read is not a new one: migrating it would fail the same way,
        # later and with a driver's message (a damaged file, an exclusive lock, a failing disk)
        raise Unavailable(f"cannot read the database {_where(db)}: {one_line(getattr(exc, 'orig', None) or exc)}"
                          f"{_READ_ADVICE.get(_kind(exc), '')}") from exc


#: what to do, by what SQLite said (``_kind``)
_READ_ADVICE = {
    "not a database": "; the file is damaged or not agentboard's: restore a backup (agentboard restore DIR)",
    "locked": "; another process holds it locked: stop it, or wait and try again",
    "disk I/O error": "; the disk may be full or failing (df -h)",
    "readonly": "; its folder is read-only: give this user write access, or use another AGENTBOARD_HOME",
}


def _kind(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    for key in _READ_ADVICE:
        if key in text:
            return key
    return "readonly" if "read-only" in text or "readonly" in text.replace(" ", "") else ""


def _no_version_table(exc: BaseException) -> bool:
    """The error of reading ``alembic_version`` where it does not exist yet (SQLite's ``no such
    table``, PostgreSQL's ``undefined_table``), which only a new database gives."""
    orig = getattr(exc, "orig", None) or exc
    return "no such table" in str(orig) or getattr(orig, "sqlstate", None) == "42P01"


def _where(db: Database) -> str:
    return sqlite_file(db.url) if db.dialect == "sqlite" else db.engine.url.render_as_string(hide_password=True)


def _config() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


@contextlib.contextmanager
def _migration_lock(db: Database) -> Iterator[None]:
    if db.dialect == "sqlite":
        path = Path(sqlite_file(db.url))
        lock_path = path.with_name(path.name + ".migrate.lock")
        with open(lock_path, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
    else:
        import sqlalchemy as sa

        with db.engine.connect() as conn:
            # waiting for another process's migration is not a stuck statement
            conn.execute(sa.text("SET statement_timeout = 0"))
            conn.execute(sa.text("SELECT pg_advisory_lock(7340121)"))
            conn.commit()
            try:
                yield
            finally:
                conn.execute(sa.text("SELECT pg_advisory_unlock(7340121)"))
                conn.commit()


def upgrade(db: Database, revision: str = "head") -> None:
    from alembic import command

    cfg = _config()
    with db.engine.begin() as conn:
        if db.dialect == "postgresql":
            import sqlalchemy as sa

            # building an index on a large table may take longer than a kernel statement; the
            # lock timeout stays, so a migration waiting behind a long transaction fails (and is
            # retried by the next start) instead of queueing every writer behind it
            conn.execute(sa.text("SET LOCAL statement_timeout = 0"))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def known_revisions() -> set[str]:
    """The schema revisions this agentboard knows (its migrations' ids)."""
    return {p.name.split("_", 1)[0] for p in (MIGRATIONS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py")}


def _check_not_newer(current: str | None) -> None:
    """Refuse a database a newer agentboard migrated: this one cannot know its schema."""
    if current is not None and current not in known_revisions():
        raise Unavailable(f"this database is at schema {current}, newer than this agentboard knows (up to "
                          f"{HEAD}): upgrade agentboard on this host (docs/deploy.md, Upgrades)")


def ensure_schema(db: Database) -> None:
    current = current_revision(db)
    if current == HEAD:
        return
    _check_not_newer(current)
    with _migration_lock(db):
        current = current_revision(db)
        if current != HEAD:
            _check_not_newer(current)
            upgrade(db)


def open_database(url: str, *, settings: Settings | None = None, migrate: bool = True) -> Database:
    """Open (and if needed create or upgrade) the database at ``url``; its verbs follow
    ``settings`` (the defaults of :class:`agentboard.config.Settings` when not given)."""
    if url.startswith("sqlite:///"):
        create_sqlite_file(Path(sqlite_file(url)))
    db = Database(url, settings=settings)
    if migrate:
        ensure_schema(db)
    return db
