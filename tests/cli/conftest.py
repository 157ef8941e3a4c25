"""CLI test helpers: run `agentboard ...` in-process against a real home, and read its database.

`cli(...)` goes through the real entry point (`agentboard.cli.main.main`), so usage errors,
kernel errors and exit codes are exactly what a user gets; only the process boundary is
skipped (the few end-to-end tests in test_subprocess.py cross it). Each test's home starts
from a copy of a freshly migrated database, which saves the migration per test.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from testenv import CliEntry, copy_template


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def lines(self) -> list[str]:
        return [line for line in self.out.splitlines() if line.strip()]


@pytest.fixture
def cli_home(home: Path, sqlite_template: Path) -> Path:
    copy_template(sqlite_template, home)
    (home / "boards").mkdir(exist_ok=True)
    return home


Runner = Callable[..., Result]


@pytest.fixture
def cli(cli_home: Path, monkeypatch: pytest.MonkeyPatch) -> Runner:
    """``cli("create", "x", input=None, env={...})`` → Result(code, out, err)."""
    for var in ("AGENTBOARD_PROFILE", "AGENTBOARD_ACTOR"):
        monkeypatch.delenv(var, raising=False)
    runner = CliRunner()

    def run(*args: str, input: str | None = None, env: dict[str, str | None] | None = None) -> Result:
        r = runner.invoke(CliEntry(), list(args), input=input, env=env, catch_exceptions=False)  # type: ignore[arg-type]
        return Result(r.exit_code, r.stdout, r.stderr)

    return run


def task_id(result: Result) -> str:
    assert result.code == 0, result.err
    return str(result.json()["id"])


@pytest.fixture
def counts(cli_home: Path) -> Callable[[], dict[str, int]]:
    """Row counts of the home's database: what "nothing was written" is checked against."""

    def read() -> dict[str, int]:
        with sqlite3.connect(cli_home / "agentboard.db") as conn:
            return {
                t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("tasks", "task_events", "task_runs", "task_links", "task_comments",
                          "profiles", "boards", "goals", "attachments")
            }

    return read


def assert_one_line_error(r: Result, code: int, *needles: str) -> None:
    assert r.code == code, (r.code, r.out, r.err)
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert len(lines) == 1, r.err
    assert lines[0].startswith("error: "), r.err
    assert "Traceback" not in r.err
    for n in needles:
        assert n.lower() in lines[0].lower(), (n, lines[0])
    assert r.out == ""
