"""Helpers shared by the kernel verbs (run inside a transaction)."""

from __future__ import annotations

import json
import time
from typing import Any

from ..domain import states
from ..domain.errors import InvalidInput, NotFound
from ..store.engine import Row, Tx

TASK_JSON = ("skills", "verify")


def task_out(row: Row) -> Row:
    """A task row as callers see it: JSON columns decoded, flags as booleans."""
    out = dict(row)
    for key in TASK_JSON:
        value = out.get(key)
        if isinstance(value, str):
            out[key] = json.loads(value) if value and value != "[]" else []
    if "review_required" in out:
        out["review_required"] = bool(out["review_required"])
    return out


def done_gate(task: Row, *, verify_enabled: bool, fields: dict[str, Any] | None = None) -> str | None:
    """Why a person may not move ``task`` to done now (None when they may): a task that requires
    review is done only by approving it in review (a running one goes to review instead); a task
    with checks is done only when they passed after a worker's run. ``fields``: edits applied in
    the same request first. The rule of ``dispatch.finish`` and of the moves the dashboard offers."""
    tid, status = task["id"], task["status"]
    if status in (states.REVIEW, states.DONE):
        return None
    if status == states.BLOCKED and task.get("integration") == "refused":
        return None  # approved, its merge refused: done retries the integration (``dispatch.finish``)
    fields = fields or {}
    if fields.get("review_required", task.get("review_required")) and status != states.RUNNING:
        return (f"task {tid} requires review, so it is done only by approving it in review (it is {status}): "
                f"let it run to review, then `agentboard review {tid} --approve`")
    commands = fields.get("verify", task.get("verify"))
    if isinstance(commands, str):
        commands = json.loads(commands) if commands else []
    commands = [c for c in (commands or []) if str(c).strip()]
    if commands and verify_enabled:
        shown = ", ".join(f"`{c}`" for c in commands[:3]) + (" …" if len(commands) > 3 else "")
        return (f"task {tid} has checks ({shown}) that must pass before it is done; they run after a worker's "
                f"run (unblock or release it so it runs), or clear them to close it by hand "
                f"(`agentboard edit {tid} --verify ''`)")
    return None


def run_out(row: Row) -> Row:
    out = dict(row)
    for key in ("metadata", "review"):
        if isinstance(out.get(key), str) and out[key]:
            try:
                out[key] = json.loads(out[key])
            except ValueError:
                pass
    out["synthetic"] = bool(out.get("synthetic"))
    return out


def get_task(tx: Tx, board: str, task_id: str, *, lock: bool = False) -> Row:
    sql = "SELECT * FROM tasks WHERE id = :id AND board = :board"
    if lock and tx.db.dialect == "postgresql":
        sql += " FOR UPDATE"
    row = tx.one(sql, {"id": task_id, "board": board})
    if row is None:
        if not task_id or not str(task_id).startswith("t_"):
            raise NotFound(f"no task {task_id!r} on board {board!r} (task ids look like t_1a2b3c4d)")
        raise NotFound(f"no task {task_id} on board {board!r}")
    return row


def pending_parents(tx: Tx, task_id: str) -> list[str]:
    rows = tx.all(
        "SELECT p.id FROM task_links l JOIN tasks p ON p.id = l.parent_id "
        "WHERE l.child_id = :id AND p.status NOT IN ('done', 'archived') ORDER BY p.id",
        {"id": task_id},
    )
    return [r["id"] for r in rows]


def default_assignee(tx: Tx, board: str) -> str | None:
    """Who takes an unassigned task: the board's ``default_assignee``, else the global one."""
    b = board_settings(tx, board)
    if b.get("default_assignee"):
        return str(b["default_assignee"])
    return tx.db.settings.default_assignee


def board_settings(tx: Tx, board: str) -> dict[str, Any]:
    """A board's own settings (a JSON object; empty when unset or unreadable)."""
    row = tx.one("SELECT settings FROM boards WHERE slug = :b", {"b": board})
    if row is None or not row["settings"]:
        return {}
    try:
        value = json.loads(row["settings"])
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def ready_or_todo(tx: Tx, task_id: str, assignee: str | None, board: str) -> str:
    """Where a released task lands: ready iff every parent is done and it has an assignee."""
    if pending_parents(tx, task_id):
        return states.TODO
    waits = tx.scalar("SELECT not_before FROM tasks WHERE id = :id", {"id": task_id})
    if waits is not None and float(waits) > time.time():
        return states.TODO
    if assignee or default_assignee(tx, board):
        return states.READY
    return states.TODO


def require_board(tx: Tx, board: str, *, writable: bool = True) -> Row:
    return usable_board(tx.one("SELECT * FROM boards WHERE slug = :b", {"b": board}), board, writable=writable)


def usable_board(row: Row | None, board: str, *, writable: bool = True) -> Row:
    """``row`` (board ``board``'s, read by the caller), or the error saying why it cannot be used."""
    if row is None:
        raise NotFound(f"no board {board!r}; list boards with `agentboard boards list`")
    if writable and row["archived"]:
        raise InvalidInput(f"board {board!r} is archived; restore it before changing its tasks")
    return row


def first_line(text: str | None, limit: int = 400) -> str:
    if not text:
        return ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:limit]


def run_metadata(run: Row) -> dict[str, Any]:
    """A run's ``metadata`` as a dict (stored as JSON text; ``{}`` when absent or unreadable)."""
    meta = run.get("metadata")
    if isinstance(meta, str) and meta:
        try:
            meta = json.loads(meta)
        except ValueError:
            meta = None
    return dict(meta) if isinstance(meta, dict) else {}
