"""Where a worktree task's branch starts: its base.

- a task with no parent on a branch starts from the board's base branch (board setting
  ``base``, else the target repository's current branch);
- a task with one parent on a branch starts from that parent's branch, so it sees the parent's
  work;
- a task with several parents on branches starts from an integration branch
  ``ab/<task id>-base`` that merges them (made with ``git merge-tree`` and ``git commit-tree``:
  no checkout is touched). A conflict raises :class:`MergeConflict` listing the files; the task
  is then blocked with kind ``merge_conflict``.

A retry keeps the task's branch (and the commits of its earlier attempts): a branch that exists
already is never moved.

The facts shown about a branch (:func:`facts`: its base, commits ahead and behind, a diff stat)
and the diff of a task's work (:func:`diff`) are read here too, for ``show``, ``context``, the
REST task, the dashboard drawer, ``agentboard diff`` and the reviewer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import gitsafe
from . import gitutil

if TYPE_CHECKING:
    from ..store.engine import Database

#: the suffix of a task's integration branch (``ab/<task id>-base``)
INTEGRATION_SUFFIX = "-base"


class MergeConflict(Exception):
    """The parents' branches do not merge cleanly: ``files`` conflict."""

    def __init__(self, files: list[str], branches: Sequence[str], task_id: str = "ID") -> None:
        self.files = files
        self.branches = list(branches)
        shown = ", ".join(files[:20]) + (f" and {len(files) - 20} more" if len(files) > 20 else "")
        super().__init__(
            f"the parents' branches {', '.join(self.branches)} conflict in {len(files)} file(s): {shown}; "
            "resolve the conflict on one parent's branch, or merge them by hand into a new branch and start "
            f"the task from it with `agentboard edit {task_id} --branch BRANCH`; then `agentboard unblock {task_id}`")


class BaseMissing(Exception):
    """The board's base branch does not exist in its target repository (the message says what to do)."""


@dataclass(frozen=True)
class Base:
    """A task's base: the branch its own branch starts from, and why."""

    branch: str
    #: ``board`` (the board's base branch), ``parent`` or ``integration``
    source: str
    parents: tuple[str, ...] = ()


def has_branch(repo: str | Path, name: str) -> bool:
    return tip(repo, name) is not None


def tip(repo: str | Path, name: str) -> str | None:
    """The commit of branch ``name`` in ``repo`` (None when it has no such branch)."""
    if not name or gitsafe.check_branch_name(name) is not None:
        return None
    return gitsafe.branch_tip(repo, name)


def current_branch(repo: str | Path) -> str | None:
    out = gitutil.git(repo, "symbolic-ref", "--short", "-q", "HEAD", check=False).strip()
    return out or None


def board_base(repo: str | Path, settings: dict[str, Any] | None) -> str:
    """The board's base branch: setting ``base``, else the repository's current branch (``HEAD``
    when it is detached)."""
    named = (settings or {}).get("base")
    if named:
        return str(named)
    return current_branch(repo) or "HEAD"


def check_base(repo: str | Path, name: str) -> str | None:
    """Why ``name`` cannot be a base branch of ``repo`` (None when it can)."""
    if name == "HEAD":
        return None
    if not has_branch(repo, name):
        return f"the repository {repo} has no branch {name!r}"
    return None


