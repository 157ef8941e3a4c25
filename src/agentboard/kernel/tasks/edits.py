"""Editing a task: assign, edit its fields, the dashboard's edit (fields, assignee and status in
one transaction) and one verb over several tasks."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ...domain import model, states, task_fields
from ...domain.errors import AgentboardError, Conflict, InvalidInput, NotFound
from ...store.engine import Database, Row, Tx, dump_json
from ..common import (
    default_assignee,
    get_task,
    pending_parents,
    ready_or_todo,
    require_board,
    task_out,
)
from ..flow import (
    reopen_goal,
    settle_goal,
)
from ..host_access import checked_verify, decoded_verify
from ..runs import (
    return_to_queue,
)
from .creation import _model
from .moves import _check_status, _set_status, expect_status

# -- assign and edit ---------------------------------------------------------------------------


def _assign(tx: Tx, board: str, task_id: str, assignee: str | None, reclaim: bool, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    require_board(tx, board)  # an archived board's tasks stay as they are until it is restored
    if task.get("race_of") and assignee != task["assignee"]:
        # the race compares its profiles: an attempt run by another would be credited to its own
        raise Conflict(f"task {task_id} is {task['assignee']}'s attempt in race {task['race_of']}: an attempt keeps "
                       f"its profile, since the race compares them; pick a winner among the attempts "
                       f"(agentboard attempts {task['race_of']}), or start a new race that includes the other profile")
    if task["status"] == states.RUNNING:
        if not reclaim:
            raise Conflict(
                f"task {task_id} is running; reclaim it first (agentboard assign {task_id} "
                f"{assignee or 'none'} --reclaim)"
            )
        return_to_queue(tx, board, task, "reclaimed", error="reassigned", count_failure=False, actor=actor, run_id=None)
        task = get_task(tx, board, task_id)
    status = task["status"]
    if status == states.TODO and task.get("block_kind") == states.HELD:
        target = states.TODO  # a person holds it there: a new assignee does not release it
    elif status in (states.TODO, states.READY):
        target = ready_or_todo(tx, task_id, assignee, board) if assignee else states.TODO
        if not assignee and target == states.TODO and default_assignee(tx, board) and not pending_parents(tx, task_id):
            target = states.TODO
    else:
        target = status
    states.check("assign", status, target, task_id)
    now = time.time()
    tx.execute(
        "UPDATE tasks SET assignee = :a, status = :s, updated_at = :now WHERE id = :id",
        {"a": assignee, "s": target, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "assigned", {"assignee": assignee, "previous": task["assignee"], "status": target}, actor=actor, at=now)
    task.update(assignee=assignee, status=target)
    return task_out(task)


def _assignee(name: str | None) -> str | None:
    """A profile name to assign, or None for "none", "-" or an empty name (unassign)."""
    if name is not None and name.strip().lower() in ("", "none", "-"):
        return None
    return model.profile_name(name) if name is not None else None


def assign(
    db: Database, board: str, task_id: str, assignee: str | None, *, reclaim: bool = False, actor: str | None = None
) -> Row:
    return db.write(_assign, board, task_id, _assignee(assignee), reclaim, actor)


_EDITABLE = ("title", "body", "priority", "tenant", "result", "max_runtime_seconds", "max_retries", "review_required", "verify", "skills", "branch_name", "goal_id", "model")


def _edit(tx: Tx, board: str, task_id: str, changes: dict[str, Any], actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    require_board(tx, board)  # an archived board's tasks stay as they are until it is restored
    states.check("edit", task["status"], task["status"], task_id)
    if "branch_name" in changes and changes["branch_name"] != task.get("branch_name"):
        _check_branch_change(tx, task)
    if "verify" in changes:
        checked_verify(tx, board, decoded_verify(changes["verify"]))
    if "goal_id" in changes and changes["goal_id"]:
        if tx.one("SELECT id FROM goals WHERE id = :g AND board = :b", {"g": changes["goal_id"], "b": board}) is None:
            raise NotFound(f"no goal {changes['goal_id']} on board {board!r}")
    changed = {k: v for k, v in changes.items() if task.get(k) != v}
    if not changed:
        return task_out(task)
    now = time.time()
    sets = ", ".join(f"{k} = :{k}" for k in changed)
    params = dict(changed)
    params.update(id=task_id, now=now)
    tx.execute(f"UPDATE tasks SET {sets}, updated_at = :now WHERE id = :id", params)
    if "priority" in changed:
        tx.event(board, task_id, "reprioritized", {"priority": changed["priority"], "previous": task["priority"]}, actor=actor, at=now)
    others = [k for k in changed if k != "priority"]
    if others:
        tx.event(board, task_id, "edited", {"fields": others}, actor=actor, at=now)
    if "goal_id" in changed:
        # the task moved between goals: the new one may reopen, the old one may settle
        if task["status"] not in states.SATISFIED:
            reopen_goal(tx, changed["goal_id"])
        settle_goal(tx, board, task.get("goal_id"), actor)
    task.update(changed)
    return task_out(task)


#: the statuses of a task whose branch may still change: it has not started (or never got a workspace)
_BRANCH_EDITABLE = (states.TRIAGE, states.TODO, states.READY, states.BLOCKED)


def _check_branch_change(tx: Tx, task: Row) -> None:
    """A task's branch (``branch_name``: the branch its worktree is made on, an existing one
    checked out as it is, so the task starts from its commits) may change only before its
    worktree is made: never for a task that has run in a workspace, whose branch holds its work
    (``Conflict`` saying so), nor for a race or one of its attempts."""
    tid = task["id"]
    if task.get("race_of") or task.get("race_until"):
        raise Conflict(f"task {tid} is a race's {'attempt' if task.get('race_of') else 'task'}: its branches are "
                       "its attempts' own; pick an attempt instead (agentboard attempts ID)")
    used = tx.scalar("SELECT COUNT(*) FROM task_runs WHERE task_id = :id AND workspace_path IS NOT NULL", {"id": tid})
    worktree = _made_worktree(tx, task)
    if task["status"] not in _BRANCH_EDITABLE or used or task.get("base_branch") or worktree:
        where = f" ({worktree})" if worktree else ""
        raise Conflict(f"task {tid} has started{where}: its branch {task.get('branch_name') or 'ab/' + tid} holds its "
                       "work and cannot change; a branch is set only on a task that has not started "
                       "(agentboard create ... --branch NAME)")


def _made_worktree(tx: Tx, task: Row) -> str | None:
    """The task's worktree folder when one exists already (``<repo>/.worktrees/<id>``): made by a
    start that failed after it, it is reused as it is by the next."""
    repo = task.get("workspace_path") if task.get("workspace_kind") == "worktree" else None
    if not repo:
        row = tx.one("SELECT default_workdir FROM boards WHERE slug = :b", {"b": task["board"]})
        repo = row["default_workdir"] if row else None
    if not repo:
        return None
    path = os.path.join(str(repo), ".worktrees", str(task["id"]))
    return path if os.path.lexists(path) else None


def edit(db: Database, board: str, task_id: str, *, actor: str | None = None, **fields: Any) -> Row:
    """Change a task's fields (see ``_EDITABLE``); a field given as None is left as it is."""
    return db.write(_edit, board, task_id, _edit_changes(fields), actor)


