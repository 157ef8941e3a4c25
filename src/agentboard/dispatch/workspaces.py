"""Workspaces: where a worker runs.

- ``scratch`` (default): ``<home>/boards/<slug>/workspaces/<task id>/``, removed by gc when the
  task is done and no active child may still read it. A worker that runs as the worker user
  (``isolation = user``) cannot reach the home (0700): its scratch workspace is
  ``<isolated root>/<slug>/<task id>/`` (:func:`isolated_root`), owned by that user.
- ``dir:<absolute path>``: an existing shared folder (created if missing); kept.
- ``worktree[:<repo>]``: a git worktree at ``<repo>/.worktrees/<task id>`` on branch
  ``--branch`` or ``ab/<task id>``; the repo is the given path or the board's target directory.
  Kept; never removed while it holds uncommitted or unpushed work. For a confined worker
  (``isolation`` ``user`` or ``sandbox``) it is a **task repository** instead
  (:func:`prepare` with ``own_repo``): a repository of its own in that folder that borrows the
  target's objects read-only through ``objects/info/alternates``, on the same branch. The
  worker commits there (its ``.git`` is its own, like the rest of its workspace) and can change
  nothing of the target's ``.git``; when it exits the dispatcher fetches that one branch back
  into the target (:func:`collect`), the worker's side of the fetch running in its confinement.

A board whose target directory is a git repository runs its (scratch-by-default) tasks in
per-task worktrees of it; a non-git target is used as a shared ``dir:`` workspace.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import gitsafe
from ..protocol import safefs
from . import gitutil

EXCLUDES = [".board/", ".mcp.json"]
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


class WorkspaceError(Exception):
    """The workspace cannot be prepared; the message says why (shown on the task)."""


@dataclass
class Workspace:
    kind: str
    path: Path
    branch: str | None = None
    repo: Path | None = None
    created: bool = False
    #: a worktree's base: the branch its branch started from (``dispatch.branches``)
    base: str | None = None
    #: ``board``, ``parent`` or ``integration``: where the base came from
    base_source: str | None = None
    #: the worktree's branch was made just now, at its base's tip (nothing on it yet)
    new_branch: bool = False


def reviewer_git_env(ws: Workspace) -> dict[str, str]:
    """The git a reviewer started in ``ws`` may use (:func:`.gitsafe.reviewer_environment`): the
    task worktree through our view, else none."""
    repo = ws.repo if ws.kind == "worktree" else None
    return gitsafe.reviewer_environment(repo, ws.path, ws.branch, ws.base)


#: where the scratch workspaces of workers running as the worker user live, one folder per home
ISOLATED_WORKSPACES = Path("/var/lib/agentboard/workspaces")


def isolated_root(home: Path) -> Path:
    """The folder of a home's scratch workspaces for workers that run as the worker user:
    ``/var/lib/agentboard/workspaces/<first 16 hex digits of the SHA-256 of the home's path>``."""
    return ISOLATED_WORKSPACES / hashlib.sha256(str(home).encode()).hexdigest()[:16]


def scratch_path(home: Path, board: str, task_id: str, *, isolated: bool = False) -> Path:
    if isolated:
        return isolated_root(home) / board / task_id
    return home / "boards" / board / "workspaces" / task_id


def scratch_roots(home: Path, board: str) -> list[Path]:
    """The folders holding a board's scratch workspaces (gc looks in each)."""
    return [home / "boards" / board / "workspaces", isolated_root(home) / board]


def plan(home: Path, board_row: dict[str, Any] | None, task: dict[str, Any], *, isolated: bool = False) -> Workspace:
    """Where a task will run (no side effects). ``isolated``: the worker runs as the worker user."""
    kind = task.get("workspace_kind") or "scratch"
    path = task.get("workspace_path")
    task_id = task["id"]
    target = (board_row or {}).get("default_workdir")
    # the supervisor never implements: its tasks run in a scratch folder, never in the target
    if kind == "scratch" and target and task.get("purpose") != "supervision":
        if not os.path.isdir(target):  # never an empty folder made in its place: the path may be a typo
            raise WorkspaceError(f"the board's target directory {target} does not exist (moved or deleted?); "
                                 f"restore it, or `mkdir -p {target}` for an empty one")
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
    return Workspace("scratch", scratch_path(home, task["board"], task_id, isolated=isolated))


