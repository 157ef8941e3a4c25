"""PostgreSQL scale-out tests: every test here needs the server (``pytest -m postgres``) and gets
a fresh database copied from a migrated template."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from testenv import database_url, require_pg, scratch_database

import agentboard


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/postgres/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    require_pg()
    with scratch_database(prefix="ab_tmpl_") as name:
        agentboard.connect(database_url(name)).close()
        yield name


@pytest.fixture
def pg_url(pg_template: str) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database of this test's own; its URL."""
    with scratch_database(template=pg_template) as name:
        yield database_url(name)
