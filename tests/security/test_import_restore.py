"""Import and restore with crafted input: an export whose ids climb out of the home, a home with
a planted link, a backup folder with links and a database of climbing ids, and mangled exports
fed by hypothesis. Nothing may be written outside the home, and a refused import or restore
leaves the database as it was."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentboard.config import Settings
from agentboard.domain.errors import AgentboardError
from agentboard.kernel import attachments, tasks, transfer
from agentboard.store import backup as store_backup
from agentboard.store import transfer as rows
from agentboard.store.engine import Database
from agentboard.store.migrate import open_database


def _open(url: str, home: Path) -> Database:
    home.mkdir(parents=True, exist_ok=True)
    return open_database(url, settings=dataclasses.replace(Settings(home=home), database_url=url))


def _export(db: Database, path: Path) -> list[dict[str, Any]]:
    with open(path, "w", encoding="utf-8") as fh:
        transfer.export(db, fh.write)
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _outside(root: Path, home: Path) -> set[Path]:
    """Every path below ``root`` that is not below ``home``."""
    return {p for p in root.rglob("*") if not p.is_relative_to(home)}


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


@pytest.fixture
def source(tmp_path: Path) -> tuple[Database, Path]:
    """A home with a task and an attachment, exported to ``export.jsonl``."""
    home = tmp_path / "src-home"
    db = _open(f"sqlite:///{home / 'agentboard.db'}", home)
    task = tasks.create(db, "default", "with a file")
    attachments.attach(db, "default", task["id"], "notes.txt", home=home, data=b"ssh-ed25519 AAAA attacker")
    path = tmp_path / "export.jsonl"
    _export(db, path)
    db.close()
    return db, path


@pytest.fixture
def target_url(backend: str, tmp_path: Path) -> str:
    """The database an import goes into: SQLite in a fresh home, or the test's PostgreSQL one."""
    return backend if backend.startswith("postgres") else f"sqlite:///{tmp_path / 'dst-home' / 'agentboard.db'}"


def test_an_import_whose_attachment_task_id_climbs_out_of_the_home_writes_nothing_and_changes_nothing(
        source: tuple[Database, Path], target_url: str, tmp_path: Path) -> None:
    _, path = source
    outside = tmp_path / "victim" / ".ssh"
    outside.mkdir(parents=True)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for item in lines:
        if item.get("table") == "attachments":
            item["row"]["task_id"] = "../../../../victim/.ssh"
            item["row"]["name"] = "authorized_keys"
    crafted = _write(tmp_path / "crafted.jsonl", lines)
    home = tmp_path / "dst-home"
    db = _open(target_url, home)
    try:
        before = rows.digests(db)
        with pytest.raises(AgentboardError) as err:
            transfer.import_dump(db, crafted, home=home)
        assert "task id" in err.value.message
        assert rows.digests(db) == before
    finally:
        db.close()
    assert not (outside / "authorized_keys").exists()
    assert _files(tmp_path / "victim") == {".ssh"}