def prepare(ws: Workspace, *, foreign: bool = False, base: Callable[[], tuple[str, str]] | None = None,
            own_repo: bool = False) -> Workspace:
    """Create the workspace on disk (idempotent: a retry reuses it and keeps earlier work).

    ``foreign``: its worker runs as another OS user, so a ``.board`` or ``.mcp.json`` that an
    earlier run replaced by a symbolic link is removed before the dispatcher writes them.

    ``base``: for a worktree whose branch does not exist yet, returns the branch to start it from
    and where that came from (``dispatch.branches.resolve``); without it the branch starts from
    the repository's ``HEAD``. A branch that exists is reused as it is (a retry keeps the commits
    of the earlier attempts).

    ``own_repo``: a new worktree is a task repository (see the module docstring) rather than a
    linked worktree; one that exists keeps the layout it was made with."""
    ws = _prepare(ws, base, own_repo)
    if foreign:
        for p in (ws.path / ".board", ws.path / ".mcp.json"):
            if p.is_symlink():
                p.unlink()
    return ws


def _prepare(ws: Workspace, base: Callable[[], tuple[str, str]] | None = None, own_repo: bool = False) -> Workspace:
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
        if is_task_repo(ws.path):  # a retry of a confined worker: its task repository, as it is
            return ws
        if os.path.lexists(ws.path / ".git"):
            gitsafe.check_worktree_link(repo, ws.path)  # a retry: only the link git wrote is reused
            return ws
        ws.path.parent.mkdir(parents=True, exist_ok=True)
        has_branch = bool(gitutil.git(repo, "rev-parse", "--verify", "-q", f"refs/heads/{ws.branch}", check=False).strip())
        if own_repo:
            if not has_branch:
                ws.base, ws.base_source = base() if base is not None else ("HEAD", "board")
                gitutil.git(repo, "branch", "--no-track", ws.branch, ws.base)
                ws.new_branch = True
            _task_repo(repo, ws.path, ws.branch)
            ws.created = True
            return ws
        gitutil.git(repo, "worktree", "prune", check=False)
        why = gitsafe.check_branch_name(ws.branch)
        if why:
            raise WorkspaceError(f"the task's branch {ws.branch!r} cannot be used: {why}")
        if has_branch:
            gitutil.git(repo, "worktree", "add", str(ws.path), ws.branch, drivers_off=True)
        elif base is not None:
            ws.base, ws.base_source = base()
            gitutil.git(repo, "worktree", "add", "-b", ws.branch, str(ws.path), ws.base, drivers_off=True)
            ws.new_branch = True
        else:
            gitutil.git(repo, "worktree", "add", "-b", ws.branch, str(ws.path), drivers_off=True)
        ws.created = True
    except gitutil.GitError as exc:
        raise WorkspaceError(str(exc)) from None
    except OSError as exc:
        raise WorkspaceError(f"cannot create worktree {ws.path}: {exc.strerror or exc}") from None
    return ws


def _git_new(path: Path, *args: str) -> str:
    """git on the task repository being made at ``path``, named explicitly, through ``gitsafe``
    (protected: no configuration but its own, no hook, no fsmonitor, no driver)."""
    return gitsafe.run_in(path / ".git", path, *args, timeout=300).stdout


