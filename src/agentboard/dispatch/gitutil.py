"""The few git operations workspaces and targets need (run with the real ``git``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


class GitError(Exception):
    pass


def git(cwd: str | Path, *args: str, check: bool = True, timeout: float = 60) -> str:
    env = dict(os.environ)
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    try:
        proc = subprocess.run(
            ["git", "-C", str(cwd), *args], capture_output=True, text=True, env=env, timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)} timed out in {cwd}") from None
    if check and proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise GitError(f"git {' '.join(args)} failed in {cwd}: {msg[-1] if msg else proc.returncode}")
    return proc.stdout


def toplevel(path: str | Path) -> str | None:
    """The root of the git work tree containing ``path``, or None when it is not in one."""
    p = Path(path)
    if not p.is_dir():
        return None
    try:
        out = git(p, "rev-parse", "--show-toplevel").strip()
    except GitError:
        return None
    return out or None


def status_lines(path: str | Path) -> list[str]:
    """``git status --porcelain`` lines (untracked files included, ignored files not)."""
    return [ln for ln in git(path, "status", "--porcelain", "--untracked-files=all").splitlines() if ln.strip()]


def unpushed_commits(path: str | Path) -> int:
    """Commits on the checkout's HEAD that no other branch or remote-tracking ref contains."""
    try:
        head_ref = git(path, "symbolic-ref", "-q", "HEAD", check=False).strip()
        refs = [
            r for r in git(path, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes").split()
            if r and r != head_ref
        ]
        out = git(path, "rev-list", "--count", "HEAD", "--not", *refs) if refs else git(path, "rev-list", "--count", "HEAD")
        return int(out.strip() or 0)
    except (GitError, ValueError):
        return 0


def common_dir(path: str | Path) -> Path:
    out = git(path, "rev-parse", "--git-common-dir").strip()
    p = Path(out)
    return p if p.is_absolute() else (Path(path) / p).resolve()


def add_excludes(path: str | Path, patterns: list[str]) -> None:
    """Add ``patterns`` to the repository's ``info/exclude`` (shared by all its worktrees)."""
    from ..protocol.boarddir import add_lines

    add_lines(common_dir(path) / "info" / "exclude", patterns)
