"""A SQLite home whose database cannot be read (a damaged file, one that is not a database) is
not taken for a new one: every verb says in one line what is wrong and what to do (exit 6),
diagnostics names it, and the file is left as it was (no migration is tried on it)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AGENTBOARD_DATABASE_URL"}
    return subprocess.run([sys.executable, "-m", "agentboard", *args], env={**env, "AGENTBOARD_HOME": str(home)},
                          capture_output=True, text=True, timeout=120)


def test_a_database_file_that_is_not_a_database_is_refused_in_one_line_and_left_as_it_was(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    db = home / "agentboard.db"
    db.write_bytes(os.urandom(8192))
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for verb in (["list"], ["create", "a task"], ["export", "-o", str(tmp_path / "out.jsonl")]):
        out = _run(home, *verb)
        assert out.returncode == 6, (verb, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "sqlalche.me" not in out.stderr, out.stderr
        assert f"cannot read the database {db}: file is not a database" in lines[0]
        assert "restore a backup" in lines[0]
    out = _run(home, "diagnostics", "--json")
    assert out.returncode == 6, out.stderr
    (f,) = json.loads(out.stdout)
    assert f["kind"] == "database_unreadable" and f["fix"].endswith("restore a backup (agentboard restore DIR)")
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
