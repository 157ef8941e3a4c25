"""Before a task starts, `show`, `context` and their `--json` say the workspace it will get: on a
board whose target is a git repository, a worktree of it on the task's branch, not `scratch`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .conftest import task_id


def _repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "-C", str(path), "init", "-q", "-b", "main"], check=True)
    subprocess.run(["git", "-C", str(path), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                    "--allow-empty", "-m", "init"], check=True)
    return path


def test_a_task_on_a_git_target_shows_the_worktree_it_will_run_in_before_it_starts(cli, tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    assert cli("boards", "create", "g", "--workdir", str(repo), "--switch").code == 0
    created = cli("create", "pre", "--json").json()
    t = created["id"]
    where = str(repo / ".worktrees" / t)
    assert (created["workspace_kind"], created["workspace_path"]) == ("worktree", where)
    shown = cli("show", t, "--json").json()
    assert (shown["workspace_kind"], shown["workspace_path"], shown["branch_name"]) == ("worktree", where, f"ab/{t}")
    text = cli("show", t).out
    assert f"worktree:{where}" in text and "scratch" not in text
    assert f"branch ab/{t} does not exist (yet)" in text
    context = cli("context", t).out
    assert f"**Workspace:** worktree at {where}" in context and f"**Branch:** ab/{t}" in context
    assert f"worktree at {where}" in cli("context", t, "--json").json()["markdown"]
    # a branch of its own is the one shown
    own = task_id(cli("create", "named", "--branch", "feature/x", "--json"))
    assert cli("show", own, "--json").json()["branch_name"] == "feature/x"
    # nothing was made meanwhile
    assert not (repo / ".worktrees").exists()


def test_a_task_on_a_plain_target_shows_that_folder_and_one_without_a_target_stays_scratch(
        cli, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    cli("boards", "create", "p", "--workdir", str(plain))
    t = task_id(cli("create", "in the folder", "--board", "p", "--json"))
    shown = cli("show", t, "--json").json()
    assert (shown["workspace_kind"], shown["workspace_path"]) == ("dir", str(plain))
    s = task_id(cli("create", "anywhere", "--json"))
    assert cli("show", s, "--json").json()["workspace_kind"] == "scratch"