def test_the_import_command_refuses_a_climbing_board_slug_in_one_line(source: tuple[Database, Path],
                                                                      tmp_path: Path) -> None:
    _, path = source
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for item in lines:
        if item.get("table") == "attachments":
            item["row"]["board"] = "../../outside"
    crafted = _write(tmp_path / "crafted.jsonl", lines)
    home = tmp_path / "cli-home"
    env = {**os.environ, "AGENTBOARD_HOME": str(home)}
    env.pop("AGENTBOARD_DATABASE_URL", None)
    r = subprocess.run([sys.executable, "-m", "agentboard", "import", str(crafted)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode != 0
    assert "board slug" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "outside").exists()


def test_an_import_does_not_follow_a_link_planted_in_the_home(source: tuple[Database, Path],
                                                              tmp_path: Path) -> None:
    _, path = source
    home = tmp_path / "dst-home"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (home / "boards" / "default").mkdir(parents=True)
    os.symlink(elsewhere, home / "boards" / "default" / "attachments")
    db = _open(f"sqlite:///{home / 'agentboard.db'}", home)
    try:
        before = rows.digests(db)
        with pytest.raises(AgentboardError):
            transfer.import_dump(db, path, home=home)
        assert rows.digests(db) == before
    finally:
        db.close()
    assert _files(elsewhere) == set()


def _backup(tmp_path: Path) -> tuple[Path, Path, str]:
    """A real backup of a home with a task and an attachment; ``(backup folder, home, task id)``."""
    home = tmp_path / "home"
    db = _open(f"sqlite:///{home / 'agentboard.db'}", home)
    task = tasks.create(db, "default", "with a file")
    attachments.attach(db, "default", task["id"], "notes.txt", home=home, data=b"notes")
    db.close()
    dest = tmp_path / "backup"
    store_backup.backup(home, home / "agentboard.db", dest)
    return dest, home, task["id"]


def test_a_restore_copies_no_link_of_a_crafted_backup_folder(tmp_path: Path) -> None:
    dest, home, task_id = _backup(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("root only")
    folder = dest / "boards" / "default" / "attachments" / task_id
    os.symlink(secret, folder / "stolen.txt")
    os.link(secret, folder / "hardlinked.txt")
    os.symlink(tmp_path, dest / "boards" / "linkedboard")
    (dest / "templates").mkdir(exist_ok=True)
    os.symlink(secret, dest / "templates" / "evil.toml")
    target = tmp_path / "restored-home"
    store_backup.restore(dest, target, target / "agentboard.db", keep_current=False)
    restored = _files(target / "boards")
    assert f"default/attachments/{task_id}/notes.txt" in restored
    assert not any(name.endswith(("stolen.txt", "hardlinked.txt")) or "linkedboard" in name for name in restored)
    assert not (target / "templates" / "evil.toml").exists()


def test_a_restore_refuses_a_backup_whose_database_names_a_climbing_task_and_keeps_the_home(
        tmp_path: Path) -> None:
    dest, home, task_id = _backup(tmp_path)
    conn = sqlite3.connect(dest / store_backup.DB_NAME)
    conn.execute("UPDATE attachments SET task_id = '../../../victim'")
    conn.commit()
    conn.close()
    before = (home / "agentboard.db").read_bytes()
    with pytest.raises(AgentboardError) as err:
        store_backup.restore(dest, home, home / "agentboard.db", keep_current=True)
    assert "task id" in err.value.message
    assert (home / "agentboard.db").read_bytes() == before
    assert not (tmp_path / "victim").exists()


# -- mangled exports -----------------------------------------------------------------------------

_HOSTILE = st.one_of(
    st.sampled_from(["../x", "../../../../tmp/x", "/etc", ".", "..", "", "a/b", "t_../..", "x\x00y",
                     "\u202egnp.exe", "default/../..", "t_1234567g", "CON", "~root"]),
    st.text(max_size=12),
    st.integers(),
    st.none(),
)
_FIELDS = [("tasks", "id"), ("tasks", "board"), ("boards", "slug"), ("attachments", "task_id"),
           ("attachments", "board"), ("attachments", "name"), ("attachments", "path"),
           ("profiles", "name"), ("wiki_pages", "slug"), ("task_links", "child_id"), ("goals", "id")]


@pytest.fixture(scope="module")
def fuzz_material(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path]:
    """An export of two linked tasks and an attachment, and an empty migrated database file that
    each example copies (so an example costs a file copy, not a migration)."""
    root = tmp_path_factory.mktemp("fuzz-material")
    db = _open(f"sqlite:///{root / 'src' / 'agentboard.db'}", root / "src")
    parent = tasks.create(db, "default", "parent")
    tasks.create(db, "default", "child", parents=[parent["id"]])
    attachments.attach(db, "default", parent["id"], "a.txt", home=root / "src", data=b"data")
    lines = _export(db, root / "export.jsonl")
    db.close()
    empty = _open(f"sqlite:///{root / 'empty' / 'agentboard.db'}", root / "empty")
    empty.close()
    return lines, root / "empty" / "agentboard.db"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.sampled_from(_FIELDS), _HOSTILE), min_size=1, max_size=4),
       content=st.one_of(st.none(), st.sampled_from(["!!", "aGVsbG8="])))
