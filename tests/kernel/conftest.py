"""Kernel-suite fixtures: the same ``home``/``pg_database`` as the project's, but started from a
migrated template (a copied SQLite file; ``CREATE DATABASE … TEMPLATE`` on PostgreSQL), so each
test does not pay for running the migrations. ``test_migrations.py`` covers fresh databases.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from testenv import database_url, point_home_at, require_pg, scratch_database

import agentboard


@pytest.fixture(scope="session")
def sqlite_template() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="ab-template-"))
    agentboard.connect(str(folder)).close()
    yield folder / "agentboard.db"
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_template: Path) -> Path:
    h = tmp_path / "home"
    point_home_at(h, monkeypatch)
    h.mkdir(parents=True)
    shutil.copyfile(sqlite_template, h / "agentboard.db")
    return h


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    require_pg()
    with scratch_database(prefix="ab_tmpl_") as name:
        agentboard.connect(database_url(name)).close()
        yield name


@pytest.fixture
def pg_database(pg_template: str) -> Iterator[str]:
    with scratch_database(template=pg_template) as name:
        yield database_url(name)
