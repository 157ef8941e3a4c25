"""Backups, restores, exports and imports that must fail cleanly: a backup from a newer schema, a
dump that no longer matches its own trailer, a target whose disk is full, two backups in one
second."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from testenv import fill

from agentboard.store.migrate import HEAD, open_database, upgrade

from .conftest import Runner, assert_one_line_error, task_id


def _schema(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT version_num FROM alembic_version").fetchone()[0])


def test_restore_refuses_a_backup_from_a_newer_schema_and_leaves_the_home_as_it_was(
        cli: Runner, cli_home: Path, tmp_path: Path) -> None:
    kept = task_id(cli("create", "in the backup", "--json"))
    bk = tmp_path / "bk"
    assert cli("backup", str(bk)).code == 0
    with sqlite3.connect(bk / "agentboard.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099'")
    later = task_id(cli("create", "after the backup", "--json"))
    assert_one_line_error(cli("restore", str(bk), "--force"), 2, "newer agentboard", "schema 0099", HEAD,
                          "upgrade agentboard")
    assert _schema(cli_home / "agentboard.db") == HEAD
    r = cli("list", "--json")
    assert r.code == 0, r.err
    assert {t["id"] for t in r.json()} == {kept, later}
    assert not list((cli_home / "backups").glob("pre-restore-*"))  # refused before anything was done


def test_a_backup_of_an_older_schema_is_restored_and_migrated_by_the_next_command(
        cli: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = tmp_path / "old"
    old.mkdir()
    db = open_database(f"sqlite:///{old / 'agentboard.db'}", migrate=False)
    try:
        upgrade(db, "0030")
    finally:
        db.close()
    assert _schema(old / "agentboard.db") == "0030"
    other = tmp_path / "newhome"
    monkeypatch.setenv("AGENTBOARD_HOME", str(other))
    r = cli("restore", str(old))
    assert r.code == 0, r.err
    r = cli("list", "--json")
    assert r.code == 0, r.err
    assert _schema(other / "agentboard.db") == HEAD


def _export(cli: Runner, tmp_path: Path) -> Path:
    tid = task_id(cli("create", "with comments", "--json"))
    assert cli("comment", tid, "first note").code == 0
    assert cli("comment", tid, "second note").code == 0
    dump = tmp_path / "ex.jsonl"
    assert cli("export", "-o", str(dump)).code == 0
    return dump


def _into_empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    other = tmp_path / "empty-home"
    monkeypatch.setenv("AGENTBOARD_HOME", str(other))
    return other


def _tasks_in(home: Path) -> int:
    with sqlite3.connect(home / "agentboard.db") as conn:
        return int(conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0])


def test_import_refuses_a_dump_missing_a_tables_rows_and_names_the_table(
        cli: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dump = _export(cli, tmp_path)
    damaged = tmp_path / "d.jsonl"
    damaged.write_text("".join(line for line in dump.read_text().splitlines(keepends=True)
                               if json.loads(line).get("table") != "task_comments"))
    home = _into_empty_home(tmp_path, monkeypatch)
    assert_one_line_error(cli("import", str(damaged)), 2, "task_comments", "0 row(s)", "trailer counts 2",
                          "nothing was imported")
    assert _tasks_in(home) == 0


def test_import_refuses_a_dump_whose_row_was_edited_after_the_export(
        cli: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dump = _export(cli, tmp_path)
    damaged = tmp_path / "d.jsonl"
    damaged.write_text(dump.read_text().replace("second note", "second nope"))
    home = _into_empty_home(tmp_path, monkeypatch)
    r = cli("import", str(damaged))
    assert_one_line_error(r, 2, "task_comments", "checksum", "nothing was imported")
    assert _tasks_in(home) == 0
    r = cli("import", str(dump))  # the export as it was still imports, and matches
    assert r.code == 0 and "note:" not in r.err, r.err


def test_two_backups_in_the_same_second_take_two_folders(
        cli: Runner, cli_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task_id(cli("create", "kept", "--json"))
    one_second = time.gmtime(1_800_000_000)
    monkeypatch.setattr(time, "gmtime", lambda secs=None: one_second)
    first, second = cli("backup", "--json"), cli("backup", "--json")
    assert first.code == 0 and second.code == 0, (first.err, second.err)
    paths = [Path(first.json()["path"]), Path(second.json()["path"])]
    assert paths[0] != paths[1]
    assert [p.parent for p in paths] == [cli_home / "backups"] * 2
    assert all((p / "agentboard.db").is_file() for p in paths)


# -- a full disk under the backup's or the export's target ------------------------------------------


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs with every byte taken by ``filler`` (needs root to mount); the home stays
    on the test's own disk."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.decode().strip()}")
    try:
        fill(mnt / "filler")
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_backup_onto_a_full_disk_names_the_target_removes_its_folder_and_works_once_there_is_room(
        cli: Runner, full_disk: Path) -> None:
    task_id(cli("create", "to back up", "--json"))
    dest = full_disk / "bk"
    r = cli("backup", str(dest))
    assert_one_line_error(r, 6, "full", str(dest))
    assert "database cannot grow" not in r.err
    assert not dest.exists()
    (full_disk / "filler").unlink()
    r = cli("backup", str(dest))
    assert r.code == 0, r.err
    assert (dest / "agentboard.db").stat().st_size > 0


def test_a_backup_into_an_empty_folder_on_a_full_disk_leaves_it_empty(cli: Runner, full_disk: Path) -> None:
    dest = full_disk / "empty"
    dest.mkdir()
    assert_one_line_error(cli("backup", str(dest)), 6, "full", str(dest))
    assert dest.is_dir() and list(dest.iterdir()) == []


def test_an_export_onto_a_full_disk_names_the_file_leaves_nothing_and_works_once_there_is_room(
        cli: Runner, full_disk: Path) -> None:
    for n in range(3):
        task_id(cli("create", f"task {n}", "--body", "x" * 4000, "--json"))
    out = full_disk / "ex.jsonl"
    r = cli("export", "-o", str(out))
    assert_one_line_error(r, 6, "full", str(out))
    assert "database cannot grow" not in r.err
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]  # no partial file, no temporary one
    (full_disk / "filler").unlink()
    r = cli("export", "-o", str(out))
    assert r.code == 0, r.err
    assert json.loads(out.read_text().splitlines()[-1])["end"] is True