def resolve(repo: str | Path, task_id: str, board_settings: dict[str, Any] | None,
            parent_branches: Sequence[tuple[str, str | None]]) -> Base:
    """The base of task ``task_id``: see the module docstring. ``parent_branches``: each parent's
    id and branch (None when it has none); parents whose branch does not exist are left out.
    Raises :class:`MergeConflict` and :class:`gitutil.GitError`."""
    on_branch = [(pid, br) for pid, br in parent_branches if br and has_branch(repo, br)]
    if not on_branch:
        base = board_base(repo, board_settings)
        why = check_base(repo, base)
        if why:
            raise BaseMissing(f"the board's base branch cannot be used: {why}; set an existing one with "
                              "`agentboard boards set SLUG --base BRANCH`, then unblock the task")
        return Base(base, "board")
    if len(on_branch) == 1:
        return Base(on_branch[0][1] or "", "parent", (on_branch[0][0],))
    name = f"ab/{task_id}{INTEGRATION_SUFFIX}"
    parents = tuple(pid for pid, _ in on_branch)
    if has_branch(repo, name):  # a retry: the integration made for the first attempt
        return Base(name, "integration", parents)
    branches = [br or "" for _, br in on_branch]
    head = gitutil.git(repo, "rev-parse", "--verify", branches[0]).strip()
    for br in branches[1:]:
        other = gitutil.git(repo, "rev-parse", "--verify", br).strip()
        if _is_ancestor(repo, other, head):
            continue
        if _is_ancestor(repo, head, other):
            head = other
            continue
        tree, conflicts = merge_tree(repo, head, other)
        if conflicts:
            raise MergeConflict(conflicts, branches, task_id)
        head = gitutil.git(repo, *gitutil.identity(repo), "commit-tree", tree, "-p", head, "-p", other, "-m",
                           f"Integrate {', '.join(branches)} for {task_id}").strip()
    gitutil.git(repo, "branch", name, head)
    return Base(name, "integration", parents)


def _is_ancestor(repo: str | Path, a: str, b: str) -> bool:
    return gitsafe.run(repo, "merge-base", "--is-ancestor", a, b, check=False).returncode == 0


def merge_tree(repo: str | Path, ours: str, theirs: str) -> tuple[str, list[str]]:
    """Merge two commits without touching any checkout: ``(tree id, conflicting files)``."""
    proc = gitsafe.run(repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs,
                       check=False, drivers_off=True)
    lines = proc.stdout.splitlines()
    if proc.returncode not in (0, 1) or not lines:
        raise gitutil.GitError(f"git merge-tree failed in {repo}: {(proc.stderr or '').strip()[-300:]}")
    if proc.returncode == 0:
        return lines[0].strip(), []
    files = sorted({ln.strip() for ln in lines[1:] if ln.strip()})
    return lines[0].strip(), files


# -- what is shown about a branch ------------------------------------------------------------------


@dataclass
class Facts:
    """A worktree task's branch as a reviewer sees it."""

    branch: str | None = None
    base: str | None = None
    ahead: int | None = None
    behind: int | None = None
    files: int = 0
    insertions: int = 0
    deletions: int = 0
    exists: bool = False
    note: str | None = None
    uncommitted: int = 0
    #: the branch has landed on the base (how: merged, squashed, rebased); the counts are then
    #: what landed, not what is left to land
    landed: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"branch": self.branch, "base": self.base, "ahead": self.ahead, "behind": self.behind,
                "files": self.files, "insertions": self.insertions, "deletions": self.deletions,
                "exists": self.exists, "uncommitted": self.uncommitted, "note": self.note, "landed": self.landed}

    def line(self) -> str:
        if not self.exists:
            return self.note or "no branch yet"
        if self.landed:
            return (f"{self.branch} landed on {self.base} ({self.landed}): "
                    f"{self.files} file(s) +{self.insertions} -{self.deletions}"
                    + (f"; {self.uncommitted} uncommitted change(s) not landed" if self.uncommitted else "")
                    + (f"; {self.note}" if self.note else ""))
        return (f"{self.branch} on {self.base}: {self.ahead} ahead, {self.behind} behind; "
                f"{self.files} file(s) +{self.insertions} -{self.deletions}"
                + (f"; {self.uncommitted} uncommitted change(s)" if self.uncommitted else "")
                + (f"; {self.note}" if self.note else ""))


def repo_of(task: Mapping[str, Any]) -> Path | None:
    """The repository of a worktree task (from its worktree path ``<repo>/.worktrees/<id>``)."""
    path = task.get("workspace_path")
    if task.get("workspace_kind") != "worktree" or not path:
        return None
    p = Path(path)
    if p.parent.name == ".worktrees":
        return p.parent.parent
    return p


