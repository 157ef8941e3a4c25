"""Progress bars of the long verbs: shown on a terminal (a real pseudo-terminal here), never
when the output is piped or with --json, and the verbs' output is the same either way."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from testenv import copy_template

import agentboard

BAR = "━"  # rich's bar


def env_for(home: Path) -> dict[str, str]:
    return {**os.environ, "AGENTBOARD_HOME": str(home), "TERM": "xterm-256color", "COLUMNS": "120"}


def on_terminal(home: Path, *args: str, stdout_piped: bool = False) -> tuple[str, str]:
    """Run `agentboard ARGS` with stderr (and stdout unless ``stdout_piped``) on a pseudo-terminal;
    (what the terminal showed, what went to the stdout pipe)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "agentboard", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE if stdout_piped else slave, stderr=slave, env=env_for(home))
    os.close(slave)
    shown = bytearray()
    piped = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal's other end closed: the process is gone
            break
        if not chunk:
            break
        shown += chunk
    if stdout_piped and proc.stdout is not None:
        piped = proc.stdout.read()
    assert proc.wait(timeout=300) == 0, shown.decode(errors="replace")
    os.close(master)
    return shown.decode(errors="replace"), piped.decode()


def piped(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "agentboard", *args], capture_output=True, text=True,
                       env=env_for(home), timeout=300)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture
def board_home(home: Path, sqlite_template: Path) -> Path:
    ab = agentboard.connect(str(copy_template(sqlite_template, home)))
    try:
        b = ab.board()
        for i in range(40):
            b.create(f"task {i}")
    finally:
        ab.close()
    return home


def test_export_and_import_show_a_bar_on_a_terminal_and_none_when_piped(board_home: Path, tmp_path: Path) -> None:
    shown, _ = on_terminal(board_home, "export", "-o", str(tmp_path / "a.jsonl"))
    assert "exporting" in shown and BAR in shown and "rows" in shown
    r = piped(board_home, "export", "-o", str(tmp_path / "b.jsonl"))
    assert BAR not in r.stderr and "exporting" not in r.stderr and "\x1b" not in r.stderr
    assert r.stderr.startswith("exported ") and len(r.stderr.strip().splitlines()) == 1

    fresh = tmp_path / "fresh"
    shown, _ = on_terminal(fresh, "import", str(tmp_path / "a.jsonl"))
    assert "importing" in shown and BAR in shown
    assert "imported " in shown
    other = tmp_path / "other"
    r = piped(other, "import", str(tmp_path / "a.jsonl"))
    assert r.stdout.startswith("imported ") and len(r.stdout.strip().splitlines()) == 1
    assert BAR not in r.stdout + r.stderr and "\x1b" not in r.stdout + r.stderr
    assert r.stderr == ""


def test_an_export_to_a_pipe_keeps_its_data_clean_while_the_terminal_shows_the_bar(board_home: Path) -> None:
    shown, data = on_terminal(board_home, "export", stdout_piped=True)
    assert "exporting" in shown and BAR in shown
    plain = piped(board_home, "export").stdout
    lines, plain_lines = data.splitlines(), plain.splitlines()
    # the header carries its creation time; every row after it is the same
    assert json.loads(lines[0])["agentboard_export"] == json.loads(plain_lines[0])["agentboard_export"]
    assert lines[1:] == plain_lines[1:]
    assert BAR not in data and "\x1b" not in data


def test_json_on_a_terminal_shows_no_bar(board_home: Path, tmp_path: Path) -> None:
    piped(board_home, "export", "-o", str(tmp_path / "a.jsonl"))
    shown, _ = on_terminal(tmp_path / "fresh", "import", str(tmp_path / "a.jsonl"), "--json")
    assert BAR not in shown and "importing" not in shown
    assert json.loads(shown.replace("\r\n", "\n"))["rows"]


def test_backup_and_a_bulk_verb_show_a_bar_on_a_terminal(board_home: Path, tmp_path: Path) -> None:
    shown, _ = on_terminal(board_home, "backup", str(tmp_path / "bk"))
    assert "copying the database" in shown and BAR in shown and "backed up 40 tasks" in shown
    ids = [t["id"] for t in json.loads(piped(board_home, "list", "--json").stdout)][:5]
    shown, _ = on_terminal(board_home, "archive", *ids)
    assert BAR in shown and "tasks" in shown
    r = piped(board_home, "restore", *ids)
    assert BAR not in r.stdout + r.stderr and len(r.stdout.strip().splitlines()) == len(ids)


def test_gc_shows_a_bar_over_the_workspaces_on_a_terminal_and_none_when_piped(board_home: Path) -> None:
    root = board_home / "boards" / "default" / "workspaces"
    for i in range(6):
        (root / f"t_{i:08x}").mkdir(parents=True)
    shown, _ = on_terminal(board_home, "gc", "--dry-run")
    assert "default: workspaces" in shown and BAR in shown and "would remove 6 scratch workspace(s)" in shown
    r = piped(board_home, "gc")
    assert r.stdout.startswith("removed 6 scratch workspace(s)") and BAR not in r.stdout + r.stderr
    assert not any(root.iterdir())
