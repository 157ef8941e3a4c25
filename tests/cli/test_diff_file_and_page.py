"""`agentboard diff ID --file PATH` and `--page N` say when there is nothing of that name or
page, instead of printing a header and exiting 0; `--page` without `--json` shows that page."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .conftest import assert_one_line_error, task_id


def _changed_repo(path: Path, files: int) -> Path:
    path.mkdir()
    git = ["git", "-C", str(path)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    for i in range(files):
        (path / f"f{i:02}.py").write_text("a\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "init"], check=True)
    for i in range(files):
        (path / f"f{i:02}.py").write_text("a\nb\n")
    return path


def test_a_file_the_diff_does_not_hold_is_not_found_naming_the_files_it_does(cli, tmp_path: Path) -> None:
    repo = _changed_repo(tmp_path / "repo", 1)
    t = task_id(cli("create", "x", "--workspace", f"dir:{repo}", "--json"))
    assert_one_line_error(cli("diff", t, "--file", "nosuch.py"), 3, f"no file 'nosuch.py' in the diff of {t}",
                          "its files: f00.py")
    assert_one_line_error(cli("diff", t, "--file", "nosuch.py", "--json"), 3, "no file 'nosuch.py'")
    one = cli("diff", t, "--file", "f00.py")
    assert one.code == 0 and "+b" in one.out


def test_a_page_past_the_last_is_refused_and_a_page_shows_only_its_files(cli, tmp_path: Path) -> None:
    repo = _changed_repo(tmp_path / "repo", 21)  # 20 files a page: two pages
    t = task_id(cli("create", "x", "--workspace", f"dir:{repo}", "--json"))
    assert_one_line_error(cli("diff", t, "--page", "5"), 2, "--page 5 is past the end", "2 page(s)")
    assert_one_line_error(cli("diff", t, "--page", "3", "--json"), 2, "--page 3 is past the end")
    second = cli("diff", t, "--page", "2")
    assert second.code == 0 and "# page 2 of 2: 1 file(s)" in second.out
    assert "diff --git a/f20.py" in second.out and "diff --git a/f00.py" not in second.out
    assert cli("diff", t, "--page", "2", "--json").json()["shown"][0]["path"] == "f20.py"
