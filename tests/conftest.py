"""Shared fixtures: a fresh home per test on SQLite, and a fresh PostgreSQL database when asked.

The suite migrates one template database per backend per test process (``sqlite_template``,
``pg_template``) and gives each test a copy: a copied SQLite file, ``CREATE DATABASE …
TEMPLATE`` on PostgreSQL (made one test ahead and dropped behind, ``testenv.TemplateCopies``). ``tests/kernel/test_migrations.py`` covers migrating a new database.

PostgreSQL tests use AGENTBOARD_TEST_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/test).
Locally an unreachable server skips them with a reason; under CI=true it fails them.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.fake_openai import FakeOpenAI
from testenv import (
    TemplateCopies,
    copy_template,
    database_url,
    point_home_at,
    require_pg,
    scratch_database,
)

#: test files whose tests run for tens of seconds each (real agent CLIs, whole tours, the kernel
#: state machine): collected first, so a parallel run starts them early instead of leaving one
#: worker alone with one of them at its end
LONG_FIRST = ("tests/test_install.py", "tests/api/test_schema_fuzz.py", "tests/agents_e2e/",
              "tests/dispatch/test_adapters_real.py", "tests/test_readme_tour.py",
              "tests/test_docs_examples.py", "tests/kernel/test_state_machine.py")


def _worker_cgroup_folders() -> set[Path]:
    """The folders of workers' cgroups (``agentboard.cgroups``) beside this process's cgroup."""
    from agentboard.cgroups import _own_cgroup

    own = _own_cgroup()
    try:
        return set(own.glob("agentboard-*")) if own is not None else set()
    except OSError:
        return set()


_cgroups_before: set[Path] = set()


def pytest_sessionstart(session: pytest.Session) -> None:
    global _cgroups_before
    _cgroups_before = _worker_cgroup_folders()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The suite's homes come and go: the cgroup folders their dispatchers made (empty by now)
    are removed once every test process is done (by the one that started them, or alone)."""
    if hasattr(session.config, "workerinput"):
        return
    for folder in _worker_cgroup_folders() - _cgroups_before:
        for run in folder.glob("run-*"):
            try:
                run.rmdir()
            except OSError:
                pass
        try:
            folder.rmdir()
        except OSError:
            pass


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the long-running files (:data:`LONG_FIRST`) to the front; the order stays otherwise."""
    items.sort(key=lambda item: not item.nodeid.startswith(LONG_FIRST))


@pytest.fixture
def fake_llm(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """An OpenAI-compatible server on loopback (:class:`fakes.fake_openai.FakeOpenAI`) that the
    environment points the board's LLM at: ``AGENTBOARD_LLM_BASE_URL``,
    ``AGENTBOARD_LLM_MODEL=fake-model``, ``AGENTBOARD_LLM_API_KEY=sk-test``."""
    with FakeOpenAI() as server:
        monkeypatch.setenv("AGENTBOARD_LLM_BASE_URL", server.url)
        monkeypatch.setenv("AGENTBOARD_LLM_MODEL", "fake-model")
        monkeypatch.setenv("AGENTBOARD_LLM_API_KEY", "sk-test")
        monkeypatch.delenv("AGENTBOARD_LLM_COMMAND", raising=False)
        yield server


@pytest.fixture(scope="session")
def sqlite_template() -> Iterator[Path]:
    """A migrated SQLite database file (its log checkpointed), to copy into homes."""
    import agentboard

    folder = Path(tempfile.mkdtemp(prefix="ab-template-"))
    agentboard.connect(str(folder)).close()
    db = folder / "agentboard.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    yield db
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """A migrated PostgreSQL database, the template of every test's own."""
    import agentboard

    require_pg()
    with scratch_database(prefix="ab_tmpl_") as name:
        agentboard.connect(database_url(name)).close()
        yield name


@pytest.fixture(scope="session")
def pg_copies(pg_template: str) -> Iterator[TemplateCopies]:
    """Copies of the template, made ahead of the tests that take them and dropped behind."""
    copies = TemplateCopies(pg_template)
    yield copies
    copies.close()


@pytest.fixture
def pg_database(pg_copies: TemplateCopies) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database of this test's own; dropped afterwards. Yields its URL."""
    name = pg_copies.take()
    try:
        yield database_url(name)
    finally:
        pg_copies.give_back(name)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh AGENTBOARD_HOME; the environment points at it (and at no worker identity)."""
    h = tmp_path / "home"
    point_home_at(h, monkeypatch)
    return h


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test once on SQLite and once on PostgreSQL, on a migrated copy of the template.
    Yields the database URL in use."""
    if request.param == "sqlite":
        if not (home / "agentboard.db").exists():
            copy_template(request.getfixturevalue("sqlite_template"), home)
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
