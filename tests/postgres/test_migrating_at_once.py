"""Hosts that find the schema behind migrate it once, whatever is between them and the server: the
migration holds a transaction-scoped advisory lock and changes its session's settings with ``SET
LOCAL``, so behind PgBouncer in transaction mode (where every transaction may get another server
session, and a session outlives its client) several processes migrating at once all succeed, one
migrating and the others waiting for it, and nothing of it stays on a pooled server session. A
migration stopped by ``lock_timeout`` says in one line what to do (exit 6) and changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from testenv import database_url, require_pg, scratch_database

from agentboard.store import migrate
from agentboard.store.engine import Database

from .bouncer import pgbouncer


@pytest.fixture
def old_db() -> Iterator[str]:
    """A database of its own, migrated only to 0020 (an older version's schema); its URL."""
    require_pg()
    with scratch_database(prefix="ab_old_") as name:
        url = database_url(name)
        db = Database(url)
        migrate.upgrade(db, "0020")
        db.close()
        yield url


def _agentboard(url: str, home: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    home.mkdir(parents=True, exist_ok=True)
    full = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    full.update(AGENTBOARD_HOME=str(home), AGENTBOARD_DATABASE_URL=url, **env)
    return subprocess.Popen([sys.executable, "-m", "agentboard", *args], env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def _advisory_locks(url: str) -> int:
    with psycopg.connect(_plain(url), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
                           "WHERE l.locktype = 'advisory' AND d.datname = current_database()").fetchone()
        return int(row[0]) if row else 0


def test_four_hosts_migrating_at_once_through_pgbouncer_all_start_and_no_lock_is_left_behind(
        old_db: str, tmp_path: Path) -> None:
    with pgbouncer(old_db, 3) as url:
        procs = [_agentboard(url, tmp_path / f"h{i}", "list", "--json", AGENTBOARD_PG_TRANSACTION_POOLER="true")
                 for i in range(4)]
        outs = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, [err for _out, err in outs]
        assert [err for _out, err in outs] == [""] * 4  # e.g. DuplicateColumn: column "shard" … already exists
        assert _advisory_locks(old_db) == 0  # no pooled server session keeps the migration's lock
        later = _agentboard(url, tmp_path / "later", "list", "--json", AGENTBOARD_PG_TRANSACTION_POOLER="true")
        assert later.communicate(timeout=120)[1] == "" and later.returncode == 0
    db = Database(old_db)
    assert migrate.current_revision(db) == migrate.HEAD
    db.close()


def test_a_migration_through_pgbouncer_leaves_the_roles_timeouts_on_the_pooled_session(
        old_db: str, tmp_path: Path) -> None:
    # behind a transaction pooler the per-session limits are the role's (docs/deploy.md)
    name = old_db.rsplit("/", 1)[1]
    with psycopg.connect(_plain(old_db), autocommit=True) as conn:
        conn.execute(f'ALTER ROLE CURRENT_USER IN DATABASE "{name}" SET statement_timeout = \'30s\'')
        conn.execute(f'ALTER ROLE CURRENT_USER IN DATABASE "{name}" SET lock_timeout = \'7s\'')
    try:
        with pgbouncer(old_db, 1) as url:  # one server session: every client gets the one the migration had
            proc = _agentboard(url, tmp_path / "h", "list", "--json", AGENTBOARD_PG_TRANSACTION_POOLER="true")
            assert proc.communicate(timeout=120)[1] == "" and proc.returncode == 0
            with psycopg.connect(_plain(url), autocommit=True, prepare_threshold=None) as conn:
                row = conn.execute("SELECT current_setting('statement_timeout'), current_setting('lock_timeout')"
                                   ).fetchone()
            assert row == ("30s", "7s")
            assert _advisory_locks(old_db) == 0
    finally:
        with psycopg.connect(_plain(old_db), autocommit=True) as conn:
            conn.execute(f'ALTER ROLE CURRENT_USER IN DATABASE "{name}" RESET ALL')
    db = Database(old_db)
    assert migrate.current_revision(db) == migrate.HEAD
    db.close()


def test_a_migration_behind_a_long_transaction_fails_in_one_line_saying_to_run_it_again(
        tmp_path: Path) -> None:
    require_pg()
    with scratch_database(prefix="ab_old_") as name:
        url = database_url(name)
        db = Database(url)
        migrate.upgrade(db, "0032")  # 0033 rebuilds the tasks table: it needs it to itself
        db.close()
        with psycopg.connect(_plain(url)) as long:  # a report reading the tasks, left open
            long.execute("SELECT count(*) FROM tasks")
            holder = long.info.backend_pid
            proc = _agentboard(url, tmp_path / "h", "init", AGENTBOARD_PG_LOCK_TIMEOUT="1")
            out, err = proc.communicate(timeout=120)
            long.rollback()
        assert proc.returncode == 6, err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert "waited 1s (lock_timeout) for a table lock" in lines[0] and "run it again" in lines[0], lines[0]
        assert f"pid {holder}" in lines[0], lines[0]
        assert "sqlalche.me" not in err and "[SQL:" not in err
        db = Database(url)
        assert migrate.current_revision(db) == "0032"  # nothing of it was kept
        db.close()
        again = _agentboard(url, tmp_path / "h", "init")
        assert again.communicate(timeout=120)[1] == "" or again.returncode == 0
        assert again.returncode == 0
