"""A `database_url` agentboard cannot open is refused like any other setting that is not valid:
exit 2 and one line naming the setting, what it must be and where it came from, before the
command does anything — never a driver's traceback, nor another database's URL read as a SQLite
file path; a password in it is never shown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MUST_BE = ("must be postgresql://USER@HOST[:PORT]/NAME (or postgresql+psycopg://…; PORT a number from 1 to 65535) "
           "or sqlite:///PATH")


def _agentboard(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`agentboard ARGS` in its own process, in the home's parent folder."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    full.update(AGENTBOARD_HOME=str(home), **env)
    return subprocess.run([sys.executable, "-m", "agentboard", *args], env=full, cwd=home.parent,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("url", "shown"), [
    ("postgressql://postgres@127.0.0.1/x", "postgressql://postgres@127.0.0.1/x"),
    ("postgresql://postgres:s3cret@127.0.0.1:abc/x", "postgresql://postgres:***@127.0.0.1:abc/x"),
    ("postgresql://postgres@127.0.0.1:99999/x", "postgresql://postgres@127.0.0.1:99999/x"),
    ("postgresql+psycopg2://postgres:s3cret@127.0.0.1/x", "postgresql+psycopg2://postgres:***@127.0.0.1/x"),
    ("mysql://x@y/z", "mysql://x@y/z"),
    ("/srv/agentboard/agentboard.db", "/srv/agentboard/agentboard.db"),
], ids=["misspelt-scheme", "port-not-a-number", "port-out-of-range", "other-driver", "other-database", "a-path"])
def test_a_database_url_agentboard_cannot_open_stops_the_command_naming_the_setting(tmp_path, url, shown):
    home = tmp_path / "home"
    out = _agentboard(home, "list", AGENTBOARD_DATABASE_URL=url)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        f"error: invalid setting database_url={shown!r}: {MUST_BE} (from AGENTBOARD_DATABASE_URL)"]
    assert "s3cret" not in out.stdout + out.stderr
    # nothing was created: no home, no SQLite file named after the URL
    assert not home.exists() and list(tmp_path.iterdir()) == []


def test_a_database_url_from_config_toml_is_refused_naming_the_file_and_hiding_its_password(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('database_url = "postgresql://agentboard:pa/ss@db.internal:5432x/agentboard"\n')
    out = _agentboard(home, "diagnostics")
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        "error: invalid setting database_url='postgresql://agentboard:***@db.internal:5432x/agentboard': "
        f"{MUST_BE} (from {home / 'config.toml'})"]
    assert "pa/ss" not in out.stderr and not (home / "agentboard.db").exists()


def test_a_listen_url_that_is_no_postgresql_url_is_refused_too(tmp_path):
    out = _agentboard(tmp_path / "home", "list", AGENTBOARD_PG_LISTEN_URL="sqlite:///listen.db")
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        "error: invalid setting pg_listen_url='sqlite:///listen.db': must be postgresql://USER@HOST[:PORT]/NAME "
        "(or postgresql+psycopg://…; PORT a number from 1 to 65535) (from AGENTBOARD_PG_LISTEN_URL)"]


def test_the_python_client_refuses_another_databases_url_instead_of_opening_it_as_a_sqlite_file(
        tmp_path, monkeypatch):
    import agentboard
    from agentboard.domain.errors import InvalidInput

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGENTBOARD_HOME", str(tmp_path / "home"))
    with pytest.raises(InvalidInput) as err:
        agentboard.connect("mysql://root:s3cret@db/board")
    assert str(err.value) == f"invalid database URL 'mysql://root:***@db/board': {MUST_BE}"
    assert err.value.exit_code == 2
    assert not (tmp_path / "root:s3cret@db").exists()  # no SQLite file named after the URL
