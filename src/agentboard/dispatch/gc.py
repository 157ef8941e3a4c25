"""Housekeeping: scratch workspaces of finished tasks, old worker logs, old events.

Never removed: ``dir:`` workspaces (shared folders), a worktree with uncommitted or unpushed
work, the workspace of a task that is not finished or whose children may still read it, the
log of a running task.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..kernel import maintenance
from ..kernel import runs as kr
from . import workspaces

_FINISHED = ("done", "archived")


def _in(values: list[str], params: dict[str, Any], prefix: str = "i") -> str:
    names = {f"{prefix}{n}": v for n, v in enumerate(values)}
    params.update(names)
    return "(" + ", ".join(":" + k for k in names) + ")"


def _statuses(db: Any, ids: list[str]) -> tuple[dict[str, str], set[str]]:
    """Status of each task, and the tasks that have a child still active."""
    if not ids:
        return {}, set()

    def _r(tx: Any) -> tuple[dict[str, str], set[str]]:
        status: dict[str, str] = {}
        busy: set[str] = set()
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            p: dict[str, Any] = {}
            for row in tx.all("SELECT id, status FROM tasks WHERE id IN " + _in(chunk, p), p):
                status[row["id"]] = row["status"]
            p = {}
            for row in tx.all(
                "SELECT DISTINCT l.parent_id FROM task_links l JOIN tasks c ON c.id = l.child_id "
                "WHERE c.status NOT IN ('done', 'archived') AND l.parent_id IN " + _in(chunk, p), p):
                busy.add(row["parent_id"])
        return status, busy
    return db.read(_r)


def collect(db: Any, home: Path, *, boards: list[str] | None = None, log_retention_days: int = 30,
            event_retention_days: int = 30, now: float | None = None) -> dict[str, Any]:
    now = now or time.time()
    report: dict[str, Any] = {"workspaces_removed": [], "worktrees_removed": [], "kept": [], "logs_removed": 0,
                              "events_pruned": 0}
    slugs = boards or [r["slug"] for r in db.read(lambda tx: tx.all("SELECT slug FROM boards"))]
    for slug in slugs:
        root = home / "boards" / slug / "workspaces"
        dirs = [d for d in root.iterdir() if d.is_dir()] if root.is_dir() else []
        status, busy = _statuses(db, [d.name for d in dirs])
        for d in dirs:
            st = status.get(d.name)
            if st is not None and st not in _FINISHED:
                continue
            if d.name in busy:
                report["kept"].append({"path": str(d), "why": "a child task that may read it is still active"})
                continue
            workspaces.remove("scratch", d)
            report["workspaces_removed"].append(str(d))
            if st is not None:
                try:
                    kr.record_telemetry(db, slug, d.name, "workspace_removed", {"path": str(d), "by": "gc"})
                except Exception:
                    pass
        # worktrees of archived tasks go when clean; dirty ones are always kept
        rows = db.read(lambda tx, s=slug: tx.all(
            "SELECT id, status, workspace_path FROM tasks WHERE board = :b AND workspace_kind != 'dir' "
            "AND workspace_path LIKE :wt AND status IN ('done', 'archived')", {"b": s, "wt": "%/.worktrees/%"}))
        for row in rows:
            path = Path(row["workspace_path"])
            if path.parent.name != ".worktrees" or not path.exists():
                continue
            if row["status"] != "archived":
                why = workspaces.worktree_dirty(path)
                if why:
                    report["kept"].append({"path": str(path), "why": why})
                continue
            why = workspaces.remove("worktree", path)
            if why:
                report["kept"].append({"path": str(path), "why": why})
            else:
                report["worktrees_removed"].append(str(path))
        logs = home / "boards" / slug / "logs"
        if logs.is_dir():
            cutoff = now - log_retention_days * 86400
            running = {r["id"] for r in db.read(lambda tx, s=slug: tx.all(
                "SELECT id FROM tasks WHERE board = :b AND status = 'running'", {"b": s}))}
            for f in logs.iterdir():
                if not f.is_file() or f.name.split(".")[0] in running:
                    continue
                try:
                    if f.stat().st_mtime < cutoff:
                        f.unlink()
                        report["logs_removed"] += 1
                except OSError:
                    pass
    report["events_pruned"] = maintenance.prune_events(db, retention_days=event_retention_days)
    return report