def _edit_changes(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The column values an edit writes, checked and normalized (raises ``InvalidInput``)."""
    changes: dict[str, Any] = {}
    for key, value in fields.items():
        if value is None:
            continue
        if key not in _EDITABLE:
            raise InvalidInput(f"cannot edit field {key!r}; editable: {', '.join(_EDITABLE)}")
        if key == "title":
            value = model.title(value)
        elif key == "body":
            value = model.body(value)
        elif key in ("priority", "max_retries"):
            value = task_fields.check(key, value)  # the limits and messages of a new task's
        elif key == "max_runtime_seconds":
            value = model.duration(value)
        elif key == "review_required":
            value = 1 if value else 0
        elif key in ("verify", "skills"):
            value = dump_json(list(value))
        elif key == "result":
            value = str(value).strip().splitlines()[0][:500] if str(value).strip() else None
        elif key == "branch_name":  # create --branch's limits and message
            value = task_fields.check("branch", str(value)) if str(value).strip() else None
        elif key == "model":
            value = _model.model_name(str(value))  # an empty value clears it: the profile's model
        elif key in ("tenant", "goal_id") and value == "":
            value = None  # an empty value clears the field
        changes[key] = value
    if not changes:
        raise InvalidInput("nothing to change: give at least one field to edit")
    return changes

# -- the dashboard's edit: fields, assignee and status together ----------------------------------


def update(
    db: Database,
    board: str,
    task_id: str,
    *,
    fields: Mapping[str, Any] | None = None,
    assign: bool = False,
    assignee: str | None = None,
    status: str | None = None,
    reason: str | None = None,
    actor: str | None = None,
    integrated: bool = False,
    expected: str | None = None,
) -> Row:
    """Edit ``fields``, then (with ``assign=True``) set the assignee (None unassigns), then move
    to ``status`` — all in one transaction, so a refused step (say the status move) leaves none
    of the others behind. Returns the task as the last step left it. ``integrated``: as for
    :func:`set_status`. ``expected``: the status the caller saw the task in; a task that has
    left it is refused with nothing changed (``moves.expect_status``, under the task's lock).
    """
    changes = _edit_changes(fields) if fields else {}
    name = _assignee(assignee) if assign else None
    if status is not None:
        _check_status(status)
    if expected is not None:
        _check_status(expected)
    if not (changes or assign or status is not None):
        raise InvalidInput("nothing to change: give fields to edit, an assignee or a status")

    def _update(tx: Tx) -> Row:
        require_board(tx, board)  # an archived board's tasks stay as they are until it is restored
        task = get_task(tx, board, task_id, lock=True)
        expect_status(task, expected)
        if changes:
            task = _edit(tx, board, task_id, changes, actor)
        if assign:
            task = _assign(tx, board, task_id, name, False, actor)
        if status is not None:
            task = _set_status(tx, board, task_id, status, reason, actor, integrated)
        return task_out(task)

    return db.write(_update)

# -- bulk ----------------------------------------------------------------------------------------


def bulk(fn: Callable[..., Row], db: Database, board: str, ids: Iterable[str], *args: Any, **kwargs: Any) -> list[Row]:
    """Apply one verb to several tasks; per-id failures never abort the others."""
    results: list[Row] = []
    for task_id in ids:
        try:
            task = fn(db, board, task_id, *args, **kwargs)
            results.append({"id": task_id, "ok": True, "status": task.get("status"), "task": task})
        except AgentboardError as exc:
            results.append({"id": task_id, "ok": False, "error": {"code": exc.code, "message": exc.message}})
    return results
