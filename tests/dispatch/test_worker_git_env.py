"""A dispatcher started where git's variables name another repository (from a git hook, by ``git
rebase --exec``) hands none of them to its workers: a worker's git acts on its own worktree."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentboard.domain import worker_env

from .conftest import all_in, wait_for
from .test_workspaces import make_repo


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True,
                          env=env).stdout


COMMIT = "sh -c " + shlex.quote(
    "env | grep '^GIT_' > .git-env.txt; echo feature > feature.txt && git add feature.txt && "
    "git -c user.email=a@b -c user.name=agent commit -qm \"feature for $AGENTBOARD_TASK\" && "
    "echo '{\"success\": true, \"summary\": \"committed\"}' > .board/result.json")


def test_a_worker_commits_on_its_own_branch_when_the_dispatcher_runs_inside_another_repositorys_hook(
        ab: Any, dispatcher: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hooked = make_repo(tmp_path / "hooked")  # the repository whose hook started the dispatcher
    repo = make_repo(tmp_path / "repo")
    ab.create_board("code", workdir=str(repo), workdir_mode="linked-existing")
    board = ab.board("code")
    ab.add_profile("committer", command=COMMIT)
    for name, value in {"GIT_DIR": hooked / ".git", "GIT_WORK_TREE": hooked, "GIT_INDEX_FILE": hooked / ".git" / "index",
                        "GIT_PREFIX": "", "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "commit.gpgsign",
                        "GIT_CONFIG_VALUE_0": "false"}.items():
        monkeypatch.setenv(name, str(value))
    t = board.create("commit a feature", assignee="committer")
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"done"}), what="the task done")
    assert git(hooked, "log", "--format=%s").split() == ["init"], "the worker committed into the hook's repository"
    assert git(hooked, "status", "--porcelain") == ""
    assert f"feature for {t['id']}" in git(repo, "log", "--format=%s", f"ab/{t['id']}")
    seen = [line.partition("=")[0] for line in (repo / ".worktrees" / t["id"] / ".git-env.txt").read_text().split()]
    assert not [n for n in seen if n in worker_env.GIT_REPOSITORY_VARS or n.startswith("GIT_CONFIG_")], seen


def test_the_variables_of_git_that_name_a_repository_are_those_git_itself_clears() -> None:
    listed = subprocess.run(["git", "rev-parse", "--local-env-vars"], capture_output=True, text=True,
                            check=True).stdout.split()
    assert set(listed) <= worker_env.GIT_REPOSITORY_VARS
