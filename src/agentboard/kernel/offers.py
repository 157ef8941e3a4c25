"""The moves by hand a task offers now (the dashboard's buttons, drag targets and bulk bar):
the transition table's (:func:`~agentboard.domain.states.hand_moves`), less those the kernel
would refuse for this task."""

from __future__ import annotations

from ..domain import states
from ..store.engine import Database, Row, Tx
from .common import default_assignee, done_gate, get_task, pending_parents, ready_or_todo


def allowed_moves_in(tx: Tx, board: str, task: Row) -> list[Row]:
    """The moves by hand (``tasks.set_status``) the kernel accepts for ``task`` now, as
    ``[{"status": target, "verb": verb}]`` in lifecycle order: the transition table's
    (:func:`states.hand_moves`), less a move to ready the task cannot make yet (parents not
    done, no assignee and no default one, or, for a verb that lets the task land in todo, a
    ``not_before`` still ahead); a race (finished by a pick) has no done before a pick, no request for changes and no rejection."""
    task_id = task["id"]
    moves = states.hand_moves(task["status"])
    if task.get("race_until"):
        picked = tx.scalar("SELECT COUNT(*) FROM attempts WHERE task_id = :t AND picked = 1", {"t": task_id})
        moves = {s: v for s, v in moves.items()
                 if v not in ("request_changes", "reject") and (s != states.DONE or picked)}
    verb = moves.get(states.READY)
    if verb == "promote":
        if pending_parents(tx, task_id) or not (task.get("assignee") or default_assignee(tx, board)):
            del moves[states.READY]
    elif verb is not None and ready_or_todo(tx, task_id, task.get("assignee"), board) != states.READY:
        del moves[states.READY]
    if states.DONE in moves and done_gate(task, verify_enabled=bool(tx.db.settings.verify)):
        del moves[states.DONE]  # a person's done would skip its review or its checks (common.done_gate)
    return [{"status": s, "verb": v} for s, v in moves.items()]


def allowed_moves(db: Database, board: str, task_id: str) -> list[Row]:
    """:func:`allowed_moves_in` for one task of ``board`` (what the dashboard offers); none on an
    archived board, whose tasks stay as they are until it is restored."""
    def _moves(tx: Tx) -> list[Row]:
        task = get_task(tx, board, task_id)
        if tx.scalar("SELECT archived FROM boards WHERE slug = :b", {"b": board}):
            return []
        return allowed_moves_in(tx, board, task)
    return db.read(_moves)
