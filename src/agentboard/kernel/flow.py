"""What follows a change: promotion of children (O(children)), demotion, goal settling."""

from __future__ import annotations

import time

from ..domain import states
from ..store.engine import Tx
from .common import default_assignee

_READY_CHILDREN = (
    "SELECT c.id, c.assignee FROM task_links l JOIN tasks c ON c.id = l.child_id "
    "WHERE l.parent_id = :id AND c.status = 'todo' AND NOT EXISTS ("
    " SELECT 1 FROM task_links l2 JOIN tasks p ON p.id = l2.parent_id "
    " WHERE l2.child_id = c.id AND p.status NOT IN ('done', 'archived'))"
)


def promote_children(tx: Tx, board: str, task_id: str, actor: str | None = None) -> list[str]:
    """Move to ready every todo child of ``task_id`` whose parents are now all satisfied."""
    rows = tx.all(_READY_CHILDREN, {"id": task_id})
    if not rows:
        return []
    fallback: str | None = None
    fallback_known = False
    promoted: list[str] = []
    now = time.time()
    for row in rows:
        assignee = row["assignee"]
        if not assignee:
            if not fallback_known:
                fallback = default_assignee(tx, board)
                fallback_known = True
            if not fallback:
                continue
            assignee = fallback
        tx.execute(
            "UPDATE tasks SET status = 'ready', assignee = :a, updated_at = :now "
            "WHERE id = :id AND status = 'todo'",
            {"a": assignee, "now": now, "id": row["id"]},
        )
        if tx.rowcount:
            tx.event(board, row["id"], "promoted", {"by": task_id}, actor=actor, at=now)
            promoted.append(row["id"])
    return promoted


def demote_ready_children(tx: Tx, board: str, task_id: str, actor: str | None = None) -> list[str]:
    rows = tx.all(
        "SELECT c.id FROM task_links l JOIN tasks c ON c.id = l.child_id "
        "WHERE l.parent_id = :id AND c.status = 'ready' AND c.parents_override = 0",
        {"id": task_id},
    )
    now = time.time()
    out = []
    for row in rows:
        tx.execute(
            "UPDATE tasks SET status = 'todo', updated_at = :now WHERE id = :id AND status = 'ready'",
            {"now": now, "id": row["id"]},
        )
        if tx.rowcount:
            tx.event(board, row["id"], "demoted", {"parent": task_id}, actor=actor, at=now)
            out.append(row["id"])
    return out


def settle_goal(tx: Tx, board: str, goal_id: str | None, actor: str | None = None) -> bool:
    """Mark an active goal done when every non-archived task of it is done."""
    if not goal_id:
        return False
    row = tx.one(
        "SELECT "
        " SUM(CASE WHEN status = 'done' THEN 1 ELSE 0 END) AS done, "
        " SUM(CASE WHEN status NOT IN ('done', 'archived') THEN 1 ELSE 0 END) AS open "
        "FROM tasks WHERE goal_id = :g",
        {"g": goal_id},
    )
    if not row or not row["done"] or row["open"]:
        return False
    now = time.time()
    tx.execute(
        "UPDATE goals SET status = 'done', completed_at = :now WHERE id = :g AND status = 'active'",
        {"now": now, "g": goal_id},
    )
    if tx.rowcount:
        tx.event(board, None, "goal_completed", {"goal_id": goal_id}, actor=actor, at=now)
        return True
    return False


def reopen_goal(tx: Tx, goal_id: str | None) -> None:
    """A done goal that gains an open task (created, restored, moved in, reopened) is active again."""
    if goal_id:
        tx.execute(
            "UPDATE goals SET status = 'active', completed_at = NULL WHERE id = :g AND status = 'done'",
            {"g": goal_id},
        )


def after_satisfied(tx: Tx, board: str, task: dict, actor: str | None = None) -> list[str]:
    """A task became done or archived: promote its children and settle its goal."""
    promoted = promote_children(tx, board, task["id"], actor)
    settle_goal(tx, board, task.get("goal_id"), actor)
    return promoted


__all__ = ["after_satisfied", "demote_ready_children", "promote_children", "reopen_goal", "settle_goal", "states"]
