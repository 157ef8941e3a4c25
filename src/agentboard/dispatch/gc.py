"""Housekeeping: scratch workspaces of finished tasks, old worker logs, old events, and the
losing attempts of finished races (their worktrees, then their branches).

Never removed: ``dir:`` workspaces (shared folders), a worktree with uncommitted work (or, but
for a race's losing attempt, unpushed commits), the workspace of a task that is not finished or
whose children may still read it, the log of a running task, the picked attempt's branch, and
anything of a race that is not finished (done or archived).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import gitsafe
from ..domain import states
from ..kernel import dispatching as kd
from ..kernel import lookups, maintenance
from ..kernel import races as kraces
from ..kernel import runs as kr
from ..store.engine import Database, Row
from . import gitutil, workspaces

_FINISHED = states.SATISFIED  # a finished task's scratch workspace can go


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
        losers = _race_losers(db, home, slug, report, dry_run)
        # worktrees of archived tasks go when clean; dirty ones are always kept
        for row in kd.finished_worktree_tasks(db, slug):
            if row["id"] in losers:
                continue
            path = Path(row["workspace_path"])
            if path.parent.name != ".worktrees" or not path.exists():
                continue
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
        logs = home / "boards" / slug / "logs"
        if logs.is_dir():
            cutoff = now - log_retention_days * 86400
            running = kd.running_task_ids(db, slug)
            for f in logs.iterdir():
                if not f.is_file() or f.name.split(".")[0] in running:
                    continue
                try:
                    if f.stat().st_mtime < cutoff:
                        if not dry_run:
                            f.unlink()
                        report["logs_removed"] += 1
                except OSError:
                    pass
    report["events_pruned"] = maintenance.prune_events(db, retention_days=event_retention_days, dry_run=dry_run)
    if not dry_run:
        report["wal_checkpointed"] = maintenance.checkpoint(db)
    return report


def _race_losers(db: Database, home: Path, slug: str, report: dict[str, Any], dry_run: bool) -> set[str]:
    """Remove the losing attempts of the board's finished races: each one's worktree when it
    holds no uncommitted work (its commits go with its branch), then its branch, in the race's
    target repository. Returns the attempts' task ids (looked at here, not as other worktrees)."""
    seen: set[str] = set()
    branches: dict[Path, set[str] | None] = {}
    for row in kraces.finished_losers(db, slug):
        seen.add(str(row["attempt_task_id"]))
        _race_loser(home, row, branches, report, dry_run)
    return seen


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
