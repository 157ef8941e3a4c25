# ruff: noqa: F811 - the fixtures home and worker_user come from test_isolation
"""A confined worker in a worktree commits on its branch, and nothing it writes changes the
target repository's configuration, hooks or other branches.

A sandboxed worker sees the target's ``.git`` read-only, and a worker running as the worker
user cannot write the dispatcher's ``.git``: a linked worktree (whose index, HEAD and refs live
in the target's ``.git``) cannot take a commit. Such a worker works in a task repository of its
own that borrows the target's objects; the dispatcher fetches its one branch back when it exits.

The worker below commits, then attacks the target's ``.git`` directly (its config, a hook, its
main branch) and through its own repository (a ``main`` and an ``other`` branch of its own).
Real git, real bubblewrap, a real worker user (as root), the real dispatcher.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
from testenv import wait_for

import agentboard

from .test_isolation import agentboard_cli, home, require_bwrap, worker_user  # noqa: F401 - fixtures

WORKER = textwrap.dedent('''\
    #!/bin/sh
    T={target}
    echo "a feature" > feature.txt
    git add feature.txt
    git -c user.name=worker -c user.email=worker@example.com commit -q -m "the worker's commit"
    echo "commit exit $?"
    # the target's .git, directly
    git --git-dir="$T/.git" config core.fsmonitor "touch {marker}"; echo "config exit $?"
    printf '#!/bin/sh\\ntouch {marker}\\n' > "$T/.git/hooks/post-checkout"; echo "hook exit $?"
    git --git-dir="$T/.git" update-ref refs/heads/main HEAD; echo "target main exit $?"
    git --git-dir="$T/.git" update-ref refs/heads/other HEAD; echo "target other exit $?"
    # its own repository: branches named like the target's
    git update-ref refs/heads/main HEAD
    git update-ref refs/heads/other HEAD
    echo '{{"success": true, "summary": "committed"}}' > .board/result.json
''')



def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def target_repo(where: Path) -> Path:
    repo = where / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("the project\n")
    git(repo, "add", "README.md")
    git(repo, "-c", "user.name=owner", "-c", "user.email=owner@example.com", "commit", "-q", "-m", "start")
    git(repo, "branch", "other")
    return repo


def state(repo: Path) -> dict[str, Any]:
    """What the worker must not change in the target: its config, hooks and other branches."""
    return {"config": (repo / ".git" / "config").read_text(),
            "hooks": sorted(p.name for p in (repo / ".git" / "hooks").iterdir()),
            "main": git(repo, "rev-parse", "refs/heads/main").strip(),
            "other": git(repo, "rev-parse", "refs/heads/other").strip()}


def commit_in_a_worktree(home: Path, isolation: str) -> tuple[Path, dict[str, Any], str]:
    from agentboard.dispatch.dispatcher import Dispatcher

    repo = target_repo(home.parent)
    before = state(repo)
    marker = home.parent / "hook-ran"
    script = home.parent / "committer.sh"
    script.write_text(WORKER.format(target=shlex.quote(str(repo)), marker=marker))
    script.chmod(0o755)
    with agentboard.connect(str(home)) as ab:
        ab.add_profile("committer", command=str(script), isolation=isolation)
        task = ab.board().create("commit a feature", assignee="committer", max_retries=1,
                                 workspace=f"worktree:{repo}")
        d = Dispatcher(ab.db, ab.settings)
        d.start()
        try:
            shown = wait_for(lambda: (t := ab.board().show(task["id"]))["status"] not in ("ready", "running")
                             and t, what="the task to finish")
        finally:
            d.stop()
    log = (home / "boards" / "default" / "logs" / f"{task['id']}.log").read_text()
    assert shown["status"] == "done", (shown.get("last_failure_error"), log)
    assert "commit exit 0" in log, log
    for attack in ("config", "hook", "target main", "target other"):
        assert f"{attack} exit 0" not in log, log
    assert state(repo) == before
    assert not marker.exists()
    # its commit landed on its branch in the target
    branch = shown["branch_name"]
    assert git(repo, "log", "-1", "--format=%s", branch).strip() == "the worker's commit"
    assert git(repo, "show", f"{branch}:feature.txt") == "a feature\n"
    assert git(repo, "merge-base", "--is-ancestor", before["main"], branch) == ""
    return repo, shown, log


def test_a_sandboxed_worker_commits_in_its_worktree_and_cannot_touch_the_targets_config_hooks_or_branches(
        home: Path) -> None:
    require_bwrap()
    repo, task, _log = commit_in_a_worktree(home, "sandbox")
    ws = Path(task["workspace_path"])
    assert ws.parent == repo / ".worktrees" and (ws / ".git").is_dir()
    # the target's own status does not show the task's folder
    assert git(repo, "status", "--porcelain") == ""


def test_a_user_isolated_worker_commits_in_its_worktree_and_cannot_touch_the_targets_config_hooks_or_branches(
        home: Path, worker_user: str) -> None:
    import pwd

    r = agentboard_cli(home, "init", "--worker-user", worker_user)
    assert r.returncode == 0, r.stderr
    _repo, task, _log = commit_in_a_worktree(home, "user")
    ws = Path(task["workspace_path"])
    assert ws.stat().st_uid == pwd.getpwnam(worker_user).pw_uid
    assert (ws / ".git").stat().st_uid == pwd.getpwnam(worker_user).pw_uid


def test_gc_removes_a_task_repository_whose_branch_is_back_in_the_target_and_keeps_one_with_new_work(
        tmp_path: Path) -> None:
    from agentboard.dispatch import workspaces

    repo = target_repo(tmp_path)
    ws = workspaces.prepare(workspaces.Workspace("worktree", repo / ".worktrees" / "t_1", branch="ab/t_1",
                                                 repo=repo), own_repo=True)
    assert workspaces.is_task_repo(ws.path) and git(ws.path, "rev-parse", "HEAD") == git(repo, "rev-parse", "main")
    assert workspaces.worktree_dirty(ws.path) is None
    (ws.path / "new.txt").write_text("x\n")
    git(ws.path, "add", "new.txt")
    git(ws.path, "-c", "user.name=w", "-c", "user.email=w@x", "commit", "-q", "-m", "new work")
    git(ws.path, "pack-refs", "--all")  # the branch read from packed-refs
    assert workspaces.remove("worktree", ws.path) == "commits not fetched back into the target repository"
    workspaces.collect(ws.path, "ab/t_1", ["git", "upload-pack"], force=True)
    assert git(repo, "log", "-1", "--format=%s", "ab/t_1").strip() == "new work"
    assert workspaces.remove("worktree", ws.path) is None and not ws.path.exists()
    assert os.path.isdir(repo / ".git")
    # a HEAD replaced by a link is not followed: the folder is kept, saying why
    other = workspaces.prepare(workspaces.Workspace("worktree", repo / ".worktrees" / "t_4", branch="ab/t_4",
                                                    repo=repo), own_repo=True)
    (other.path / ".git" / "HEAD").unlink()
    (other.path / ".git" / "HEAD").symlink_to(repo / ".git" / "HEAD")
    assert workspaces.worktree_dirty(other.path) == "its HEAD cannot be read as a commit"


@pytest.mark.parametrize("force", [False, True])
def test_a_rewritten_task_branch_comes_back_only_when_it_is_the_tasks_own(tmp_path: Path, force: bool) -> None:
    from agentboard.dispatch import workspaces

    repo = target_repo(tmp_path)
    ws = workspaces.prepare(workspaces.Workspace("worktree", repo / ".worktrees" / "t_2", branch="feature",
                                                 repo=repo), own_repo=True)
    git(ws.path, "-c", "user.name=w", "-c", "user.email=w@x", "commit", "-q", "--allow-empty", "-m", "one")
    workspaces.collect(ws.path, "feature", ["git", "upload-pack"], force=force)
    git(ws.path, "-c", "user.name=w", "-c", "user.email=w@x", "commit", "-q", "--amend", "--allow-empty", "-m", "two")
    if force:
        workspaces.collect(ws.path, "feature", ["git", "upload-pack"], force=True)
        assert git(repo, "log", "-1", "--format=%s", "feature").strip() == "two"
    else:
        with pytest.raises(workspaces.WorkspaceError, match="fetching feature back"):
            workspaces.collect(ws.path, "feature", ["git", "upload-pack"], force=False)
        assert git(repo, "log", "-1", "--format=%s", "feature").strip() == "one"


def test_rebase_integration_of_a_task_repositorys_branch_lands_commits_the_target_has(tmp_path: Path) -> None:
    from agentboard.dispatch import integrate, workspaces

    repo = target_repo(tmp_path)
    ws = workspaces.prepare(workspaces.Workspace("worktree", repo / ".worktrees" / "t_3", branch="ab/t_3",
                                                 repo=repo), own_repo=True)
    (ws.path / "feature.txt").write_text("feature\n")
    git(ws.path, "add", "feature.txt")
    git(ws.path, "-c", "user.name=w", "-c", "user.email=w@x", "commit", "-q", "-m", "feature")
    workspaces.collect(ws.path, "ab/t_3", ["git", "upload-pack"], force=True)
    (repo / "other.txt").write_text("meanwhile\n")  # the base moves on
    git(repo, "add", "other.txt")
    git(repo, "-c", "user.name=o", "-c", "user.email=o@x", "commit", "-q", "-m", "meanwhile")
    done = integrate.integrate(repo, {"id": "t_3", "branch_name": "ab/t_3", "workspace_path": str(ws.path),
                                      "title": "feature"}, "rebase", "main")
    assert done.outcome == "rebased"
    assert git(repo, "log", "--format=%s", "main").split("\n")[:2] == ["feature", "meanwhile"]
    assert (repo / "feature.txt").read_text() == "feature\n"


def test_a_retry_of_a_confined_worker_reuses_its_task_repository_with_its_commits(tmp_path: Path) -> None:
    from agentboard.dispatch import workspaces

    repo = target_repo(tmp_path)

    def plan() -> workspaces.Workspace:
        return workspaces.Workspace("worktree", repo / ".worktrees" / "t_5", branch="ab/t_5", repo=repo)

    first = workspaces.prepare(plan(), own_repo=True)
    assert first.created
    git(first.path, "-c", "user.name=w", "-c", "user.email=w@x", "commit", "-q", "--allow-empty", "-m", "attempt 1")
    again = workspaces.prepare(plan(), own_repo=True)
    assert not again.created and workspaces.is_task_repo(again.path)
    assert git(again.path, "log", "-1", "--format=%s").strip() == "attempt 1"