def _task_repo(repo: Path, path: Path, branch: str) -> None:
    """Make the task repository at ``path``: its own ``.git`` (no hooks, no template), the
    target's objects borrowed through alternates, ``branch`` at the target's tip of it and
    checked out, the target's committer identity."""
    from ..protocol.boarddir import add_lines

    common, sha = gitutil.git(repo, "rev-parse", "--git-common-dir", f"refs/heads/{branch}^{{commit}}").splitlines()
    objects = (Path(common) if os.path.isabs(common) else (repo / common).resolve()) / "objects"
    ident = gitutil.git(repo, "config", "--get-regexp", r"^user\.(name|email)$", check=False).splitlines()
    path.mkdir(parents=True, exist_ok=True)
    if (path / ".git").is_symlink():
        (path / ".git").unlink()
    _git_new(path, "init", "-q", "--template=", f"--initial-branch={branch}")
    git_dir = path / ".git"
    (git_dir / "objects" / "info" / "alternates").write_text(f"{objects}\n")
    if ident:
        with (git_dir / "config").open("a") as fh:
            fh.write("[user]\n")
            for line in ident:
                key, _, value = line.partition(" ")
                quoted = value.replace("\\", "\\\\").replace('"', '\\"')
                fh.write(f'\t{key.split(".", 1)[1]} = "{quoted}"\n')
    add_lines(git_dir / "info" / "exclude", EXCLUDES)
    _git_new(path, "reset", "-q", "--hard", sha)  # the branch is born at sha, checked out


def _read_data(path: Path, limit: int = 1 << 20) -> str:
    """A small file of a workspace read as data (never through a symbolic link)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit).decode("utf-8", "replace")


def task_repo_head(path: Path) -> str | None:
    """The commit the task repository at ``path`` is on, read as data (its ``HEAD``, the branch
    file or ``packed-refs``; nothing of its configuration is read); None when unreadable."""
    git_dir = path / ".git"
    try:
        head = _read_data(git_dir / "HEAD").strip()
        if not head.startswith("ref: "):
            return head if _SHA.match(head) else None
        ref = head[len("ref: "):]
        if not ref.startswith("refs/heads/") or ".." in ref.split("/"):
            return None
        try:
            sha = _read_data(git_dir / ref).strip()
            return sha if _SHA.match(sha) else None
        except FileNotFoundError:
            pass
        for line in _read_data(git_dir / "packed-refs", 64 << 20).splitlines():
            parts = line.split(" ", 1)
            if len(parts) == 2 and parts[1] == ref and _SHA.match(parts[0]):
                return parts[0]
    except OSError:
        return None
    return None


def is_task_repo(path: Path) -> bool:
    """``path`` is a task repository (its ``.git`` a folder of its own, not a linked worktree's
    ``.git`` file) inside ``<repo>/.worktrees/``."""
    return path.parent.name == ".worktrees" and (path / ".git").is_dir() and not (path / ".git").is_symlink()


def borrowed_objects(path: Path) -> Path:
    """The target's object folder that the task repository at ``path`` borrows."""
    return gitutil.common_dir(path.parent.parent) / "objects"


def collect(path: Path, branch: str, upload_pack: list[str], *, force: bool) -> None:
    """Fetch ``branch`` of the task repository at ``path`` back into its target repository: that
    one ref, its objects checked (``fetch.fsckObjects``), the worker's side of the fetch
    (``git upload-pack``, which reads the task repository's configuration) run as
    ``upload_pack`` — in the worker's confinement, with an empty environment. ``force``: the
    branch may be rewritten (a task's own ``ab/<id>`` branch); else only fast-forwarded. Raises
    :class:`WorkspaceError`."""
    repo = path.parent.parent
    refspec = f"{'+' if force else ''}refs/heads/{branch}:refs/heads/{branch}"
    try:
        gitutil.git(repo, "-c", "fetch.fsckObjects=true", "-c", "transfer.fsckObjects=true", "fetch", "--quiet",
                    "--no-tags", "--no-recurse-submodules", "--no-write-fetch-head", "--upload-pack",
                    shlex.join(upload_pack), str(path), refspec)
    except gitutil.GitError as exc:
        raise WorkspaceError(f"fetching {branch} back from the task repository {path}: {exc}") from None


