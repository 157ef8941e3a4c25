"""`agentboard demo --home DIR` runs only in a new or empty folder: a real home keeps its
profiles and tasks (the demo's profiles are shared by every board of a home, and a dispatcher
there would start its tasks), and is refused in one line before anything is written."""

from __future__ import annotations

from pathlib import Path

from .conftest import assert_one_line_error


def test_the_demo_refuses_a_home_that_exists_and_writes_nothing_into_it(cli, counts, cli_home: Path) -> None:
    assert cli("profiles", "add", "writer", "--command", "sh /tmp/x.sh").code == 0  # as the README's tour does
    cli("create", "my own task")
    def files() -> list[str]:  # (SQLite's own -wal and -shm files come and go with its readers)
        return sorted(p.name for p in cli_home.iterdir() if not p.name.endswith(("-wal", "-shm")))

    before, made = counts(), files()
    r = cli("demo", "--home", str(cli_home))
    assert_one_line_error(r, 2, f"{cli_home} already holds an agentboard home", "leave out --home")
    assert counts() == before
    assert [p["name"] for p in cli("profiles", "list", "--json").json()] == ["writer"]
    assert files() == made and not (cli_home / "output").exists()
    # a second try is refused the same way, not with a misleading conflict
    assert_one_line_error(cli("demo", "--home", str(cli_home), "--json"), 2, "already holds an agentboard home")


def test_the_demo_refuses_a_folder_that_is_not_empty_and_leaves_it_as_it_was(cli, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    assert_one_line_error(cli("demo", "--home", str(folder)), 2, "is not empty", "new or empty folder")
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert_one_line_error(cli("demo", "--home", str(afile)), 2, "is a file")