def facts(task: Mapping[str, Any], default_base: str | None = None,
          landed: tuple[str, str, str, str | None] | None = None) -> Facts:
    """Branch, base, ahead/behind and diff stat of a worktree task (cheap: three git calls).

    ``landed`` (how, the base before it, the commit it made, the branch it landed on): the
    branch's integration put it there, so the diff stat is of what landed (``before..commit``),
    as its diff is, and the base named is that branch (not the one the task started from)."""
    repo = repo_of(task)
    branch = task.get("branch_name")
    base = task.get("base_branch") or default_base
    out = Facts(branch=branch, base=base)
    if repo is None or not branch:
        out.note = "not a worktree task" if task.get("workspace_kind") != "worktree" else "no branch yet"
        return out
    try:
        sha = tip(repo, branch)
        if sha is None:
            out.note = f"branch {branch} does not exist (yet) in {repo}"
            return out
        out.exists = True
        base = base or board_base(repo, None)
        out.base = base
        counts = gitutil.git(repo, "rev-list", "--left-right", "--count", f"{base}...{sha}", "--").split()
        out.behind, out.ahead = int(counts[0]), int(counts[1])
        span = f"{base}...{sha}"
        if landed is not None and all(
                gitsafe.run(repo, "rev-parse", "--verify", "-q", rev + "^{commit}", check=False).returncode == 0
                for rev in landed[1:3]):
            out.landed, span = landed[0], f"{landed[1]}..{landed[2]}"
            out.base = landed[3] or out.base
        stat = gitutil.git(repo, "diff", "--no-ext-diff", "--no-textconv", "--numstat", span)
        for ln in stat.splitlines():
            parts = ln.split("\t")
            if len(parts) >= 3:
                out.files += 1
                out.insertions += int(parts[0]) if parts[0].isdigit() else 0
                out.deletions += int(parts[1]) if parts[1].isdigit() else 0
        wt = Path(task.get("workspace_path") or "")
        if wt.is_dir():
            out.uncommitted = len([ln for ln in gitsafe.worktree_status(repo, wt, branch, tip=sha)
                                   if not ln[3:].startswith((".board/", ".mcp.json"))])
    except (gitutil.GitError, ValueError, IndexError) as exc:
        out.note = str(exc)
    return out


__all__ = ["Base", "BaseMissing", "Facts", "check_settings", "configure", "MergeConflict", "board_base", "check_base", "current_branch", "facts", "has_branch",
           "merge_tree", "repo_of", "resolve", "tip"]


def check_settings(row: Mapping[str, Any], settings: dict[str, Any]) -> None:
    """Check a board's git settings against its target directory (``row`` is the board as
    stored, ``settings`` the new settings): a ``base`` branch the target repository does not
    have, ``integrate`` without a git target, an ``env_setup`` that is not a virtualenv are
    refused (:class:`InvalidInput`). Settings that did not change are not checked again."""
    from ..domain.errors import InvalidInput
    from ..protocol import project_env

    old = row.get("settings") or {}
    slug = row.get("slug")
    target = str(row.get("default_workdir") or "")
    is_git = bool(target) and gitutil.toplevel(target) is not None
    base = settings.get("base")
    if base and base != old.get("base"):
        if not is_git:
            raise InvalidInput(f"board {slug} has no git target directory, so it has no base branch; "
                               "create the board with --workdir pointing at a git repository")
        why = check_base(target, base)
        if why:
            raise InvalidInput(f"{why}: give an existing branch (git -C {target} branch --list)")
    mode = settings.get("integrate")
    if mode not in (None, "none") and mode != old.get("integrate") and not is_git:
        raise InvalidInput(f"board {slug} has no git target directory: there is no branch to integrate")
    if settings.get("env_setup") and settings.get("env_setup") != old.get("env_setup"):
        why = project_env.check_venv({**row, "settings": settings})
        if why:
            raise InvalidInput(f"{why}: give the folder of a virtualenv (python -m venv DIR)")


def configure(db: Database, slug: str, *, actor: str | None = None, **changes: str | bool | None) -> dict[str, Any]:
    """Set a board's git settings (``base``, ``integrate``, ``review_before_integrate``,
    ``env_setup``; ``""`` clears one),
    checked first (:func:`check_settings`); the board is unchanged when one is refused."""
    from ..kernel import boards as kboards

    row = kboards.get(db, slug)
    settings = dict(row.get("settings") or {})
    for key, value in changes.items():
        if value is None:
            continue
        if value == "":
            settings.pop(key, None)
        else:
            settings[key] = value
    check_settings(row, settings)
    return kboards.update(db, slug, settings=settings, actor=actor)