def hand_over(ws: Workspace, uid: int, gid: int) -> None:
    """Give a worker that runs as another OS user what the dispatcher wrote for it: the
    ``.board/`` files, and a scratch workspace's folder itself (then 0700). Files the worker made
    are its own already; symbolic links and hard-linked files are never followed nor changed. A
    ``dir:`` or worktree folder must already be writable by that user."""
    try:
        if ws.kind == "scratch":
            os.chown(ws.path, uid, gid, follow_symlinks=False)
            ws.path.chmod(0o700)
        elif ws.kind == "worktree" and ws.created and is_task_repo(ws.path):
            with safefs.open_root(ws.path) as root:  # just made by the dispatcher: the worker's from now on
                safefs.walk_chown(root, uid, gid)
        _chown_ours(ws.path, uid, gid)
    except OSError as exc:
        raise WorkspaceError(f"cannot give workspace {ws.path} to the worker user: {exc.strerror or exc}") from None


def _chown_ours(workspace: Path, uid: int, gid: int) -> None:
    """``.board/`` (walked through directory descriptors, never crossing a link) and
    ``.mcp.json`` (only a regular file with one name)."""
    with safefs.open_root(workspace) as root:
        try:
            bdir = root.sub(".board")
        except (FileNotFoundError, safefs.Unsafe):
            pass
        else:
            with bdir:
                safefs.walk_chown(bdir, uid, gid)
        st = root.lstat(".mcp.json")
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
            os.chown(".mcp.json", uid, gid, dir_fd=root.fd, follow_symlinks=False)


def worktree_dirty(path: Path, branch: str | None = None, *, unpushed: bool = True) -> str | None:
    """Why a worktree must be kept (uncommitted or unpushed work, or a ``.git`` that is not the
    link git wrote), or None when it is clean. Read through ``gitsafe``: git never runs through
    the worktree's own ``.git``. ``unpushed=False``: commits found only on its branch do not keep
    it (the branch goes with it: a race's losing attempt)."""
    if not path.exists():
        return None
    task_repo = is_task_repo(path)
    if task_repo:  # its commits count once the target has them (fetched back)
        head = task_repo_head(path)
        kept = gitutil.git(path.parent.parent, "rev-parse", "-q", "--verify", f"{head}^{{commit}}",
                           check=False).strip() if head else ""
        if head is None:
            return "its HEAD cannot be read as a commit"
        if kept != head:
            return "commits not fetched back into the target repository"
    try:
        lines = [ln for ln in gitutil.status_lines(path) if not _excluded(ln)]
    except gitutil.GitError as exc:
        return f"git cannot read it ({exc})"
    if lines:
        return f"{len(lines)} uncommitted change(s)"
    if task_repo or not unpushed:
        return None
    ahead = gitutil.unpushed_commits(path, branch)
    if ahead:
        return f"{ahead} commit(s) not on any other branch or remote"
    return None


def _excluded(line: str) -> bool:
    name = line[3:].strip().strip('"')
    return name.startswith(".board/") or name == ".mcp.json"


def remove(ws_kind: str, path: Path, *, force: bool = False, branch: str | None = None,
           unpushed: bool = True) -> str | None:
    """Remove a workspace; returns why it was kept instead (None when removed). ``unpushed``: as
    for :func:`worktree_dirty`."""
    if not path.exists():
        return None
    if ws_kind == "dir":
        return "dir workspaces are shared folders and are never removed"
    if ws_kind == "worktree":
        repo = path.parent.parent
        try:
            gitsafe.check_worktree_link(repo, path)
        except gitutil.GitError as exc:
            return str(exc)
        if not force:
            why = worktree_dirty(path, branch, unpushed=unpushed)
            if why:
                return why
        if is_task_repo(path):
            shutil.rmtree(path, ignore_errors=True)
            return None
        try:
            gitutil.git(repo, "worktree", "remove", "--force", str(path))
        except gitutil.GitError as exc:
            return str(exc)
        gitsafe.remove_view(repo, path)
        return None
    shutil.rmtree(path, ignore_errors=True)
    return None
