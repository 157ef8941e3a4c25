"""What follows a change: promotion of children (O(children)), demotion, goal settling."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..domain import states
from ..store.engine import EVENT_COLUMNS, Tx, dump_json
from . import hooks
from .common import default_assignee

_READY_CHILDREN = (
    "SELECT c.id, c.assignee FROM task_links l JOIN tasks c ON c.id = l.child_id "
    "WHERE l.parent_id = :id AND c.status = 'todo' AND (c.not_before IS NULL OR c.not_before <= :now) "
    "AND NOT EXISTS ("
    " SELECT 1 FROM task_links l2 JOIN tasks p ON p.id = l2.parent_id "
    " WHERE l2.child_id = c.id AND p.status NOT IN ('done', 'archived'))"
)


#: PostgreSQL: the statements that find a parent's children read them by key, whatever the
#: planner's statistics say. Planned on statistics older than the graph (a fan-out created and
#: released at once, before anything analyzed it), a join of the links and the tasks becomes a
#: nested loop that scans a whole table once per child; rewriting the joins does not help (the
#: planner puts the scan inside whichever join it is offered). So sequential scans are off for
#: those statements, and back as they were after them (the server-side completion does the same
#: for the rest of its own transaction, migration 0038)
BY_KEY_ON_PG = ("SELECT set_config('agentboard.seqscan_was', current_setting('enable_seqscan'), true), "
                "set_config('enable_seqscan', 'off', true)")
BY_KEY_OFF_PG = "SELECT set_config('enable_seqscan', current_setting('agentboard.seqscan_was'), true)"

_LOCK_TODO_CHILDREN = (
    "SELECT c.id FROM tasks c WHERE c.id IN (SELECT child_id FROM task_links WHERE parent_id = :id) "
    "AND c.status = 'todo' ORDER BY c.id FOR UPDATE"
)

#: PostgreSQL: the children that became ready, those with an assignee promoted in the same
#: statement with their ``promoted`` events (one round trip); ``promoted`` says which. The
#: answer is the promoted ones, then the ready ones without an assignee (which need the board's
#: fallback), with no join of the two: the planner cannot know how many rows a CTE gives, and
#: its nested loop over them took 90 ms for a parent of 1,000 children
_PROMOTE_PG = (
    "WITH ready AS (" + _READY_CHILDREN + "), "
    "up AS (UPDATE tasks SET status = 'ready', updated_at = :now, "
    # a task that waited for this one (a ``dependency`` block) resumes by itself
    "block_reason = CASE WHEN block_kind = 'dependency' THEN NULL ELSE block_reason END, block_on = NULL, "
    "block_kind = CASE WHEN block_kind = 'dependency' THEN NULL ELSE block_kind END "
    "FROM ready WHERE tasks.id = ready.id "
    "AND COALESCE(ready.assignee, '') <> '' AND tasks.status = 'todo' RETURNING tasks.id, tasks.assignee), "
    f"e AS (INSERT INTO task_events {EVENT_COLUMNS} SELECT :board, up.id, NULL, 'promoted', :payload, :actor, :now "
    "FROM up) "
    "SELECT id, assignee, TRUE AS promoted FROM up "
    "UNION ALL SELECT id, assignee, FALSE FROM ready WHERE COALESCE(assignee, '') = ''"
)


#: SQLite, when no todo child lacks an assignee: the children that became ready, promoted in one
#: statement that names them
_PROMOTE_ASSIGNED_SQLITE = (
    "UPDATE tasks SET status = 'ready', updated_at = :now, "
    "block_reason = CASE WHEN block_kind = 'dependency' THEN NULL ELSE block_reason END, block_on = NULL, "
    "block_kind = CASE WHEN block_kind = 'dependency' THEN NULL ELSE block_kind END "
    "WHERE status = 'todo' AND COALESCE(assignee, '') <> '' AND id IN (SELECT id FROM (" + _READY_CHILDREN + ")) "
    "RETURNING id"
)


def promote_children(tx: Tx, board: str, task_id: str, actor: str | None = None, *,
                     unassigned: bool = True) -> list[str]:
    """Move to ready every todo child of ``task_id`` whose parents are now all satisfied.
    ``unassigned=False``: the caller knows (in this transaction) every todo child has an
    assignee, so none needs the board's fallback assignee."""
    now = time.time()
    promoted: list[str] = []
    if tx.db.dialect == "sqlite" and not unassigned:
        promoted = sorted(r["id"] for r in tx.all(_PROMOTE_ASSIGNED_SQLITE, {"id": task_id, "now": now}))
        for child in promoted:
            tx.event(board, child, "promoted", {"by": task_id}, actor=actor, at=now)
        return promoted
    if tx.db.dialect == "postgresql":
        # two parents of one child completing at once: the second waits for the first's commit
        # here and its next statement sees that parent done (the lock's answer is not read, so
        # it travels with the statement below)
        tx.execute(BY_KEY_ON_PG)
        tx.execute(_LOCK_TODO_CHILDREN, {"id": task_id})
        rows = tx.all(_PROMOTE_PG, {"id": task_id, "now": now, "board": board, "actor": actor,
                                    "payload": dump_json({"by": task_id})})
        tx.execute(BY_KEY_OFF_PG)
        promoted = [row["id"] for row in rows if row["promoted"]]
        if promoted:
            tx.events_written(board)
        rows = [r for r in rows if not r["assignee"]]  # unassigned: the fallback assignee below
    else:
        rows = tx.all(_READY_CHILDREN, {"id": task_id, "now": now})
    if not rows:
        return promoted
    fallback: str | None = None
    fallback_known = False
    for row in rows:
        assignee = row["assignee"]
        if not assignee:
            if not fallback_known:
                fallback = default_assignee(tx, board)
                fallback_known = True
            if not fallback:
                continue
            assignee = fallback
        # a task that waited for this one (a ``dependency`` block) resumes by itself
        tx.execute(
            "UPDATE tasks SET status = 'ready', assignee = :a, updated_at = :now, "
            "block_reason = CASE WHEN block_kind = 'dependency' THEN NULL ELSE block_reason END, "
            "block_on = NULL, block_kind = CASE WHEN block_kind = 'dependency' THEN NULL ELSE block_kind END "
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
    """Move an active goal to ``verifying`` when every non-archived task of it is done: its
    acceptance is checked (its verify commands, the supervisor or a person) before it is done,
    never on task counts alone."""
    if not goal_id:
        return False
    if tx.db.dialect == "postgresql":  # the goal's last two tasks completing at once: one at a time
        tx.execute("SELECT id FROM goals WHERE id = :g FOR UPDATE", {"g": goal_id})
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
    tx.execute("UPDATE goals SET status = 'verifying' WHERE id = :g AND status = 'active'", {"g": goal_id})
    if not tx.rowcount:
        return False
    tx.event(board, None, "goal_verifying", {"goal_id": goal_id}, actor=actor, at=now)
    hooks.goal_verifying(tx, board, goal_id, actor)
    return True


def reopen_goal(tx: Tx, goal_id: str | None) -> None:
    """A done (or verifying) goal that gains an open task (created, restored, moved in,
    reopened) is active again."""
    if goal_id:
        tx.execute(
            "UPDATE goals SET status = 'active', completed_at = NULL, evidence = NULL "
            "WHERE id = :g AND status IN ('done', 'verifying')",
            {"g": goal_id},
        )


def after_satisfied(tx: Tx, board: str, task: Mapping[str, Any], actor: str | None = None, *, children: bool = True,
                    unassigned: bool = True) -> list[str]:
    """A task became done or archived: promote its children and settle its goal.
    ``children=False``: the caller knows (under the task's lock) no child waits in todo;
    ``unassigned=False``: none of those that wait lacks an assignee."""
    promoted = promote_children(tx, board, task["id"], actor, unassigned=unassigned) if children else []
    settle_goal(tx, board, task.get("goal_id"), actor)
    return promoted


__all__ = ["after_satisfied", "demote_ready_children", "promote_children", "reopen_goal", "settle_goal", "states"]
