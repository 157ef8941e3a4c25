"""PostgreSQL scale-out tests: every test here needs the server (``pytest -m postgres``) and gets
a fresh database copied from a migrated template."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/postgres/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture
def pg_url(pg_database: str) -> str:
    """A fresh, migrated PostgreSQL database of this test's own; its URL."""
    return pg_database


@pytest.fixture
def walinspect(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection to this test's database with ``pg_walinspect`` (skipped on a
    server built without the contrib modules): the WAL records the test's verbs wrote."""
    conn = psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True)
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
    except psycopg.Error as exc:  # pragma: no cover - a server built without the contrib modules
        conn.close()
        pytest.skip(f"pg_walinspect is not available: {exc}")
    yield conn
    conn.close()
