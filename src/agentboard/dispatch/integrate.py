"""What finishing a worktree task does with its branch (board setting ``integrate``): the git
work only; when it runs (approval, a task without review becoming done) is ``dispatch.finish``.

- ``none`` (the default): the branch is left as it is (an ``integration_left`` event says so);
- ``merge``: a merge commit of the branch onto the board's base branch;
- ``squash``: one commit on the base branch holding the branch's changes;
- ``rebase``: the branch's commits replayed onto the base branch, which then fast-forwards;
- ``pr``: the branch is pushed to ``origin`` and a pull request is opened with the ``gh`` CLI
  (installed and authenticated); its URL is recorded on the task.

The new commit is made with ``git merge-tree`` / ``git commit-tree`` (rebase: in the task's
worktree), so nothing is touched until it exists; then the base branch moves in one step (a
fast-forward of the target's checkout when it has the base branch checked out). Integration is
refused (:class:`Refused`, nothing changed) when the
task's worktree holds uncommitted work (what its worker left is committed first by
:func:`commit_pending`, called by ``dispatch.finish``, but never a file larger than
``gitsizes.COMMIT_MAX``: the refusal names it and its size), the branch holds files in agentboard's own folders
(``.worktrees/``: other tasks' live workspaces; ``.board/``), the target's working tree has
uncommitted changes in files the task changed or holds untracked or ignored files the branch
would write over (git replaces ignored files without asking), the base branch moved in a way that
conflicts, or ``gh`` cannot be used.

Integrations into one repository run one at a time (a lock file in its git folder, held by any
process of any dispatcher or server on the machine): two tasks finishing at once would each make
their commit from the same base, and the second's step would find the base moved and be refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import gitsafe, gitsizes
from ..store.engine import Row
from . import branches, gitutil

MODES = ("none", "merge", "squash", "rebase", "pr")
_NOT_WORK = (".board/", ".mcp.json", ".worktrees/")
_URL = re.compile(r"https?://\S+")


class Refused(Exception):
    """The branch cannot be integrated; the message says why and what to do."""

    def __init__(self, reason: str, detail: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.detail = detail or {}


@dataclass
class Outcome:
    """What integrating did: ``outcome`` (a ``kernel.branches.OUTCOMES`` value) and details."""

    outcome: str
    pr_url: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def _git(repo: str | Path, *args: str, drivers_off: bool = False,
         user_config: bool = False) -> subprocess.CompletedProcess[str]:
    return gitsafe.run(repo, *args, check=False, timeout=120, drivers_off=drivers_off, user_config=user_config)


def _identity(repo: Path) -> list[str]:
    """``-c user.name=… -c user.email=…``: the repository's or the user's committer identity, else agentboard's."""
    return gitutil.identity(repo)


def _changed(lines: list[str]) -> list[str]:
    names = []
    for ln in lines:
        name = ln[3:].strip().strip('"')
        if " -> " in name:
            name = name.split(" -> ", 1)[1]
        if not name.startswith(_NOT_WORK):
            names.append(name)
    return names


def _ours(path: str) -> bool:
    """Whether ``path`` (of a branch's tree) lies in a folder of agentboard's own: the target's
    ``.worktrees/`` (other tasks' workspaces) or any ``.board/`` (a workspace's protocol folder)."""
    parts = path.split("/")
    return parts[0] == ".worktrees" or ".board" in parts[:-1]


def _untracked(repo: Path, base: str, touched: list[str]) -> list[str]:
    """The paths of ``touched`` present in ``repo``'s checkout but not tracked at ``base``: what a
    fast-forward would overwrite silently when they are ignored."""
    present = [f for f in touched if os.path.lexists(repo / f)]
    if not present:
        return []
    tracked = set(gitutil.git(repo, "ls-tree", "-r", "-z", "--name-only", base).split("\0"))
    return sorted(f for f in present if f not in tracked)


def _big(names: list[tuple[str, int]]) -> str:
    return ", ".join(f"{name} ({gitsizes.human(size)})" for name, size in names[:10]) + \
        (f" and {len(names) - 10} more" if len(names) > 10 else "")


def too_big_reason(names: list[tuple[str, int]]) -> str:
    """Why the files ``names`` (with their sizes) were not committed for the worker."""
    one = len(names) == 1
    return (f"{_big(names)} {'is' if one else 'are'} larger than the {gitsizes.human(gitsizes.COMMIT_MAX)} "
            f"agentboard commits on a worker's behalf: left uncommitted in the worktree")


