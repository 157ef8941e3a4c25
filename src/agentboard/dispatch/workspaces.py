"""Workspaces: where a worker runs.

- ``scratch`` (default): ``<home>/boards/<slug>/workspaces/<task id>/``, removed by gc when the
  task is done and no active child may still read it.
- ``dir:<absolute path>``: an existing shared folder (created if missing); kept.
- ``worktree[:<repo>]``: a git worktree at ``<repo>/.worktrees/<task id>`` on branch
  ``--branch`` or ``ab/<task id>``; the repo is the given path or the board's target directory.
  Kept; never removed while it holds uncommitted or unpushed work.

A board whose target directory is a git repository runs its (scratch-by-default) tasks in
per-task worktrees of it; a non-git target is used as a shared ``dir:`` workspace.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import gitutil

EXCLUDES = [".board/", ".mcp.json"]


class WorkspaceError(Exception):
    """The workspace cannot be prepared; the message says why (shown on the task)."""


@dataclass
class Workspace:
    kind: str
    path: Path
    branch: str | None = None
    repo: Path | None = None
    created: bool = False


def scratch_path(home: Path, board: str, task_id: str) -> Path:
    return home / "boards" / board / "workspaces" / task_id


def plan(home: Path, board_row: dict[str, Any] | None, task: dict[str, Any]) -> Workspace:
    """Where a task will run (no side effects)."""
    kind = task.get("workspace_kind") or "scratch"
    path = task.get("workspace_path")
    task_id = task["id"]
    target = (board_row or {}).get("default_workdir")
    if kind == "scratch" and target:
        if gitutil.toplevel(target) is not None:
            kind, path = "worktree", None
        else:
            return Workspace("dir", Path(target))
    if kind == "dir":
        if not path or not os.path.isabs(path):
            raise WorkspaceError(f"dir workspace {path!r} is not an absolute path")
        return Workspace("dir", Path(path))
    if kind == "worktree":
        repo_raw = path or target
        if not repo_raw:
            raise WorkspaceError(
                "a worktree task needs a git repository: give worktree:<repo path> or set the board's "
                "target directory (agentboard boards create SLUG --workdir DIR)"
            )
        repo = Path(repo_raw)
        # a task re-run after its worktree was made: path may already point at the worktree itself
        if repo.parent.name == ".worktrees" and repo.name == task_id:
            repo = repo.parent.parent
        branch = task.get("branch_name") or f"ab/{task_id}"
        return Workspace("worktree", repo / ".worktrees" / task_id, branch=branch, repo=repo)
    return Workspace("scratch", scratch_path(home, task["board"], task_id))


def prepare(ws: Workspace) -> Workspace:
    """Create the workspace on disk (idempotent: a retry reuses it and keeps earlier work)."""
    if ws.kind in ("scratch", "dir"):
        try:
            existed = ws.path.is_dir()
            ws.path.mkdir(parents=True, exist_ok=True)
            ws.created = not existed
        except OSError as exc:
            raise WorkspaceError(f"cannot create workspace {ws.path}: {exc.strerror or exc}") from None
        if not os.access(ws.path, os.W_OK | os.X_OK):
            raise WorkspaceError(f"workspace {ws.path} is not writable")
        top = gitutil.toplevel(ws.path) if ws.kind == "dir" else None
        if top is not None:
            try:
                gitutil.add_excludes(top, EXCLUDES)
            except (gitutil.GitError, OSError):
                pass
        return ws
    assert ws.repo is not None and ws.branch is not None
    repo = ws.repo
    if not repo.is_dir():
        raise WorkspaceError(f"worktree repository {repo} does not exist")
    top = gitutil.toplevel(repo)
    if top is None:
        raise WorkspaceError(f"{repo} is not a git repository; a worktree workspace needs one (git init it, or use dir:{repo})")
    try:
        if not gitutil.git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False).strip():
            raise WorkspaceError(f"git repository {repo} has no commits yet; commit something first so a branch can start from it")
        gitutil.add_excludes(repo, EXCLUDES + [".worktrees/"])
        if (ws.path / ".git").exists():
            return ws
        ws.path.parent.mkdir(parents=True, exist_ok=True)
        has_branch = bool(gitutil.git(repo, "rev-parse", "--verify", "-q", f"refs/heads/{ws.branch}", check=False).strip())
        gitutil.git(repo, "worktree", "prune", check=False)
        if has_branch:
            gitutil.git(repo, "worktree", "add", str(ws.path), ws.branch)
        else:
            gitutil.git(repo, "worktree", "add", "-b", ws.branch, str(ws.path))
        ws.created = True
    except gitutil.GitError as exc:
        raise WorkspaceError(str(exc)) from None
    except OSError as exc:
        raise WorkspaceError(f"cannot create worktree {ws.path}: {exc.strerror or exc}") from None
    return ws


def worktree_dirty(path: Path) -> str | None:
    """Why a worktree must be kept (uncommitted or unpushed work), or None when it is clean."""
    if not path.exists():
        return None
    try:
        lines = [ln for ln in gitutil.status_lines(path) if not _excluded(ln)]
    except gitutil.GitError as exc:
        return f"git cannot read it ({exc})"
    if lines:
        return f"{len(lines)} uncommitted change(s)"
    ahead = gitutil.unpushed_commits(path)
    if ahead:
        return f"{ahead} commit(s) not on any other branch or remote"
    return None


def _excluded(line: str) -> bool:
    name = line[3:].strip().strip('"')
    return name.startswith(".board/") or name == ".mcp.json"


def remove(ws_kind: str, path: Path, *, force: bool = False) -> str | None:
    """Remove a workspace; returns why it was kept instead (None when removed)."""
    if not path.exists():
        return None
    if ws_kind == "dir":
        return "dir workspaces are shared folders and are never removed"
    if ws_kind == "worktree":
        if not force:
            why = worktree_dirty(path)
            if why:
                return why
        try:
            repo = path.parent.parent
            gitutil.git(repo, "worktree", "remove", "--force", str(path))
        except gitutil.GitError as exc:
            return str(exc)
        return None
    shutil.rmtree(path, ignore_errors=True)
    return None
