"""The writes of the supervisor's tools: mark wakes handled, release or discard a replan
proposal, escalate to a person, a goal's verdict."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from ...domain import model, states
from ...domain.errors import Conflict, Forbidden, InvalidInput, NotFound
from ...store.engine import Database, Row, Tx, in_list
from ..common import board_settings, get_task, task_out
from ..tasks import NewTask, archive_in, block_in, block_reason, create_in, release_in
from .reads import wake_out
from .sweep import _close
from .waking import REPLAN_ACTOR, enqueue, is_supervisor_actor

# -- the supervisor's tools ----------------------------------------------------------------------


def _ids(values: Iterable[int | str]) -> list[int]:
    out = []
    for v in values:
        try:
            out.append(int(v))
        except (TypeError, ValueError):
            raise InvalidInput(f"invalid wake id {v!r}: wake ids are numbers") from None
    if not out:
        raise InvalidInput("give at least one wake id")
    return out


def handle(db: Database, board: str, wake_ids: Iterable[int | str], *, note: str | None = None,
           actor: str | None = None) -> list[Row]:
    """Mark wakes handled (the supervisor's reasoning summary in ``note``); a wake already closed
    is refused, and nothing changes."""
    ids = _ids(wake_ids)

    def _w(tx: Tx) -> list[Row]:
        params: dict[str, Any] = {"b": board}
        lock = " FOR UPDATE" if tx.db.dialect == "postgresql" else ""
        rows = tx.all(f"SELECT * FROM supervisor_wakes WHERE board = :b AND id IN {in_list('w', ids, params)}" + lock,
                      params)
        found = {int(r["id"]): r for r in rows}
        for i in ids:
            if i not in found:
                raise NotFound(f"no wake {i} on board {board!r}; see `agentboard supervisor wakes`")
            if found[i]["status"] not in ("pending", "running"):
                raise Conflict(f"wake {i} is already {found[i]['status']}")
        now = time.time()
        for i in ids:
            _close(tx, found[i], "handled", note, actor, now)
        return [wake_out(dict(found[i], status="handled", note=note, handled_at=now)) for i in ids]

    return db.write(_w)


def _own_proposal(tx: Tx, board: str, task_id: str, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    if task["status"] != states.TRIAGE:
        raise Conflict(f"task {task_id} is {task['status']}, not a proposal waiting in triage")
    mine = task["created_by"] in (actor, REPLAN_ACTOR)
    if is_supervisor_actor(actor) and not mine:
        raise Forbidden(f"the supervisor may only release or discard its own proposals and the kernel's replan "
                        f"proposals; task {task_id} was proposed by {task['created_by'] or 'someone else'}: a person decides")
    return task


def release_proposal(db: Database, board: str, task_id: str, *, actor: str | None = None) -> Row:
    """Release a proposal from triage (the supervisor: only its own and the replan proposals).
    The released task meets every gate like any other task."""
    def _w(tx: Tx) -> Row:
        _own_proposal(tx, board, task_id, actor)
        return release_in(tx, board, task_id, actor)
    return db.write(_w)


def discard_proposal(db: Database, board: str, task_id: str, *, actor: str | None = None) -> Row:
    """Archive a proposal (the supervisor: only its own and the replan proposals)."""
    def _w(tx: Tx) -> Row:
        _own_proposal(tx, board, task_id, actor)
        return archive_in(tx, board, task_id, actor)
    return db.write(_w)


#: blocks an escalation leaves as they are (kind and reason), only addressing them to a person:
#: they end by themselves when their cause does (a budget raised, a rate limit's reset)
KEPT_KINDS = frozenset({"budget", "rate_limited"})


def escalate(db: Database, board: str, task_id: str, reason: str, *, to: str | None = None,
             actor: str | None = None) -> Row:
    """Hand a task to a person: blocked with kind ``needs_input``, addressed to ``to`` (default:
    the board's ``escalate_to``); a budget or rate-limit block keeps its kind and reason
    (:data:`KEPT_KINDS`), so raising the budget still releases it."""
    why = block_reason(reason, "needs_input")

    def _w(tx: Tx) -> Row:
        person = to or board_settings(tx, board).get("escalate_to")
        task = get_task(tx, board, task_id, lock=True)
        now = time.time()
        if task["status"] != states.BLOCKED:
            task = block_in(tx, board, task_id, why, "needs_input", None, actor)
        if task.get("block_kind") in KEPT_KINDS:  # what releases it (a raised budget, the reset) still does
            tx.execute("UPDATE tasks SET block_to = :to, updated_at = :now WHERE id = :id",
                       {"to": person, "now": now, "id": task_id})
            tx.event(board, task_id, "escalated", {"to": person, "reason": why[:2000]}, actor=actor, at=now)
            return task_out(dict(task, block_to=person))
        tx.execute("UPDATE tasks SET block_kind = 'needs_input', block_reason = :r, block_to = :to, updated_at = :now "
                   "WHERE id = :id", {"r": why, "to": person, "now": now, "id": task_id})
        tx.event(board, task_id, "escalated", {"to": person, "reason": why[:2000]}, actor=actor, at=now)
        return task_out(dict(task, status=states.BLOCKED, block_kind="needs_input", block_reason=why, block_to=person))
    return db.write(_w)


def goal_verdict(db: Database, board: str, goal_id: str, *, passed: bool, evidence: str,
                 actor: str | None = None, propose: bool = True) -> Row:
    """Close a verifying goal: done with its evidence, or back to active with a proposal for the
    missing work (``propose``) in triage."""
    evidence = (evidence or "").strip()
    if not evidence:
        raise InvalidInput("a verdict needs evidence: say what was checked and what it showed")
    model.body(evidence, model.COMMENT_MAX, "evidence")

    def _w(tx: Tx) -> Row:
        g = tx.one("SELECT * FROM goals WHERE id = :g AND board = :b", {"g": goal_id, "b": board})
        if g is None:
            raise NotFound(f"no goal {goal_id} on board {board!r}")
        if g["status"] != "verifying":
            raise Conflict(f"goal {goal_id} is {g['status']}; only a verifying goal takes a verdict")
        now = time.time()
        proposal = None
        if passed:
            tx.execute("UPDATE goals SET status = 'done', completed_at = :now, evidence = :e WHERE id = :g",
                       {"now": now, "e": evidence, "g": goal_id})
            tx.event(board, None, "goal_completed", {"goal_id": goal_id, "evidence": evidence[:2000]}, actor=actor, at=now)
        else:
            tx.execute("UPDATE goals SET status = 'active', evidence = :e WHERE id = :g",
                       {"e": evidence, "g": goal_id})
            if propose:
                body = (f"Goal {goal_id} ({g['title']}) had all its tasks done, but its acceptance check "
                        f"failed:\n\n{evidence}\n\nPropose and release the missing work.")
                proposal = create_in(tx, NewTask(
                    board=board, title=f"Missing for goal: {g['title']}"[: model.TITLE_MAX], body=body[: model.BODY_MAX],
                    goal=goal_id, triage=True, actor=REPLAN_ACTOR, check_board=False))["id"]
                enqueue(tx, board, "replan_proposed", goal_id, actor=actor, detail={"proposal": proposal})
            tx.event(board, None, "goal_verify_failed", {"goal_id": goal_id, "evidence": evidence[:2000],
                                                         "proposal": proposal}, actor=actor, at=now)
        row = tx.one("SELECT * FROM goals WHERE id = :g", {"g": goal_id})
        out = dict(row or {})
        out["proposal"] = proposal
        return out
    return db.write(_w)
