"""Housekeeping: scratch workspaces of finished tasks, old worker logs, old events.

Never removed: ``dir:`` workspaces (shared folders), a worktree with uncommitted or unpushed
work, the workspace of a task that is not finished or whose children may still read it, the
log of a running task.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..domain import states
from ..kernel import dispatching as kd
from ..kernel import lookups, maintenance
from ..kernel import runs as kr
from ..store.engine import Database
from . import workspaces

_FINISHED = states.SATISFIED  # a finished task's scratch workspace can go


def collect(db: Database, home: Path, *, boards: list[str] | None = None, log_retention_days: int = 30,
            event_retention_days: int = 30, now: float | None = None, dry_run: bool = False,
            progress: Callable[[str, int, int | None], None] | None = None) -> dict[str, Any]:
    """Remove what is no longer needed; with ``dry_run`` only report what would go (the lists
    and counts are the same, nothing is touched). ``progress(phase, done, total)``: the scratch
    workspaces looked at, per board."""
    now = now or time.time()
    report: dict[str, Any] = {"workspaces_removed": [], "worktrees_removed": [], "kept": [], "logs_removed": 0,
                              "events_pruned": 0, "dry_run": dry_run, "wal_checkpointed": False}
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
        # worktrees of archived tasks go when clean; dirty ones are always kept
        for row in kd.finished_worktree_tasks(db, slug):
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
