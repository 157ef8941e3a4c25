"""Shared fixtures: a fresh home per test on SQLite, and a fresh PostgreSQL database when asked.

PostgreSQL tests use AGENTBOARD_TEST_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/test).
Locally an unreachable server skips them with a reason; under CI=true it fails them.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_URL = os.environ.get("AGENTBOARD_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _pg_admin_url() -> str:
    base, _, _db = PG_URL.rpartition("/")
    return base + "/postgres"


def pg_available() -> str | None:
    """None when the server answers, else the reason it does not."""
    try:
        import psycopg

        with psycopg.connect(PG_URL, connect_timeout=3):
            return None
    except Exception as exc:  # pragma: no cover - depends on the machine
        return f"PostgreSQL at {PG_URL} is unreachable: {exc}"


def require_pg() -> None:
    reason = pg_available()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(reason + " (CI=true: PostgreSQL tests must run)")
    pytest.skip(reason)


@pytest.fixture
def pg_database() -> Iterator[str]:
    """A fresh, empty PostgreSQL database; dropped afterwards. Yields its URL."""
    require_pg()
    import psycopg

    name = "ab_" + secrets.token_hex(6)
    with psycopg.connect(_pg_admin_url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = PG_URL.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(_pg_admin_url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh AGENTBOARD_HOME; the environment points at it (and at no worker identity)."""
    h = tmp_path / "home"
    monkeypatch.setenv("AGENTBOARD_HOME", str(h))
    for var in ("AGENTBOARD_DATABASE_URL", "AGENTBOARD_BOARD", "AGENTBOARD_TASK", "AGENTBOARD_RUN_ID",
                "AGENTBOARD_TOKEN", "AGENTBOARD_API_URL", "AGENTBOARD_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    return h


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test once on SQLite and once on PostgreSQL. Yields the database URL in use."""
    if request.param == "sqlite":
        yield f"sqlite:///{home / 'agentboard.db'}"
        return
    url = request.getfixturevalue("pg_database")
    monkeypatch.setenv("AGENTBOARD_DATABASE_URL", url)
    yield url


@pytest.fixture
def ab(backend: str, home: Path) -> Iterator[object]:
    """An open :class:`agentboard.client.Client` on the backend under test."""
    import agentboard

    client = agentboard.connect(str(home)) if backend.startswith("sqlite") else agentboard.connect(backend)
    client.settings.home = home
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def board(ab: object) -> object:
    return ab.board()  # type: ignore[attr-defined]
