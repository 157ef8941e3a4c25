"""Housekeeping: scratch workspaces of finished tasks, old worker logs, old events, the
losing attempts of finished races (their worktrees, then their branches), and what purged tasks
left behind (:func:`after_purge` right after a purge; :func:`collect` finds the orphans later:
the worktrees and ``ab/`` branches, in a board's target, of tasks that board purged).

Never removed: ``dir:`` workspaces (shared folders), a worktree with uncommitted work (or, but
for a race's losing attempt and a purged task's worktree, unpushed commits: those stay on its
branch), the workspace of a task that is not finished or whose children may still read it, the
log of a running task, the picked attempt's branch, anything of a race that is not finished
(done or archived), a branch a task still works on or starts from, and a purged task's branch
with commits that would be lost (on no other branch, no remote, and not on the board's base
branch, neither as they are nor squashed or rebased). What is kept is listed with why, and, for
a purged task's leftovers, with the git commands that remove it.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import gitsafe
from ..domain import states
from ..domain.errors import Unavailable
from ..domain.model import TASK_ID_RE
from ..kernel import boards as kboards
from ..kernel import dispatching as kd
from ..kernel import lookups, maintenance
from ..kernel import purge as kpurge
from ..kernel import races as kraces
from ..kernel import runs as kr
from ..store.engine import Database, Row
from . import branches as kbranches
from . import gitutil, workspaces

_FINISHED = states.SATISFIED  # a finished task's scratch workspace can go
#: the branches agentboard makes for a task: ``ab/<task id>``, its integration branch
#: ``ab/<task id>-base``, a race's attempts ``ab/<race id>-a<n>``
_TASK_BRANCH = re.compile(r"^ab/(t_[0-9a-f]{8,32})(-base|-a[0-9]+)?$")


def collect(db: Database, home: Path, *, boards: list[str] | None = None, log_retention_days: int = 30,
            event_retention_days: int = 30, now: float | None = None, dry_run: bool = False,
            progress: Callable[[str, int, int | None], None] | None = None) -> dict[str, Any]:
    """Remove what is no longer needed; with ``dry_run`` only report what would go (the lists
    and counts are the same, nothing is touched). ``progress(phase, done, total)``: the scratch
    workspaces looked at, per board."""
    now = now or time.time()
    report: dict[str, Any] = {"workspaces_removed": [], "worktrees_removed": [], "branches_removed": [], "kept": [],
                              "logs_removed": 0, "events_pruned": 0, "dry_run": dry_run, "wal_checkpointed": False}
    slugs = boards or lookups.board_slugs(db)
    targets: set[str] = set()  # each target repository looked at once (an archived board may share one)
    for slug in slugs:
        dirs = [d for root in workspaces.scratch_roots(home, slug) if root.is_dir()
                for d in root.iterdir() if d.is_dir()]
        status, busy = kd.gc_statuses(db, [d.name for d in dirs])
        for n, d in enumerate(dirs, 1):
            if progress is not None:
                progress(f"{slug}: workspaces", n, len(dirs))
            st = status.get(d.name)
            if st is not None and st not in _FINISHED:
                continue
            if d.name in busy:
                report["kept"].append({"path": str(d), "why": "a child task that may read it is still active"})
                continue
            report["workspaces_removed"].append(str(d))
            if dry_run:
                continue
            workspaces.remove("scratch", d)
            if st is not None:
                try:
                    kr.record_telemetry(db, slug, d.name, "workspace_removed", {"path": str(d), "by": "gc"})
                except Exception:
                    pass
        _race_losers(db, home, slug, report, dry_run)
        # worktrees of archived tasks go when clean; dirty ones are always kept. A race's attempts
        # go by the rules for races only: a finished race's losers above; an unfinished race's
        # (running, in review, blocked) never; the picked attempt's worktree is the race's own
        attempts = maintenance.race_attempt_ids(db, slug)
        seen: set[Path] = set()
        for row in kd.finished_worktree_tasks(db, slug):
            if row["id"] in attempts:
                continue
            path = Path(row["workspace_path"])
            if path.parent.name != ".worktrees" or not path.exists() or path in seen:
                continue
            seen.add(path)
            if row["status"] != "archived":
                why = workspaces.worktree_dirty(path)
                if why:
                    report["kept"].append({"path": str(path), "why": why})
                continue
            why = workspaces.worktree_dirty(path) if dry_run else workspaces.remove("worktree", path)
            if why:
                report["kept"].append({"path": str(path), "why": why})
            else:
                report["worktrees_removed"].append(str(path))
        _orphans(db, slug, report, dry_run, targets)
        logs = home / "boards" / slug / "logs"
        if logs.is_dir():
            cutoff = now - log_retention_days * 86400
            running = kd.running_task_ids(db, slug)
            files = [f for f in logs.iterdir() if f.name.split(".")[0] not in running]
            known, _ = kd.gc_statuses(db, sorted({f.name.split(".")[0] for f in files
                                                  if TASK_ID_RE.match(f.name.split(".")[0])}))
            for f in files:
                if not f.is_file():
                    continue
                tid = f.name.split(".")[0]
                try:  # a purged task's log goes at once
                    if f.stat().st_mtime < cutoff or (TASK_ID_RE.match(tid) and tid not in known):
                        if not dry_run:
                            f.unlink()
                        report["logs_removed"] += 1
                except OSError:
                    pass
    try:  # the database's part last: on a full disk what was freed above is still reported
        report["events_pruned"] = maintenance.prune_events(db, retention_days=event_retention_days, dry_run=dry_run)
        if not dry_run:
            report["wal_checkpointed"] = maintenance.checkpoint(db)
    except Unavailable as exc:
        report["unfinished"] = exc.message
    return report


def _race_losers(db: Database, home: Path, slug: str, report: dict[str, Any], dry_run: bool) -> None:
    """Remove the losing attempts of the board's finished races: each one's worktree when it
    holds no uncommitted work (its commits go with its branch), then its branch, in the race's
    target repository."""
    branches: dict[Path, set[str] | None] = {}
    for row in kraces.finished_losers(db, slug):
        _race_loser(home, row, branches, report, dry_run)


def _race_loser(home: Path, row: Row, branches: dict[Path, set[str] | None], report: dict[str, Any],
                dry_run: bool) -> None:
    task = {"id": row["attempt_task_id"], "board": row["board"], "workspace_kind": row["workspace_kind"],
            "workspace_path": row["workspace_path"], "branch_name": row["branch_name"] or row["branch"],
            "purpose": kraces.ATTEMPT}
    try:
        ws = workspaces.plan(home, {"default_workdir": row["default_workdir"]}, task)
    except workspaces.WorkspaceError:
        return  # its repository is gone: nothing of it is left to remove
    if ws.kind != "worktree" or ws.repo is None or ws.branch is None:
        return
    repo, branch = ws.repo, ws.branch
    if repo not in branches:
        try:
            branches[repo] = set(gitutil.git(repo, "for-each-ref", "--format=%(refname)", "refs/heads").split())
        except (gitutil.GitError, OSError):
            branches[repo] = None
    known = branches[repo]
    has_branch = known is not None and f"refs/heads/{branch}" in known
    if not ws.path.exists() and not has_branch:
        return  # removed by an earlier gc
    label = f"attempt {row['n']} of race {row['race']}"
    if row["state"] in kraces.ACTIVE or int(row["open_runs"] or 0) or row["status"] == states.RUNNING:
        report["kept"].append({"path": str(ws.path), "branch": branch, "why": f"{label} is still stopping"})
        return
    if row["users"]:
        report["kept"].append({"path": str(ws.path), "branch": branch,
                               "why": f"task {', '.join(row['users'])} works on or from its branch {branch}"})
        return
    if ws.path.exists():
        why = (workspaces.worktree_dirty(ws.path, branch, unpushed=False) if dry_run
               else workspaces.remove("worktree", ws.path, branch=branch, unpushed=False))
        if why:
            report["kept"].append({"path": str(ws.path), "branch": branch,
                                   "why": f"{why}; its branch {branch} is kept with it"})
            return
        report["worktrees_removed"].append(str(ws.path))
    if not has_branch:
        return
    why = _delete_refusal(repo, branch)
    if why is None and not dry_run:
        try:
            gitutil.git(repo, "branch", "-D", branch)
        except gitutil.GitError as exc:
            why = str(exc)
    if why:
        report["kept"].append({"path": str(repo), "branch": branch, "why": f"branch {branch}: {why}"})
        return
    report["branches_removed"].append({"repo": str(repo), "branch": branch, "race": row["race"], "n": int(row["n"])})


def _delete_refusal(repo: Path, branch: str) -> str | None:
    """Why ``branch`` cannot be deleted from ``repo`` (a bad name, or checked out in the
    repository's own folder), or None."""
    why = gitsafe.check_branch_name(branch)
    if why:
        return why
    head = gitutil.git(repo, "symbolic-ref", "-q", "HEAD", check=False).strip()
    return f"checked out in {repo}" if head == f"refs/heads/{branch}" else None


# -- what a purged task leaves behind ------------------------------------------------------------


def after_board_delete(db: Database, home: Path, deleted: Row) -> dict[str, Any]:
    """Remove what a deleted board's worktree tasks left in its target (their worktrees and ``ab/``
    branches, by the rules of :func:`after_purge`; the home's folder of the board went with it).
    ``deleted``: the answer of ``kernel.boards.delete``. Returns ``files_removed``,
    ``branches_removed`` and ``kept``, as :func:`after_purge` does."""
    out: dict[str, Any] = {"files_removed": [], "branches_removed": [], "kept": []}
    board = {k: v for k, v in deleted.items() if k != "worktrees"}
    for t in deleted.get("worktrees") or []:
        one = after_purge(db, home, {"board": deleted["slug"], "id": t["id"], "workspace": {
            "kind": "worktree", "path": t.get("path"), "branch": t.get("branch")}}, board=board)
        for key in out:
            out[key] += one[key]
    return out


def after_purge(db: Database, home: Path, purged: Row, *, board: Row | None = None) -> dict[str, Any]:
    """Remove what a purged task left outside the database. ``purged``: the answer of
    ``kernel.purge.purge`` (its ``workspace``), with ``worker_stopped`` when the surface stopped
    its worker. Removed: its worker logs and exit files, its scratch workspace, its worktree
    when it holds no uncommitted work (its commits stay on its branch), then the branches
    agentboard made for it (``ab/<id>``, ``ab/<id>-base``) when no commit would be lost
    (:func:`_unmerged`) and no task works on or from them. Returns ``files_removed`` (paths),
    ``branches_removed`` (``repo``, ``branch``) and ``kept`` (``path``, ``branch``, ``why``,
    ``how``: the commands that remove it by hand). Never raises: the task is gone already, and
    what could not be looked at is left for ``gc`` (it finds a purged task's worktree and
    branches in the board's target)."""
    out: dict[str, Any] = {"files_removed": [], "branches_removed": [], "kept": []}
    try:
        _after_purge(db, home, purged, out, board)
    except Exception as exc:  # noqa: BLE001
        out["kept"].append({"path": str(home / "boards" / str(purged["board"])),
                            "why": f"cleaning up after the purge failed: {exc}",
                            "how": f"agentboard gc --board {purged['board']}"})
    return out


def _after_purge(db: Database, home: Path, purged: Row, out: dict[str, Any], known: Row | None = None) -> None:
    slug, task_id = str(purged["board"]), str(purged["id"])
    worker = purged.get("worker")
    if worker and purged.get("worker_stopped") is not True:
        out["kept"].append({"path": str(home / "boards" / slug), "why": (
            f"its worker (pid {worker.get('pid')} on {worker.get('host')}) may still be running: its log, workspace "
            "and branch are left for now"), "how": f"agentboard gc --board {slug} (once the worker has stopped)"})
        return
    logs = home / "boards" / slug / "logs"
    if logs.is_dir():
        for f in sorted(logs.iterdir()):
            if f.name.split(".")[0] == task_id and f.is_file():
                try:
                    f.unlink()
                    out["files_removed"].append(str(f))
                except OSError as exc:
                    out["kept"].append({"path": str(f), "why": exc.strerror or str(exc), "how": f"rm {shlex.quote(str(f))}"})
    for d in (workspaces.scratch_path(home, slug, task_id), workspaces.scratch_path(home, slug, task_id, isolated=True)):
        if d.is_dir():
            workspaces.remove("scratch", d)
            (out["kept"].append({"path": str(d), "why": "it could not be removed",
                                 "how": f"rm -rf {shlex.quote(str(d))}"}) if d.exists()
             else out["files_removed"].append(str(d)))
    ws = purged.get("workspace") or {}
    if ws.get("kind") != "worktree":
        return
    board: dict[str, Any] = dict(known or {})
    if not board:
        try:
            board = dict(kboards.get(db, slug))
        except Exception:  # the board went with it: its target is not known
            pass
    task = {"id": task_id, "board": slug, "workspace_kind": "worktree", "workspace_path": ws.get("path"),
            "branch_name": ws.get("branch")}
    try:
        plan = workspaces.plan(home, board, task)
    except workspaces.WorkspaceError:
        return  # no repository to look in
    if plan.repo is None or plan.branch is None or gitutil.toplevel(plan.repo) is None:
        return
    repo, branch = plan.repo, plan.branch
    base = kbranches.board_base(repo, board.get("settings"))
    ours = [b for b in (branch, f"ab/{task_id}{kbranches.INTEGRATION_SUFFIX}")
            if _made_for(b, task_id) and kbranches.has_branch(repo, b)]
    if plan.path.exists():
        why = _clear_worktree(repo, plan.path, branch, dry_run=False)
        if why:
            out["kept"].append({"path": str(plan.path), "branch": branch,
                                "why": f"{why}; its branch {branch} is kept with it",
                                "how": _how_worktree(repo, plan.path, branch)})
            return
        out["files_removed"].append(str(plan.path))
    if branch not in ours and kbranches.has_branch(repo, branch):
        out["kept"].append({"path": str(repo), "branch": branch, "why": (
            f"branch {branch} was given to the task (--branch), so it may be yours: only the ab/ branches "
            "agentboard made for a task are removed with it"), "how": f"git -C {shlex.quote(str(repo))} branch -d {branch}"})
    users = kpurge.branch_users(db, ours)
    gone: set[str] = set()
    for b in ours:
        why = _clear_branch(repo, b, base, users.get(b), gone, dry_run=False)
        if why:
            out["kept"].append({"path": str(repo), "branch": b, "why": f"branch {b}: {why}",
                                "how": _how_branch(repo, b, base)})
        else:
            out["branches_removed"].append({"repo": str(repo), "branch": b})
    return


def _orphans(db: Database, slug: str, report: dict[str, Any], dry_run: bool, seen: set[str]) -> None:
    """What the board's purged tasks left in its target repository: their worktrees
    ``.worktrees/<task id>`` (removed when they hold no uncommitted work) and their branches
    ``ab/<task id>…`` (removed when no commit would be lost and no task needs them). A task the
    board did not purge is never taken for an orphan, even when no task of this database has its
    id: another home may work in the same repository."""
    try:
        board = kboards.get(db, slug)
    except Exception:
        return
    target = board.get("default_workdir")
    if not target or target in seen or gitutil.toplevel(target) is None:
        return
    seen.add(target)
    repo = Path(target)
    root = repo / ".worktrees"
    folders = sorted(d for d in root.iterdir() if TASK_ID_RE.match(d.name)) if root.is_dir() else []
    try:
        refs = [r[len("refs/heads/"):] for r in
                gitutil.git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/ab/").split()]
    except gitutil.GitError:
        refs = []
    named = {b: m.group(1) for b in refs if (m := _TASK_BRANCH.match(b))}
    ids = sorted({d.name for d in folders} | set(named.values()))
    if not ids:
        return
    known, _ = kd.gc_statuses(db, ids)
    # only what this board purged: another home's boards may work in the same repository
    purged = kpurge.purged_ids(db, slug, [i for i in ids if i not in known])
    checked_out: set[str] = set()
    for path in folders:
        if path.name not in purged:
            continue
        head = None
        try:
            head = gitsafe.worktree_head_ref(repo, path)
        except gitutil.GitError:
            pass
        branch = head[len("refs/heads/"):] if head else f"ab/{path.name}"
        why = _clear_worktree(repo, path, branch, dry_run)
        if why:
            checked_out.add(branch)
            report["kept"].append({"path": str(path), "branch": branch,
                                   "why": f"worktree of task {path.name}, which no longer exists: {why}",
                                   "how": _how_worktree(repo, path, branch)})
        else:
            report["worktrees_removed"].append(str(path))
    orphans = sorted(b for b, tid in named.items() if tid in purged)
    users = kpurge.branch_users(db, orphans)
    base = kbranches.board_base(repo, board.get("settings"))
    gone: set[str] = set()
    for b in orphans:
        if (users.get(b) or {}).get("own"):
            continue  # the branch of a task that exists: not an orphan
        why = (f"checked out in the worktree of task {named[b]}, which is kept" if b in checked_out
               else _clear_branch(repo, b, base, users.get(b), gone, dry_run))
        if why:
            report["kept"].append({"path": str(repo), "branch": b,
                                   "why": f"branch {b} of task {named[b]}, which no longer exists: {why}",
                                   "how": _how_branch(repo, b, base)})
        else:
            report["branches_removed"].append({"repo": str(repo), "branch": b, "task": named[b]})


def _made_for(branch: str, task_id: str) -> bool:
    """``branch`` is one agentboard made for the task (not one a person gave it)."""
    m = _TASK_BRANCH.match(branch)
    return m is not None and (m.group(1) == task_id or (m.group(2) or "").startswith("-a"))


def _clear_worktree(repo: Path, path: Path, branch: str, dry_run: bool) -> str | None:
    """Remove a purged task's worktree (``dry_run``: only look); why it is kept, or None. Its
    commits need not be elsewhere (they stay on its branch), but a ``HEAD`` detached at commits
    no branch holds keeps it, as uncommitted work does."""
    why = workspaces.worktree_dirty(path, branch, unpushed=False)
    if why:
        return why
    try:
        head = gitsafe.worktree_head(repo, path, branch)
        stray = int(gitutil.git(repo, "rev-list", "--count", head, "--not", "--branches", "--remotes").strip() or 0) \
            if head else 0
    except (gitutil.GitError, ValueError) as exc:
        return f"git cannot read it ({exc})"
    if stray:
        return f"its HEAD is detached at {stray} commit(s) that no branch holds"
    if dry_run:
        return None
    return workspaces.remove("worktree", path, branch=branch, unpushed=False)


def _clear_branch(repo: Path, branch: str, base: str, users: dict[str, list[str]] | None, gone: set[str],
                  dry_run: bool) -> str | None:
    """Delete a branch of a task that no longer exists (``dry_run``: only look); why it is kept,
    or None. ``gone``: the refs deleted before it in this pass (their commits count as lost)."""
    needing = sorted(set((users or {}).get("own", []) + (users or {}).get("base", [])))
    if needing:
        return f"task {', '.join(needing)} works on or from it"
    why = _delete_refusal(repo, branch)
    if why:
        return why
    why = _unmerged(repo, branch, base, gone)
    if why:
        return why
    if not dry_run:
        try:
            gitutil.git(repo, "branch", "-D", branch)
        except gitutil.GitError as exc:
            return str(exc)
    gone.add(f"refs/heads/{branch}")
    return None


def _unmerged(repo: Path, branch: str, base: str, gone: set[str]) -> str | None:
    """Why deleting ``branch`` would lose work, or None: it has commits on no other branch (but
    those in ``gone``), no remote-tracking branch and not in ``HEAD``, unless all its changes
    are on ``base`` already (merging it there would change nothing: a squash or a rebase)."""
    try:
        tip = kbranches.tip(repo, branch)
        if tip is None:
            return None
        own = f"refs/heads/{branch}"
        others = [r for r in gitutil.git(repo, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes").split()
                  if r != own and r not in gone]
        lost = int(gitutil.git(repo, "rev-list", "--count", tip, "--not", "HEAD", *others).strip() or 0)
        if not lost:
            return None
        base_tip = gitutil.git(repo, "rev-parse", "--verify", "-q", f"{base}^{{commit}}", check=False).strip()
        if base_tip:
            tree, conflicts = kbranches.merge_tree(repo, base_tip, tip)
            if not conflicts and tree == gitutil.git(repo, "rev-parse", f"{base_tip}^{{tree}}").strip():
                return None
    except (gitutil.GitError, ValueError) as exc:
        return f"git cannot tell whether its commits are merged ({exc})"
    return f"{lost} commit(s) not merged into {base} and on no other branch or remote"


def _how_branch(repo: Path, branch: str, base: str) -> str:
    r = shlex.quote(str(repo))
    return f"see what it holds: git -C {r} log {base}..{branch}; remove it: git -C {r} branch -D {branch}"


def _how_worktree(repo: Path, path: Path, branch: str) -> str:
    r, p = shlex.quote(str(repo)), shlex.quote(str(path))
    remove = f"rm -rf {p}" if workspaces.is_task_repo(path) else f"git -C {r} worktree remove --force {p}"
    return (f"copy out what you need from {p}, then remove it with that work: {remove}; then `agentboard gc` "
            f"removes its branch {branch} when it is merged (else: git -C {r} branch -D {branch})")
