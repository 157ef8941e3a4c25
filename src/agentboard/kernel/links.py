"""Dependency edges parent → child: cycles, self-links and cross-board links are refused."""

from __future__ import annotations

import time
from typing import Any

from ..domain import states
from ..domain.errors import Conflict, InvalidInput, NotFound
from ..store.engine import Database, Row, Tx, in_list
from .common import get_task, ready_or_todo


def _would_cycle(tx: Tx, parent: str, child: str) -> list[str] | None:
    """Is ``parent`` reachable from ``child``? Return the path if so (walks descendants)."""
    frontier = [child]
    came_from: dict[str, str] = {}
    seen = {child}
    while frontier:
        batch = frontier[:500]
        frontier = frontier[500:]
        params: dict[str, Any] = {}
        rows = tx.all("SELECT parent_id, child_id FROM task_links WHERE parent_id IN " + in_list("n", batch, params), params)
        for r in rows:
            c = r["child_id"]
            if c in seen:
                continue
            seen.add(c)
            came_from[c] = r["parent_id"]
            if c == parent:
                path = [c]
                while path[-1] != child:
                    path.append(came_from[path[-1]])
                return list(reversed(path))
            frontier.append(c)
    return None


def cycle_path(tx: Tx, parent: str, child: str) -> list[str] | None:
    """The path that linking ``parent`` → ``child`` would close into a cycle (None: no cycle)."""
    return _would_cycle(tx, parent, child)


def _link(tx: Tx, board: str, parent_id: str, child_id: str, actor: str | None) -> Row:
    if parent_id == child_id:
        raise InvalidInput(f"a task cannot depend on itself ({parent_id})")
    sql = "SELECT id, board, status FROM tasks WHERE id IN (:p, :c)"
    if tx.db.dialect == "postgresql":
        # writers run concurrently: the links of one board change one transaction at a time (the
        # cycle check sees every committed edge), and both tasks keep their status until commit
        tx.execute("SELECT pg_advisory_xact_lock(hashtext(:k))", {"k": "agentboard links " + board})
        sql += " ORDER BY id FOR UPDATE"
    found = {r["id"]: r for r in tx.all(sql, {"p": parent_id, "c": child_id})}
    for tid in (parent_id, child_id):
        row = found.get(tid)
        if row is None:
            raise NotFound(f"no task {tid} on board {board!r}")
        if row["board"] != board:
            raise InvalidInput(f"task {tid} is on board {row['board']!r}: links across boards are refused")
    path = _would_cycle(tx, parent_id, child_id)
    if path:
        raise Conflict(
            f"linking {parent_id} → {child_id} would create a cycle: {' → '.join(path + [child_id])}"
        )
    now = time.time()
    tx.execute(
        "INSERT INTO task_links (parent_id, child_id, board, created_at) VALUES (:p, :c, :b, :now) "
        "ON CONFLICT (parent_id, child_id) DO NOTHING",
        {"p": parent_id, "c": child_id, "b": board, "now": now},
    )
    if tx.rowcount != 1:
        raise Conflict(f"{parent_id} is already a parent of {child_id}")
    tx.event(board, child_id, "linked", {"parent_id": parent_id, "child_id": child_id}, actor=actor, at=now)
    if found[child_id]["status"] == states.READY and found[parent_id]["status"] not in states.SATISFIED:
        states.check("demote", states.READY, states.TODO, child_id)
        tx.execute("UPDATE tasks SET status = 'todo', updated_at = :now WHERE id = :id", {"now": now, "id": child_id})
        tx.event(board, child_id, "demoted", {"parent": parent_id}, actor=actor, at=now)
    return {"parent_id": parent_id, "child_id": child_id}


def link(db: Database, board: str, parent_id: str, child_id: str, *, actor: str | None = None) -> Row:
    return db.write(_link, board, parent_id, child_id, actor)


def _unlink(tx: Tx, board: str, parent_id: str, child_id: str, actor: str | None) -> Row:
    tx.execute(
        "DELETE FROM task_links WHERE parent_id = :p AND child_id = :c AND board = :b",
        {"p": parent_id, "c": child_id, "b": board},
    )
    if tx.rowcount != 1:
        raise NotFound(f"{parent_id} is not a parent of {child_id} on board {board!r}")
    now = time.time()
    tx.event(board, child_id, "unlinked", {"parent_id": parent_id, "child_id": child_id}, actor=actor, at=now)
    child = get_task(tx, board, child_id)
    if child["status"] == states.TODO:
        target = ready_or_todo(tx, child_id, child["assignee"], board)
        if target == states.READY and child["assignee"]:
            tx.execute("UPDATE tasks SET status = 'ready', updated_at = :now WHERE id = :id", {"now": now, "id": child_id})
            tx.event(board, child_id, "promoted", {"by": "unlink"}, actor=actor, at=now)
    return {"parent_id": parent_id, "child_id": child_id}


def unlink(db: Database, board: str, parent_id: str, child_id: str, *, actor: str | None = None) -> Row:
    return db.write(_unlink, board, parent_id, child_id, actor)
