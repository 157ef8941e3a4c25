"""PostgreSQL scale-out tests: every test here needs the server (``pytest -m postgres``) and gets
a fresh database copied from a migrated template."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/postgres/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture
def pg_url(pg_database: str) -> str:
    """A fresh, migrated PostgreSQL database of this test's own; its URL."""
    return pg_database