def test_mangled_exports_write_nothing_outside_the_home_and_leave_a_refused_database_unchanged(
        tmp_path_factory: pytest.TempPathFactory, fuzz_material: tuple[list[dict[str, Any]], Path],
        changes: list[tuple[tuple[str, str], Any]], content: str | None) -> None:
    import copy
    import shutil

    template, empty = fuzz_material
    lines = copy.deepcopy(template)
    for (table, column), value in changes:
        for item in lines:
            if item.get("table") == table:
                item["row"][column] = value
                if table == "attachments" and content is not None:
                    item["content"] = content
                break
    root = tmp_path_factory.mktemp("fuzz")
    crafted = _write(root / "crafted.jsonl", lines)
    home = root / "work" / "dst"
    home.mkdir(parents=True)
    shutil.copy(empty, home / "agentboard.db")
    target = _open(f"sqlite:///{home / 'agentboard.db'}", home)
    outside_before = _outside(root, home)
    try:
        before = rows.digests(target)
        try:
            transfer.import_dump(target, crafted, home=home)
        except AgentboardError:
            assert rows.digests(target) == before
        else:
            for att in target.read(lambda tx: tx.all("SELECT path FROM attachments")):
                resolved = Path(att["path"]).resolve()
                assert resolved.is_relative_to(home.resolve()), resolved
    finally:
        target.close()
    assert _outside(root, home) == outside_before
    for p in home.rglob("*"):
        assert p.resolve().is_relative_to(home.resolve()), p


def test_a_second_import_of_the_same_file_reports_nothing_new(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "AGENTBOARD_HOME": str(home)}
    env.pop("AGENTBOARD_DATABASE_URL", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agentboard", *args], capture_output=True, text=True,
                              env=env, timeout=120)

    src = tmp_path / "src"
    src_env = {**env, "AGENTBOARD_HOME": str(src)}
    for args in (["create", "one"], ["create", "two"], ["export", "-o", str(tmp_path / "dump.jsonl")]):
        r = subprocess.run([sys.executable, "-m", "agentboard", *args], capture_output=True, text=True,
                           env=src_env, timeout=120)
        assert r.returncode == 0, r.stderr
    first = cli("import", str(tmp_path / "dump.jsonl"))
    assert first.returncode == 0 and "imported" in first.stdout and " 0 new" not in first.stdout, first
    second = cli("import", str(tmp_path / "dump.jsonl"))
    assert second.returncode == 0, second.stderr
    assert "imported 0 new and 0 changed rows" in second.stdout and "unchanged" in second.stdout, second.stdout
    data = json.loads(cli("import", str(tmp_path / "dump.jsonl"), "--json").stdout)
    assert data["new"] == 0 and data["changed"] == 0 and data["unchanged"] > 0


def test_backup_and_restore_keep_the_home_templates(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "AGENTBOARD_HOME": str(home)}
    env.pop("AGENTBOARD_DATABASE_URL", None)

    def cli(*args: str, at: Path = home) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agentboard", *args], capture_output=True, text=True,
                              env={**env, "AGENTBOARD_HOME": str(at)}, timeout=120)

    assert cli("create", "something").returncode == 0
    (home / "templates").mkdir(exist_ok=True)
    (home / "templates" / "release.toml").write_text('[[task]]\nkey = "a"\ntitle = "Release {version}"\n')
    r = cli("backup", str(tmp_path / "bk"))
    assert r.returncode == 0 and "1 template(s)" in r.stdout, r
    other = tmp_path / "other"
    r = cli("restore", str(tmp_path / "bk"), at=other)
    assert r.returncode == 0, r.stderr
    listed = cli("template", "list", at=other)
    assert listed.returncode == 0 and "release" in listed.stdout, listed
    assert (other / "templates" / "release.toml").read_text() == (home / "templates" / "release.toml").read_text()


def test_an_attachment_imported_beside_the_home_is_readable_where_the_row_says(source: tuple[Database, Path],
                                                                                tmp_path: Path) -> None:
    _, path = source
    home = tmp_path / "dst-home"
    db = _open(f"sqlite:///{home / 'agentboard.db'}", home)
    try:
        report = transfer.import_dump(db, path, home=home)
        att = db.read(lambda tx: tx.one("SELECT path FROM attachments"))
    finally:
        db.close()
    assert report.files_written == 1
    assert Path(att["path"]).read_bytes() == base64.b64decode(base64.b64encode(b"ssh-ed25519 AAAA attacker"))
