"""`agentboard diagnostics` through a real PgBouncer names the fix its answer calls for: a
PgBouncer that refuses agentboard's session settings (no ``pg_transaction_pooler``) is told to
set it, not to check the server; a database PgBouncer does not know is a missing database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .bouncer import pgbouncer


def _finding(home: Path, url: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "AGENTBOARD_PG_TRANSACTION_POOLER"}
    env.update(AGENTBOARD_HOME=str(home), AGENTBOARD_DATABASE_URL=url)
    out = subprocess.run([sys.executable, "-m", "agentboard", "diagnostics", "--json"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 6, out.stderr
    (f,) = json.loads(out.stdout)
    return dict(f)


def test_pgbouncer_refusing_the_session_settings_is_told_to_set_the_pooler_setting(pg_url: str, tmp_path):
    with pgbouncer(pg_url, 1) as url:
        f = _finding(tmp_path / "home", url)
    assert f["kind"] == "database_unreachable"
    assert "unsupported startup parameter" in f["message"] and "pooler" in f["message"]
    assert "AGENTBOARD_PG_TRANSACTION_POOLER=true" in f["fix"]
    assert "start the database server" not in f["fix"]


def test_a_database_pgbouncer_does_not_know_is_named_in_a_createdb_fix(pg_url: str, tmp_path):
    from sqlalchemy.engine import make_url

    from .bouncer import Bouncer

    bouncer = Bouncer(pg_url, 1)
    try:  # a pooler that knows one database by name, and answers any other with its own words
        server = make_url(pg_url)
        text = bouncer.ini.read_text().replace(
            "* = host=", f"{server.database} = dbname={server.database} host=", 1)
        bouncer.ini.write_text(text)
        bouncer.start()
        missing = make_url(bouncer.url).set(database="agentboard_no_such_db").render_as_string(hide_password=False)
        env = {**os.environ, "AGENTBOARD_PG_TRANSACTION_POOLER": "true", "AGENTBOARD_HOME": str(tmp_path / "home"),
               "AGENTBOARD_DATABASE_URL": missing}
        out = subprocess.run([sys.executable, "-m", "agentboard", "diagnostics", "--json"], env=env,
                             capture_output=True, text=True, timeout=120)
    finally:
        bouncer.close()
    assert out.returncode == 6, out.stderr
    (f,) = json.loads(out.stdout)
    assert f["kind"] == "database_unreachable" and "no such database" in f["message"]
    assert "createdb agentboard_no_such_db" in f["fix"]
