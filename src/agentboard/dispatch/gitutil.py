"""The git operations workspaces, targets, branches and integration need, all run through
:mod:`agentboard.gitsafe` (protected settings, the repository named explicitly, a task's
worktree read through a view of our own: see that module)."""

from __future__ import annotations

from pathlib import Path

from .. import gitsafe
from ..gitsafe import GitError, UnsafeWorktree

#: the committer used when neither the repository nor the user names one
FALLBACK_IDENTITY = ("agentboard", "agentboard@localhost")


def git(cwd: str | Path, *args: str, check: bool = True, timeout: float = 60, drivers_off: bool = False) -> str:
    """``git args`` on the checkout ``cwd`` (its top folder, or a task's worktree), protected."""
    return gitsafe.run(cwd, *args, check=check, timeout=timeout, drivers_off=drivers_off).stdout


def toplevel(path: str | Path) -> str | None:
    """The root of the git work tree containing ``path``, or None when it is not in one."""
    top = gitsafe.toplevel(path)
    return str(top) if top is not None else None


def status_lines(path: str | Path) -> list[str]:
    """``git status --porcelain`` lines of the checkout ``path`` (untracked files included,
    ignored files not). A task's worktree (a folder in ``.worktrees``) is read through its view
    against the commit its ``HEAD`` names (:func:`worktree_status` when the branch is known)."""
    p = Path(path)
    if p.parent.name == ".worktrees":
        tip = gitsafe.worktree_head(p.parent.parent, p, "")
        if tip is None:
            raise GitError(f"cannot tell which commit the worktree {p} is on")
        return gitsafe.worktree_status(p.parent.parent, p, "", tip=tip)
    text = git(p, "status", "--porcelain", "--untracked-files=all", "--ignore-submodules=all", drivers_off=True)
    return [ln for ln in text.splitlines() if ln.strip()]


def worktree_status(repo: str | Path, worktree: str | Path, branch: str) -> list[str]:
    """The status lines of a task's worktree against its branch (see ``gitsafe.worktree_status``)."""
    return gitsafe.worktree_status(repo, worktree, branch)


def unpushed_commits(path: str | Path, branch: str | None = None) -> int:
    """Commits on the checkout's ``HEAD`` (for a task's worktree: read as data from its
    administrative folder) that no other branch or remote-tracking ref contains."""
    p = Path(path)
    try:
        if p.parent.name == ".worktrees":
            repo: Path = p.parent.parent
            head = gitsafe.worktree_head(repo, p, branch or "")
            if head is None:
                return 0
            own = gitsafe.worktree_head_ref(repo, p) or (f"refs/heads/{branch}" if branch else None)
            refs = [r for r in git(repo, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes").split()
                    if r and r != own]
        else:
            repo, head = p, "HEAD"
            head_ref = git(p, "symbolic-ref", "-q", "HEAD", check=False).strip()
            refs = [r for r in git(p, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes").split()
                    if r and r != head_ref]
        out = git(repo, "rev-list", "--count", head, "--not", *refs) if refs else git(repo, "rev-list", "--count", head)
        return int(out.strip() or 0)
    except (GitError, ValueError):
        return 0


def common_dir(path: str | Path) -> Path:
    """The git folder holding the objects, refs and ``info/`` of the checkout ``path``."""
    git_dir, _ = gitsafe.locate(path)
    return gitsafe.common_dir(git_dir)


def add_excludes(path: str | Path, patterns: list[str]) -> None:
    """Add ``patterns`` to the repository's ``info/exclude`` (shared by all its worktrees)."""
    from ..protocol.boarddir import add_lines

    add_lines(common_dir(path) / "info" / "exclude", patterns)


def identity(repo: str | Path) -> list[str]:
    """``-c user.name=… -c user.email=…`` for a commit agentboard makes in ``repo``: the
    repository's or the user's identity (read as values: reading configuration runs nothing),
    else agentboard's."""
    out: list[str] = []
    for key, fallback in zip(("user.name", "user.email"), FALLBACK_IDENTITY, strict=True):
        value = gitsafe.run(repo, "config", "--get", key, check=False, user_config=True).stdout.strip()
        out += ["-c", f"{key}={value or fallback}"]
    return out


__all__ = ["FALLBACK_IDENTITY", "GitError", "UnsafeWorktree", "add_excludes", "common_dir", "git", "identity",
           "status_lines", "toplevel", "unpushed_commits", "worktree_status"]
