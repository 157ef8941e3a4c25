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
    import sqlalchemy as sa
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")
#: the newest revision in migrations/versions; a database at this revision needs nothing
HEAD = "0038"


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


#: the PostgreSQL advisory lock a migration holds for its transaction: one process migrates, the
#: others wait for its commit and then find nothing to do
MIGRATION_LOCK = 7340121


@contextlib.contextmanager
def _file_lock(db: Database) -> Iterator[None]:
    """SQLite: one migration at a time, across processes (a lock file beside the database)."""
    path = Path(sqlite_file(db.url))
    lock_path = path.with_name(path.name + ".migrate.lock")
    with open(lock_path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pg_take_lock(conn: sa.Connection) -> str:
    """In the migration's own transaction: wait for any other process's migration, then hold
    :data:`MIGRATION_LOCK` until this transaction ends.

    Everything here lasts only as long as the transaction (``pg_advisory_xact_lock``, ``SET
    LOCAL``), so behind PgBouncer in transaction mode, where each transaction may get another
    server session and a session outlives its client, no lock and no setting is left on a
    pooled session for another client to find. Waiting for another migration is not a stuck
    statement and not a lock on the board's rows: no statement timeout while it lasts, and no
    lock timeout for the wait itself; the migration's own statements then wait at most the
    session's ``lock_timeout`` for a table lock (and fail rather than queue every writer behind a
    long transaction), and run without a statement timeout (an index build on a large table may
    take longer than a kernel statement). Returns that ``lock_timeout`` (``10s``)."""
    import sqlalchemy as sa

    conn.execute(sa.text("SET LOCAL statement_timeout = 0"))
    lock_timeout = conn.execute(sa.text("SELECT current_setting('lock_timeout')")).scalar()
    conn.execute(sa.text("SET LOCAL lock_timeout = 0"))
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
    conn.execute(sa.text("SELECT set_config('lock_timeout', :v, true)"), {"v": str(lock_timeout)})
    return str(lock_timeout)


def _revision_on(conn: sa.Connection) -> str | None:
    """The schema revision as the migration's transaction sees it (None: a new database)."""
    import sqlalchemy as sa

    if conn.execute(sa.text("SELECT to_regclass('alembic_version')")).scalar() is None:
        return None
    value = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    return None if value is None else str(value)


def _restamp_branch_0020(conn: sa.Connection) -> None:
    """A database stamped ``0020`` by the first release of that migration, whose parent was
    0016, holds none of 0017–0019 (races, rollups, chat), which the released 0020 follows: it is
    stamped 0016 again, so they run, then 0020 (which finds what it made already there)."""
    import sqlalchemy as sa

    found = sa.inspect(conn)
    if not found.has_table("alembic_version") or found.has_table("run_rollups"):
        return
    if conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() != "0020":
        return
    conn.execute(sa.text("UPDATE alembic_version SET version_num = '0016'"))


def _run_alembic(conn: sa.Connection, revision: str) -> None:
    from alembic import command

    _restamp_branch_0020(conn)
    cfg = _config()
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, revision)


def _migrate_pg(db: Database, revision: str, *, only_if_behind: bool) -> None:
    """One transaction: the lock, then (``only_if_behind``: unless another process has brought
    the schema to :data:`HEAD` meanwhile) every migration up to ``revision``."""
    import sqlalchemy as sa

    before: str | None = None
    waits = "lock_timeout"
    try:
        with db.engine.begin() as conn:
            waits = f"{_pg_take_lock(conn)} (lock_timeout)"
            before = _revision_on(conn)
            if only_if_behind:
                if before == HEAD:
                    return  # another process migrated while this one waited for the lock
                _check_not_newer(before)
            _run_alembic(conn, revision)
    except sa.exc.DBAPIError as exc:
        _migration_failed(db, exc, before, revision, waits)
        raise


def upgrade(db: Database, revision: str = "head") -> None:
    """Migrate ``db`` to ``revision`` (under the migration lock: one process at a time)."""
    if db.dialect == "postgresql":
        _migrate_pg(db, revision, only_if_behind=False)
        return
    with db.engine.begin() as conn:
        _run_alembic(conn, revision)


def _migration_failed(db: Database, exc: BaseException, before: str | None, revision: str, waits: str) -> None:
    """A migration the server stopped becomes one line saying what to do (:class:`Unavailable`,
    exit 6: try again), never a driver's dump: a table lock it waited ``lock_timeout`` for (a
    long transaction ahead of it), a statement or connection that ended. Nothing of it was kept
    (it is one transaction). Any other error is left as it is."""
    orig = getattr(exc, "orig", None) or exc
    state = getattr(orig, "sqlstate", None)
    target = HEAD if revision == "head" else revision
    what = f"the migration of this database from {before or 'nothing'} to {target}"
    if state == "55P03":  # lock_not_available: lock_timeout
        statement = one_line(getattr(exc, "statement", "") or "")
        at = f" ({statement[:80]}{'…' if len(statement) > 80 else ''})" if statement else ""
        raise Unavailable(f"{what} waited {waits} for a table lock{at} that another transaction holds"
                          f"{_oldest_transaction(db)}; nothing was changed: run it again once that "
                          "transaction has ended (agentboard init; docs/deploy.md, Upgrades)") from None
    if state == "40P01":  # deadlock_detected
        raise Unavailable(f"{what} deadlocked with another transaction; nothing was changed: run it again "
                          "(agentboard init)") from None
    from .engine import _raise_unavailable

    try:
        _raise_unavailable(orig)
    except Unavailable as unavailable:
        raise Unavailable(f"{what} stopped: {unavailable.message}; nothing was changed: run it again "
                          "(agentboard init)") from None


def _oldest_transaction(db: Database) -> str:
    """``": the oldest open one is pid N (open M s, idle in transaction)"``, or nothing when it
    cannot be told (the transaction that blocked the migration is most often that one)."""
    import sqlalchemy as sa

    try:
        with db.engine.connect() as conn:
            row = conn.execute(sa.text(
                "SELECT pid, EXTRACT(EPOCH FROM now() - xact_start) AS age, state FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL "
                "ORDER BY xact_start LIMIT 1")).first()
    except Exception:
        return ""
    if row is None:
        return ""
    return f": the oldest open one is pid {row.pid} (open {float(row.age):.0f} s, {row.state})"


def known_revisions() -> set[str]:
    """The schema revisions this agentboard knows (its migrations' ids)."""
    return {p.name.split("_", 1)[0] for p in (MIGRATIONS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py")}


def _check_not_newer(current: str | None) -> None:
    """Refuse a database a newer agentboard migrated: this one cannot know its schema."""
    if current is not None and current not in known_revisions():
        raise Unavailable(f"this database is at schema {current}, newer than this agentboard knows (up to "
                          f"{HEAD}): upgrade agentboard on this host (docs/deploy.md, Upgrades)")


def ensure_schema(db: Database) -> None:
    """Bring ``db`` to :data:`HEAD` unless it is there (one query then); a database a newer
    agentboard migrated is refused (:class:`Unavailable`, exit 6)."""
    current = current_revision(db)
    if current == HEAD:
        return
    _check_not_newer(current)
    if db.dialect == "postgresql":
        _migrate_pg(db, "head", only_if_behind=True)
        return
    with _file_lock(db):
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
