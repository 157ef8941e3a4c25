"""A database a newer agentboard migrated is refused with what to do, not an Alembic traceback
(a host rolled back after an upgrade, or an old host restarted during a rolling upgrade)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path


def test_a_database_at_a_newer_schema_says_to_upgrade_agentboard_and_is_left_as_it_is(cli_home: Path) -> None:
    db = cli_home / "agentboard.db"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099'")
    env = {**os.environ, "AGENTBOARD_HOME": str(cli_home)}
    env.pop("AGENTBOARD_DATABASE_URL", None)
    out = subprocess.run([sys.executable, "-m", "agentboard", "list"], env=env, capture_output=True, text=True,
                         timeout=120)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 6 and len(lines) == 1, out.stderr
    assert "schema 0099, newer than this agentboard knows" in lines[0] and "upgrade agentboard" in lines[0]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == ("0099",)
