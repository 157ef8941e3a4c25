"""A person overriding the board's own rules: promote over unfinished parents, lift a respawn guard."""

from __future__ import annotations

import time

from ..domain import states
from ..domain.errors import Conflict
from ..store.engine import Database, Row, Tx
from .common import default_assignee, get_task, pending_parents, task_out


def _promote(tx: Tx, board: str, task_id: str, force: bool, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    states.check("promote", task["status"], states.READY, task_id)
    pending = pending_parents(tx, task_id)
    if pending and not force:
        raise Conflict(f"task {task_id} has parents that are not done: {', '.join(pending)}; "
                       f"run `agentboard promote {task_id} --force` to start it anyway")
    assignee = task["assignee"] or default_assignee(tx, board)
    if not assignee:
        raise Conflict(f"task {task_id} has no assignee; assign a profile with `agentboard assign {task_id} NAME`")
    now = time.time()
    tx.execute("UPDATE tasks SET status = 'ready', assignee = :a, parents_override = :o, updated_at = :now "
               "WHERE id = :id", {"a": assignee, "o": 1 if pending else 0, "now": now, "id": task_id})
    payload: dict[str, object] = {"from": task["status"], "by_hand": True}
    if pending:  # the override is on the record: who started it over which unfinished parents
        payload.update(override=True, pending=pending)
    tx.event(board, task_id, "promoted", payload, actor=actor, at=now)
    task.update(status=states.READY, assignee=assignee, parents_override=1 if pending else 0)
    return task_out(task)


def promote(db: Database, board: str, task_id: str, *, force: bool = False, actor: str | None = None) -> Row:
    """todo → ready. A task with unfinished parents needs ``force``: it is then started without
    them (``parents_override``), recorded as an override in its ``promoted`` event."""
    return db.write(_promote, board, task_id, force, actor)


def _unguard(tx: Tx, board: str, task_id: str, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    if task["status"] not in (states.READY, states.TODO, states.BLOCKED):
        raise Conflict(f"task {task_id} is {task['status']}: only a ready, todo or blocked task can be unguarded")
    now = time.time()
    tx.execute("UPDATE tasks SET last_outcome = 'unguarded', consecutive_failures = 0, protocol_violations = 0, "
               "cooldown_until = NULL, updated_at = :now WHERE id = :id", {"now": now, "id": task_id})
    tx.event(board, task_id, "unguarded", {"last_outcome": task.get("last_outcome"),
                                           "last_failure_error": task.get("last_failure_error")},
             actor=actor, at=now)
    task.update(last_outcome="unguarded", consecutive_failures=0, cooldown_until=None)
    return task_out(task)


def unguard(db: Database, board: str, task_id: str, *, actor: str | None = None) -> Row:
    """Lift the respawn guard of a task (a person says it may run again): its failure counter
    and cooldown are reset and the guard's rules no longer hold it back."""
    return db.write(_unguard, board, task_id, actor)


__all__ = ["promote", "unguard"]
