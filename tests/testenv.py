"""Test environments shared by the project's and the kernel suite's fixtures: a home folder
the environment points at, and scratch PostgreSQL databases.

PostgreSQL tests use AGENTBOARD_TEST_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/test).
Locally an unreachable server skips them with a reason; under CI=true it fails them.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


def wait_for(fn: Callable[[], Any], timeout: float = 120.0, what: str = "condition") -> Any:
    """Poll ``fn`` until it returns something truthy and return that; fail after ``timeout``.

    The one polling helper of the suite. The timeout is a generous bound against a hang, never a
    speed assertion.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def copy_template(template: Path, home: Path) -> Path:
    """Put a copy of the migrated SQLite ``template`` in ``home`` (created if missing)."""
    import shutil

    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, home / "agentboard.db")
    return home


#: the real agent CLIs from npm (``scripts/test`` installs them into ``.cache/agentclis``)
CLIS = Path(__file__).resolve().parents[1] / ".cache" / "agentclis" / "node_modules" / ".bin"


def real_cli(name: str) -> str:
    """The path of the real ``name`` CLI; skipped with the reason when it is missing (failed under
    ``CI=true``, where it must be there)."""
    path = CLIS / name
    if not path.exists():
        reason = f"the real {name} CLI is not installed in {CLIS.parent.parent} (scripts/test installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return str(path)


#: ``scripts/test --fast``: the edit-test loop; property tests take fewer examples
FAST = os.environ.get("AGENTBOARD_TEST_FAST") == "1"

PG_URL = os.environ.get("AGENTBOARD_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")


def pg_admin_url() -> str:
    """The server's maintenance database, from which test databases are created and dropped."""
    return PG_URL.rpartition("/")[0] + "/postgres"


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


@contextmanager
def scratch_database(*, template: str | None = None, prefix: str = "ab_") -> Iterator[str]:
    """A new database (empty, or a copy of ``template``), dropped on exit. Yields its name."""
    import psycopg

    name = prefix + secrets.token_hex(6)
    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    try:
        yield name
    finally:
        with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_url(name: str) -> str:
    return PG_URL.rpartition("/")[0] + "/" + name


def point_home_at(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``home`` the AGENTBOARD_HOME, with no database URL, board or worker identity set."""
    monkeypatch.setenv("AGENTBOARD_HOME", str(home))
    for var in ("AGENTBOARD_DATABASE_URL", "AGENTBOARD_BOARD", "AGENTBOARD_TASK", "AGENTBOARD_RUN_ID",
                "AGENTBOARD_TOKEN", "AGENTBOARD_API_URL", "AGENTBOARD_LLM_BASE_URL",
                "AGENTBOARD_LLM_MODEL", "AGENTBOARD_LLM_API_KEY", "AGENTBOARD_LLM_COMMAND", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