def _pending_too_big(wt: Path, git: gitsizes.Git) -> list[tuple[str, int]]:
    """The files ``git add -A`` would take from the worktree ``wt`` that are larger than
    ``gitsizes.COMMIT_MAX`` (measured with ``lstat``: nothing is read)."""
    untracked = git("ls-files", "-z", "--others", "--exclude-standard", "--", ":(top)").stdout.split("\0")
    changed = [c.path for c in gitsizes.changes(git, ("HEAD",)) if c.new_mode != "000000"]
    names = sorted({n for n in (*untracked, *changed) if n and not n.startswith(_NOT_WORK)})
    return gitsizes.too_big(wt, names, gitsizes.COMMIT_MAX)


def _staged_too_big(git: gitsizes.Git) -> list[tuple[str, int]]:
    """What the index holds beyond ``HEAD`` that is larger than ``gitsizes.COMMIT_MAX`` (a file
    the worker staged itself, or one grown since it was measured): sizes from the objects' headers."""
    staged = [c for c in gitsizes.changes(git, ("--cached", "HEAD")) if c.new_mode != "000000"]
    sizes = gitsizes.blob_sizes(git, [c.new for c in staged])
    return [(c.path, sizes[c.new]) for c in staged if sizes.get(c.new, 0) > gitsizes.COMMIT_MAX]


