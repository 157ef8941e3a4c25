"""Kernel-suite fixtures: the same ``home``/``pg_database`` as the project's, but started from a
migrated template (a copied SQLite file; ``CREATE DATABASE … TEMPLATE`` on PostgreSQL), so each
test does not pay for running the migrations. ``test_migrations.py`` covers fresh databases.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentboard

PG_URL = os.environ.get("AGENTBOARD_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _pg_admin_url() -> str:
    return PG_URL.rpartition("/")[0] + "/postgres"


def require_pg() -> None:
    try:
        import psycopg

        with psycopg.connect(PG_URL, connect_timeout=3):
            return
    except Exception as exc:
        reason = f"PostgreSQL at {PG_URL} is unreachable: {exc}"
    if os.environ.get("CI") == "true":
        pytest.fail(reason + " (CI=true: PostgreSQL tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def sqlite_template() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="ab-template-"))
    agentboard.connect(str(folder)).close()
    yield folder / "agentboard.db"
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_template: Path) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("AGENTBOARD_HOME", str(h))
    for var in ("AGENTBOARD_DATABASE_URL", "AGENTBOARD_BOARD", "AGENTBOARD_TASK", "AGENTBOARD_RUN_ID",
                "AGENTBOARD_TOKEN", "AGENTBOARD_API_URL", "AGENTBOARD_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    h.mkdir(parents=True)
    shutil.copyfile(sqlite_template, h / "agentboard.db")
    return h


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    require_pg()
    import psycopg

    name = "ab_tmpl_" + secrets.token_hex(5)
    with psycopg.connect(_pg_admin_url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = PG_URL.rpartition("/")
    agentboard.connect(f"{base}/{name}").close()
    yield name
    with psycopg.connect(_pg_admin_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_database(pg_template: str) -> Iterator[str]:
    import psycopg

    name = "ab_" + secrets.token_hex(6)
    with psycopg.connect(_pg_admin_url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    base, _, _ = PG_URL.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(_pg_admin_url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
