"""A reviewer's agent CLI starts in the reviewed worker's workspace and runs git there (Claude
Code runs ``git status`` as it starts): its git reads a task worktree through agentboard's own
view of it, so no program the worker configured (an fsmonitor, a filter driver) runs as the
reviewer; a workspace with no view to offer (a scratch or ``dir:`` folder, a task repository)
has no repository for it at all."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gitflow.conftest import git, make_repo

from agentboard import gitsafe


def _git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", *args], cwd=cwd, env={**full, **(env or {})}, capture_output=True, text=True,
                          timeout=60)


def _plant(checkout: Path, marker: Path) -> None:
    """What a worker can write: an fsmonitor and a clean filter named by its attributes."""
    git(checkout, "config", "core.fsmonitor", f"touch {marker}-fsmonitor #")
    git(checkout, "config", "filter.evil.clean", f"touch {marker}-filter; cat")
    (checkout / ".gitattributes").write_text("*.txt filter=evil\n")
    (checkout / "work.txt").write_text("changed by the worker\n")


def test_a_reviewers_git_in_a_task_worktree_runs_nothing_the_worker_configured(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n", "work.txt": "first\n"})
    wt = repo / ".worktrees" / "t_0000abcd"
    git(repo, "worktree", "add", "-q", "-b", "ab/t_0000abcd", str(wt))
    marker = tmp_path / "ran"
    _plant(wt, marker)

    git(wt, "-c", "core.fsmonitor=false", "commit", "-qm", "committed work", "--allow-empty")
    env = gitsafe.reviewer_environment(repo, wt, "ab/t_0000abcd", "main")
    status = _git(wt, "status", "--porcelain", env=env)
    assert status.returncode == 0, status.stderr
    assert "work.txt" in status.stdout and ".gitattributes" in status.stdout  # it sees the work
    assert _git(wt, "log", "-1", "--format=%s", env=env).stdout.strip() == "committed work"
    ranged = _git(wt, "log", "--format=%s", "main...ab/t_0000abcd", env=env)  # as the review context says
    assert ranged.returncode == 0 and ranged.stdout.strip() == "committed work", ranged.stderr
    assert not list(tmp_path.glob("ran-*")), "a program the worker configured ran in the reviewer's git"
    # the plants are live: the same git without the reviewer's environment runs them
    _git(wt, "status", "--porcelain")
    assert (tmp_path / "ran-fsmonitor").exists()


def test_a_reviewers_git_in_a_workspace_with_its_own_git_folder_finds_no_repository(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    git(scratch, "init", "-q")
    marker = tmp_path / "ran"
    _plant(scratch, marker)

    env = gitsafe.reviewer_environment(None, scratch, None)
    status = _git(scratch, "status", "--porcelain", env=env)
    assert status.returncode != 0 and "not a git repository" in status.stderr
    assert not list(tmp_path.glob("ran-*"))
