"""`agentboard diagnostics` on a database it cannot use names the fix its cause calls for: the
user and password for a refused sign-in (a role that does not exist, a wrong password), and an
upgrade of agentboard for a database a newer agentboard migrated — as every other verb says.
(A missing database and a server that refuses the connection: test_diagnostics.py.)

Each runs the real CLI in its own process against the real PostgreSQL server, except the wrong
password: the suite's server trusts 127.0.0.1 and never asks for one, so a server that refuses
the password as PostgreSQL does (``fakes/pg_refuses_password.py``) stands in for it; the client,
libpq through psycopg, words the error from the server's answer as it does for the real one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes.pg_refuses_password import RefusingPostgres
from testenv import PG_URL, require_pg

pytestmark = pytest.mark.postgres

CREDENTIALS = "check the user and password in database_url / AGENTBOARD_DATABASE_URL"


def _diagnostics(home: Path, url: str, *args: str) -> tuple[int, Any, str]:
    env = {**os.environ, "AGENTBOARD_HOME": str(home), "AGENTBOARD_DATABASE_URL": url}
    out = subprocess.run([sys.executable, "-m", "agentboard", "diagnostics", *args], env=env,
                         capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout, out.stderr


def _finding(home: Path, url: str) -> dict[str, Any]:
    code, out, err = _diagnostics(home, url, "--json")
    assert code == 6, err
    (f,) = json.loads(out)
    return dict(f)


def test_a_role_that_does_not_exist_is_told_to_check_the_user_not_to_create_the_database(tmp_path):
    require_pg()
    server = PG_URL.split("@", 1)[1]
    f = _finding(tmp_path / "home", f"postgresql://agentboard_no_such_role@{server}")
    assert f["kind"] == "database_unreachable" and f["severity"] == "error"
    assert 'role "agentboard_no_such_role" does not exist' in f["message"]
    assert f["fix"].startswith(CREDENTIALS) and "createdb" not in f["fix"]


def test_a_wrong_password_is_told_to_check_the_password_not_to_start_the_server(tmp_path):
    with RefusingPostgres() as pg:
        f = _finding(tmp_path / "home", pg.url("postgres", "wrong"))
    assert pg.refused and set(pg.refused) == {"postgres"}  # the client reached it and was refused
    assert 'password authentication failed for user "postgres"' in f["message"]
    assert f["kind"] == "database_unreachable" and f["fix"].startswith(CREDENTIALS)
    assert "start the database server" not in f["fix"] and "wrong" not in json.dumps(f)


def test_a_database_a_newer_agentboard_migrated_is_told_to_upgrade_agentboard_as_every_verb_says(
        tmp_path, pg_database):
    import psycopg

    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099'")
    home = tmp_path / "home"
    f = _finding(home, pg_database)
    assert f["kind"] == "database_newer_schema" and f["severity"] == "error"
    assert "does not answer" not in f["message"]
    assert "schema 0099, newer than this agentboard knows" in f["message"]
    assert f["fix"] == "upgrade agentboard on this host (docs/deploy.md, Upgrades)"
    # what `list` (and every other verb) says
    env = {**os.environ, "AGENTBOARD_HOME": str(home), "AGENTBOARD_DATABASE_URL": pg_database}
    other = subprocess.run([sys.executable, "-m", "agentboard", "list"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert other.returncode == 6 and "upgrade agentboard on this host" in other.stderr
    code, text, _ = _diagnostics(home, pg_database)
    assert code == 6 and text.splitlines() == [
        f"error: [database_newer_schema] database: {f['message']}",
        "  fix: upgrade agentboard on this host (docs/deploy.md, Upgrades)"]
