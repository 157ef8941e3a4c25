"""Files a task's checks would see that its branch will not carry: hidden from git by ignore
rules the task itself added or changed.

Verification runs in the task's worktree; integration takes its branch. A file git ignores is
in the one and not the other. Ignored files a project's own rules name (``__pycache__/``,
``node_modules/``) are the usual build leftovers and dependencies; but a worker that adds a
``.gitignore`` of its own (``calc/.gitignore`` holding ``*``) hides whatever it likes from the
branch, the diff and the reviewer while the checks still import it. :func:`hidden_by_task` finds
those: every ignored file whose deciding rule (``git check-ignore -v``) is in a ``.gitignore``
that is itself ignored (so it never reaches the branch, nor shows in a diff) and that the base
branch's copy of that file does not hold. A rule file the branch carries shows in the diff the
reviewer reads. Every git call goes through :mod:`agentboard.gitsafe`, on
the worktree's view (never the worktree's own ``.git``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import gitsafe

#: at most this many hidden files are named
SHOWN = 20


def hidden_by_task(repo: Path, worktree: Path, branch: str, base: str | None) -> list[str]:
    """The files of ``worktree`` git ignores by a ``.gitignore`` of the task's that hides itself
    too (``rules (pattern): path``), at most :data:`SHOWN`; empty when there are none or git
    cannot tell. ``base``: the base branch (None: the repository's current branch)."""
    try:
        repo, wt = Path(repo), Path(os.path.abspath(worktree))
        gitsafe.check_worktree_link(repo, wt)
        tip = gitsafe.branch_tip(repo, branch)
        if not tip:
            return []
        view = gitsafe._view(repo, wt, tip)  # the worktree read through agentboard's own git dir
        # a folder ignored as a whole is one entry (node_modules/ is not walked) ...
        entries = _ignored(view, wt, "--directory", "--no-empty-directory")
        decided = _rules(view, wt, entries)
        # ... unless no rule names the folder itself: then rules inside it hide its files
        inner = [e for e in entries if e.endswith("/") and e.rstrip("/") not in decided]
        if inner:
            decided.update(_rules(view, wt, _ignored(view, wt, "--", *inner)))
        out: list[str] = []
        known: dict[str, set[str]] = {}
        for path, (source, pattern) in decided.items():
            if Path(source).name != ".gitignore" or os.path.isabs(source) or source not in decided:
                # the repository's info/exclude, a rule file of the user's, or one the branch
                # carries (committed, or to be committed with the work: its rules show in the diff)
                continue
            if source not in known:
                known[source] = _base_rules(repo, base or "HEAD", source)
            if pattern not in known[source]:
                out.append(f"{source} ({pattern}): {path}")
                if len(out) >= SHOWN:
                    break
        return out
    except (gitsafe.GitError, OSError, ValueError):
        return []


def refusal(task: Mapping[str, Any], workspace: Path) -> str | None:
    """Why the checks may not run on a worktree task's ``workspace`` as it is (files hidden by
    ignore rules the task added, :func:`hidden_by_task`), or None."""
    path = Path(os.path.abspath(workspace))
    branch = task.get("branch_name")
    if task.get("workspace_kind") != "worktree" or not branch or path.parent.name != ".worktrees":
        return None  # a task repository is its worker's own: its branch is fetched, not read here
    found = hidden_by_task(path.parent.parent, path, str(branch), task.get("base_branch"))
    if not found:
        return None
    return ("the worktree hides files from git with ignore rules this task added, so the checks would "
            "run on files its branch does not carry: " + "; ".join(found)
            + ". Remove those files or those rules (or commit the files), then finish again")


def _ignored(view: Path, wt: Path, *args: str) -> list[str]:
    listed = gitsafe.run_in(view, wt, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", *args).stdout
    return [p for p in listed.split("\0") if p]


def _rules(view: Path, wt: Path, paths: list[str]) -> dict[str, tuple[str, str]]:
    """Each of ``paths`` git ignores, with the rule that decided it: its file and its pattern."""
    if not paths:
        return {}
    proc = gitsafe.run_in(view, wt, "check-ignore", "-v", "-z", "--no-index", "--stdin",
                          input="\0".join(p.rstrip("/") for p in paths) + "\0", check=False)
    fields = proc.stdout.split("\0")
    return {fields[i + 3]: (fields[i], fields[i + 2]) for i in range(0, len(fields) - 3, 4) if fields[i]}


def _base_rules(repo: Path, base: str | None, rules: str) -> set[str]:
    """The patterns of the rule file ``rules`` (relative to the top) on the base branch."""
    if not base:
        return set()
    proc = gitsafe.run(repo, "cat-file", "blob", f"{base}:{rules}", check=False)
    if proc.returncode != 0:
        return set()
    return {ln.strip() for ln in proc.stdout.splitlines() if ln.strip() and not ln.startswith("#")}


__all__ = ["SHOWN", "hidden_by_task", "refusal"]
