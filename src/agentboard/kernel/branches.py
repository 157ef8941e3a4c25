"""A worktree task's branch on the board: where it started and what approval did with it.

Reads: the branches of a task's parents (:func:`parent_branches`); whether finishing a task
integrates its branch (:func:`integration_due`, which the done transitions of ``runs`` check). Writes: the outcome of
integrating an approved task's branch (:func:`record_integration`), and the refusal that blocks
a task in review for a person (:func:`refuse_integration`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ..domain import model, states
from ..domain.errors import InvalidInput
from ..store.engine import Database, Row, Tx
from .common import board_settings, get_task, task_out

#: what approval did with a task's branch (``tasks.integration``)
OUTCOMES = ("merged", "squashed", "rebased", "pr_opened", "left", "refused")
#: the board ``integrate`` modes that put a finished task's branch on the base branch
INTEGRATING = ("merge", "squash", "rebase", "pr")


def integration_due(task: Row, settings: dict[str, Any] | None, *, approval: bool = False) -> str | None:
    """What finishing ``task`` does with its branch on a board with ``settings``: ``"integrate"``
    (the board's ``integrate`` mode runs first; the task is done only once it succeeded),
    ``"left"`` (the board integrates reviewed tasks only, ``review_before_integrate``: the
    branch is kept and an ``integration_left`` event says so), or None (not a worktree task
    with a branch, the board does not integrate, or the task goes to review instead).
    ``approval``: the task is being approved in review."""
    if task.get("workspace_kind") != "worktree" or not task.get("branch_name"):
        return None
    if task.get("race_of"):
        return None  # a race's attempt: only the picked one is integrated, as the race's branch
    st = settings or {}
    if st.get("integrate") not in INTEGRATING:
        return None
    if approval:
        return "integrate"
    if task.get("review_required"):
        return None  # it goes to review; its approval integrates
    return "left" if st.get("review_before_integrate") else "integrate"


def integration_due_in(tx: Tx, board: str, task: Row, *, approval: bool = False) -> str | None:
    """:func:`integration_due` with the board's settings read in ``tx`` (only for a worktree task)."""
    if task.get("workspace_kind") != "worktree" or not task.get("branch_name"):
        return None
    return integration_due(task, board_settings(tx, board), approval=approval)


def left_in(tx: Tx, board: str, task_id: str, actor: str | None) -> None:
    """A task without review finished on a board that integrates reviewed tasks only: its
    branch is kept, and an ``integration_left`` event says why."""
    _record(tx, board, task_id, "left", None,
            {"reason": "the board integrates reviewed tasks only (review_before_integrate)"}, actor)


def in_git_work_tree(path: str | None) -> bool:
    """Whether ``path`` is a folder inside a git work tree (a ``.git`` in it or above it)."""
    if not path or not os.path.isdir(path):
        return False
    p = Path(path).resolve()
    return any((d / ".git").exists() for d in (p, *p.parents))


def check_worktree_task(tx: Tx, board: str, path: str | None) -> None:
    """A ``worktree`` task needs a git repository: its own ``worktree:<path>`` or the board's
    target directory. :class:`InvalidInput` saying what to do otherwise."""
    if path:
        if not in_git_work_tree(path):
            raise InvalidInput(f"worktree:{path} is not a git repository: git init it, or use dir:{path}")
        return
    row = tx.one("SELECT default_workdir FROM boards WHERE slug = :b", {"b": board})
    target = row["default_workdir"] if row else None
    if not target:
        raise InvalidInput(f"board {board!r} has no target directory, so a worktree task has no repository: "
                           "give --workspace worktree:<repo path>, or create the board with --workdir <git repo>")
    if not in_git_work_tree(target):
        raise InvalidInput(f"board {board!r}'s target directory {target} is not a git repository: git init it, "
                           "or give --workspace worktree:<repo path>")


def parent_branches(db: Database, board: str, task_id: str) -> list[tuple[str, str | None]]:
    """The parents of a task, oldest link first, each with its branch (None when it has none)."""
    def _r(tx: Tx) -> list[tuple[str, str | None]]:
        own = get_task(tx, board, task_id)
        # a race's attempt starts where its race would: from the race's parents
        child = own.get("race_of") or task_id
        rows = tx.all(
            "SELECT t.id, t.branch_name, t.workspace_kind FROM task_links l JOIN tasks t ON t.id = l.parent_id "
            "WHERE l.child_id = :id ORDER BY l.created_at, t.id", {"id": child})
        return [(r["id"], r["branch_name"] if r["workspace_kind"] == "worktree" else None) for r in rows]
    return db.read(_r)


def _record(tx: Tx, board: str, task_id: str, outcome: str, pr_url: str | None, detail: dict[str, Any],
            actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    now = time.time()
    tx.execute("UPDATE tasks SET integration = :o, pr_url = COALESCE(:u, pr_url), updated_at = :now WHERE id = :id",
               {"o": outcome, "u": pr_url, "now": now, "id": task_id})
    kind = "integration_left" if outcome == "left" else "integrated"
    tx.event(board, task_id, kind, {"outcome": outcome, "pr_url": pr_url, **detail}, actor=actor, at=now)
    task.update(integration=outcome, pr_url=pr_url or task.get("pr_url"))
    return task_out(task)


def record_integration(db: Database, board: str, task_id: str, outcome: str, *, pr_url: str | None = None,
                       detail: dict[str, Any] | None = None, actor: str | None = None) -> Row:
    """Record what approval did with the task's branch (an ``integrated`` event, or
    ``integration_left`` for ``left``)."""
    if outcome not in OUTCOMES or outcome == "refused":
        raise InvalidInput(f"unknown integration outcome {outcome!r}")
    return db.write(_record, board, task_id, outcome, pr_url, dict(detail or {}), actor)


def _refuse(tx: Tx, board: str, task_id: str, reason: str, detail: dict[str, Any], actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    states.check("integration_refused", task["status"], states.BLOCKED, task_id)
    now = time.time()
    full, reason = reason, model.reason_line(reason) or reason  # the task's reason is one line
    if full != reason:
        detail = {**detail, "detail": full}  # the whole text stays in the event
    tx.execute(
        "UPDATE tasks SET status = 'blocked', block_kind = 'needs_input', block_reason = :r, integration = 'refused', "
        "last_outcome = 'integration_refused', updated_at = :now WHERE id = :id",
        {"r": reason, "now": now, "id": task_id})
    tx.event(board, task_id, "integration_refused", {"reason": reason, **detail}, actor=actor, at=now)
    tx.event(board, task_id, "blocked", {"reason": reason, "kind": "needs_input"}, actor=actor, at=now)
    task.update(status=states.BLOCKED, block_kind="needs_input", block_reason=reason, integration="refused")
    return task_out(task)


def refuse_integration(db: Database, board: str, task_id: str, reason: str, *, detail: dict[str, Any] | None = None,
                       actor: str | None = None) -> Row:
    """A task in review whose approval could not integrate its branch: blocked ``needs_input``
    with the reason (the branch and the target repository are left as they were)."""
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("a refused integration needs a reason")
    model.body(reason, model.COMMENT_MAX, "reason")
    return db.write(_refuse, board, task_id, reason, dict(detail or {}), actor)


__all__ = ["INTEGRATING", "OUTCOMES", "check_worktree_task", "integration_due", "integration_due_in", "left_in", "in_git_work_tree", "parent_branches", "record_integration", "refuse_integration"]