def commit_pending(repo: Path, task: Row, message: str) -> dict[str, Any] | None:
    """Commit on its branch what a worktree task's worker left uncommitted when it reported a
    success the dispatcher verified (agent CLIs often leave their edits uncommitted, and some
    cannot commit in a linked worktree at all): ``{"commit", "files"}``, or None when nothing
    was pending or the worktree is not one agentboard runs git in (a task repository's worker
    commits in its own repository). With the target's identity, no hook or filter of the
    worker's (``gitsafe``), and never agentboard's own files. A file larger than
    ``gitsizes.COMMIT_MAX`` is not committed (nor read): it stays in the worktree, the answer
    lists it (``not_committed``: path and size; ``note``; ``commit`` None when nothing else
    was pending) and :func:`integrate` refuses the branch naming it."""
    branch = str(task.get("branch_name") or "")
    wt = Path(task.get("workspace_path") or "")
    if not branch or not task.get("workspace_path") or not wt.is_dir() or not os.path.lexists(wt / ".git"):
        return None
    try:
        pending = _changed(gitutil.worktree_status(repo, wt, branch))
        if not pending:
            return None

        def git(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
            return gitsafe.run(wt, *args, check=False, drivers_off=True, input=input)

        big = _pending_too_big(wt, git)
        gitsafe.run(wt, "add", "-A", "--", ":(top)", *[f":(top,literal,exclude){n}" for n, _ in big],
                    drivers_off=True)
        big += [b for b in _staged_too_big(git) if b[0] not in {n for n, _ in big}]
        # never agentboard's own files, even where the worker took them out of the excludes
        gitsafe.run(wt, "reset", "-q", "--", *[p.rstrip("/") for p in _NOT_WORK],
                    *[f":(top,literal){n}" for n, _ in big], drivers_off=True)
        left = {n for n, _ in big}
        done: dict[str, Any] = {"commit": None, "files": [p for p in pending if p not in left][:50]}
        if git("diff", "--cached", "--quiet", "HEAD", "--").returncode != 0:
            ident = [c for c in gitutil.identity(repo) if c != "-c"]
            gitsafe.run(wt, "commit", "-q", "--no-verify", "-m", message, drivers_off=True, extra_config=ident)
            done["commit"] = gitsafe.out(wt, "rev-parse", "HEAD").strip()
        if not big:
            return done if done["commit"] else None
        return {**done, "not_committed": [{"path": n, "size": size} for n, size in big[:50]],
                "note": too_big_reason(big)}
    except gitsafe.GitError:  # a task repository, or nothing git could commit: integration says why
        return None


@contextlib.contextmanager
def _one_at_a_time(repo: Path) -> Iterator[None]:
    """Hold ``repo``'s integration lock: ``<repo>/.git/agentboard/integrate.lock`` (the owner's
    repository, never a worker's), else a file named after the repository in the temporary folder."""
    folder = repo / ".git" / "agentboard"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "integrate.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        name = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:16]
        fd = os.open(Path(tempfile.gettempdir()) / f"agentboard-integrate-{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def integrate(repo: Path, task: Row, mode: str, base: str, *, again: str | None = None) -> Outcome:
    """Integrate the task's branch into ``base`` in ``repo`` (see the module docstring); raises
    :class:`Refused` with nothing changed. One integration into ``repo`` at a time. ``again``:
    how a person tries again once the cause of a refusal is fixed (default: approve the task
    again; a race's pick says to pick it again)."""
    with _one_at_a_time(repo):
        return _integrate(repo, task, mode, base,
                          again or f"approve it again (`agentboard review {task['id']} --approve`)")


def _integrate(repo: Path, task: Row, mode: str, base: str, again: str) -> Outcome:
    branch = task.get("branch_name") or ""
    title = str(task.get("title") or task["id"])
    if not branches.has_branch(repo, branch):
        raise Refused(f"the task's branch {branch!r} does not exist in {repo}; nothing to integrate")
    if base != "HEAD" and not branches.has_branch(repo, base):
        raise Refused(f"the base branch {base!r} does not exist in {repo}: set it with "
                      "`agentboard boards set SLUG --base BRANCH`")
    worktree = Path(task.get("workspace_path") or "")
    if task.get("workspace_path") and worktree.is_dir() and os.path.lexists(worktree / ".git"):
        pending = _changed(gitutil.worktree_status(repo, worktree, branch))
        big = gitsizes.too_big(worktree, pending, gitsizes.COMMIT_MAX)
        if big:
            it = "it" if len(big) == 1 else "them"
            raise Refused(f"{_big(big)} in the task's worktree {'is' if it == 'it' else 'are'} larger than the "
                          f"{gitsizes.human(gitsizes.COMMIT_MAX)} agentboard commits on a worker's behalf, so not "
                          f"on the branch: commit {it} there yourself or remove {it} from {worktree}, then {again}",
                          {"files": [n for n, _ in big][:50], "sizes": dict(big[:50]),
                           "limit": gitsizes.COMMIT_MAX})
        if pending:
            raise Refused(f"the task's worktree {worktree} has uncommitted changes ({', '.join(pending[:10])}); "
                          f"commit them on the branch or discard them, then {again}",
                          {"files": pending[:50]})
    touched = [f for f in gitutil.git(repo, "diff", "--no-ext-diff", "--no-textconv", "--name-only", "-z",
                                      f"{base}...{branch}", "--").split("\0") if f]
    ours = [f for f in touched if _ours(f)]
    if ours:
        raise Refused(f"the task's branch holds files in agentboard's own folders ({', '.join(ours[:10])}): "
                      "`.worktrees/` holds other tasks' live workspaces and `.board/` a workspace's "
                      f"exchange with the dispatcher; remove them from {branch}, then {again}",
                      {"files": ours[:50]})
    checked_out = branches.current_branch(repo) == base
    if checked_out:
        dirty = set(_changed(gitutil.status_lines(repo)))
        clash = sorted(dirty & set(touched))
        if clash:
            raise Refused(f"the target {repo} has uncommitted changes in files this task changes "
                          f"({', '.join(clash[:10])}); commit or stash them, then {again}",
                          {"files": clash})
        untracked = _untracked(repo, base, touched)
        if untracked:
            raise Refused(f"the task's branch would write over files the target {repo} holds untracked or "
                          f"ignored ({', '.join(untracked[:10])}), which git replaces without asking; move "
                          f"them away (or remove them from the branch), then {again}",
                          {"files": untracked[:50]})
    base_sha = gitutil.git(repo, "rev-parse", "--verify", base).strip()
    if mode == "pr":
        return _pull_request(repo, task, branch, base, touched, again)
    if mode == "rebase":
        new = _rebase(repo, worktree, branch, base, base_sha, again)
    else:
        tree, conflicts = branches.merge_tree(repo, base_sha, branch)
        if conflicts:
            raise Refused(f"the base branch {base} moved in a way that conflicts with the task's branch "
                          f"in {', '.join(conflicts[:10])}; merge {base} into {branch} (or rebase it), then "
                          f"{again}", {"files": conflicts})
        branch_sha = gitutil.git(repo, "rev-parse", "--verify", branch).strip()
        if mode == "merge":
            msg = f"Merge {branch}: {title} ({task['id']})"
            parents = ["-p", base_sha, "-p", branch_sha]
        else:
            summary = str(task.get("result") or "").strip()
            msg = f"{title} ({task['id']})" + (f"\n\n{summary}" if summary else "")
            parents = ["-p", base_sha]
        proc = _git(repo, *_identity(repo), "commit-tree", tree, *parents, "-m", msg)
        if proc.returncode != 0:
            raise Refused(f"git commit-tree failed in {repo}: {proc.stderr.strip()[-300:]}")
        new = proc.stdout.strip()
    _land(repo, base, base_sha, new, checked_out, again)
    outcome = {"merge": "merged", "squash": "squashed", "rebase": "rebased"}[mode]
    # what landed: the base before it to the commit it made (the branch's own changes since its
    # merge base also hold what its parents' branches brought, landed on the base already)
    landed = [f for f in gitutil.git(repo, "diff", "--no-ext-diff", "--no-textconv", "--name-only", "-z",
                                     base_sha, new, "--").split("\0") if f]
    return Outcome(outcome, detail={"base": base, "before": base_sha, "commit": new, "files": landed[:50],
                                    "branch": branch})


def _rebase(repo: Path, worktree: Path, branch: str, base: str, base_sha: str, again: str) -> str:
    """Replay the branch's commits onto ``base`` in a detached worktree of our own (never in the
    task's worktree, whose worker controls it); a conflict aborts the rebase and refuses."""
    if _git(repo, "merge-base", "--is-ancestor", base_sha, branch).returncode == 0:
        return gitutil.git(repo, "rev-parse", "--verify", branch).strip()
    temp = repo / ".worktrees" / f".rebase-{branch.replace('/', '-')}"
    if os.path.lexists(temp):
        _git(repo, "worktree", "remove", "--force", str(temp))
    _git(repo, "worktree", "prune")
    head = gitutil.git(repo, "rev-parse", "--verify", f"refs/heads/{branch}").strip()
    gitutil.git(repo, "worktree", "add", "--detach", str(temp), head, drivers_off=True)
    where = temp
    try:
        proc = _git(where, *_identity(repo), "rebase", base_sha, drivers_off=True)
        if proc.returncode != 0:
            files = [f for f in _git(where, "diff", "--no-ext-diff", "--name-only", "--diff-filter=U").stdout.splitlines()
                     if f]
            _git(where, "rebase", "--abort", drivers_off=True)
            raise Refused(f"the base branch {base} moved in a way that conflicts with the task's branch "
                          f"({', '.join(files[:10]) or proc.stderr.strip()[-200:]}); rebase {branch} by hand, "
                          f"then {again}", {"files": files})
        return gitutil.git(where, "rev-parse", "HEAD").strip()
    finally:
        _git(repo, "worktree", "remove", "--force", str(temp))


def _land(repo: Path, base: str, old: str, new: str, checked_out: bool, again: str) -> None:
    """Move ``base`` from ``old`` to ``new`` in one step (the checkout follows when it has it)."""
    if checked_out:
        proc = _git(repo, "merge", "--ff-only", "-q", new, drivers_off=True)
        if proc.returncode != 0:
            raise Refused(f"the target {repo} could not fast-forward {base}: {proc.stderr.strip()[-300:]}; "
                          f"commit or stash its changes, then {again}")
        return
    proc = _git(repo, "update-ref", f"refs/heads/{base}", new, old)
    if proc.returncode != 0:
        raise Refused(f"the base branch {base} moved while integrating; {again}")


def gh_status() -> str | None:
    """Why ``gh`` cannot open a pull request here (None when it can)."""
    gh = shutil.which("gh")
    if gh is None:
        return ("the gh CLI is not installed: install it (https://cli.github.com) and run `gh auth login`, "
                "or set the board's integrate to merge, squash, rebase or none")
    proc = subprocess.run([gh, "auth", "status"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=60)
    if proc.returncode != 0:
        return f"gh is not authenticated ({(proc.stderr or proc.stdout).strip()[-200:]}): run `gh auth login`"
    return None


def _pull_request(repo: Path, task: Row, branch: str, base: str, touched: list[str], again: str) -> Outcome:
    why = gh_status()
    if why:
        raise Refused(why)
    if not _git(repo, "remote", "get-url", "origin").stdout.strip():
        raise Refused(f"the target {repo} has no remote named origin to push {branch} to: add one "
                      f"(`git remote add origin URL`), then {again}")
    push = _git(repo, "push", "-u", "origin", f"refs/heads/{branch}:refs/heads/{branch}", user_config=True)
    if push.returncode != 0:
        raise Refused(f"pushing {branch} to origin failed: {push.stderr.strip()[-300:]}")
    title = f"{task.get('title') or task['id']} ({task['id']})"
    body = (str(task.get("result") or "").strip() or str(task.get("body") or "").strip()
            or f"Task {task['id']} on agentboard.")
    gh = shutil.which("gh") or "gh"
    proc = subprocess.run([gh, "pr", "create", "--base", base, "--head", branch, "--title", title, "--body", body],
                          cwd=str(repo), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    if proc.returncode != 0:
        raise Refused(f"gh pr create failed: {(proc.stderr or proc.stdout).strip()[-300:]} (the branch is pushed)")
    urls = _URL.findall(proc.stdout)
    url = urls[-1] if urls else None
    return Outcome("pr_opened", url, {"base": base, "branch": branch, "files": touched[:50]})


__all__ = ["MODES", "Outcome", "Refused", "commit_pending", "gh_status", "integrate", "too_big_reason"]
