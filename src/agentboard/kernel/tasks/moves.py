"""Status moves: release, block, unblock, archive, restore, reopen, the dashboard's status drag
(one verb per target status) and a refused integration."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ...domain import model, states
from ...domain.errors import Conflict, InvalidInput, InvalidTransition, NotFound
from ...store.engine import Database, Row, Tx, dump_json
from .. import budgets, hooks
from ..common import (
    default_assignee,
    get_task,
    pending_parents,
    ready_or_todo,
    require_board,
    task_out,
)
from ..flow import (
    after_satisfied,
    demote_ready_children,
    promote_children,
    reopen_goal,
)
from ..links import cycle_path
from ..runs import (
    Report,
    Verdict,
    complete_in,
    reclaim_in,
    request_review_in,
    review_in,
    stale_error,
)

# -- simple status verbs -----------------------------------------------------------------------


def _on_live_board(move: Callable[..., Row]) -> Callable[..., Row]:
    """``move`` (a verb's function inside its transaction), refused first on an archived board:
    its tasks stay as they are until it is restored, as with comments and edits."""
    def checked(tx: Tx, board: str, *args: Any) -> Row:
        require_board(tx, board)
        return move(tx, board, *args)
    return checked



def _release(tx: Tx, board: str, task_id: str, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    target = ready_or_todo(tx, task_id, task["assignee"], board)
    states.check("release", task["status"], target, task_id)
    assignee = task["assignee"] or (default_assignee(tx, board) if target == states.READY else None)
    now = time.time()
    tx.execute(
        "UPDATE tasks SET status = :s, assignee = :a, updated_at = :now WHERE id = :id",
        {"s": target, "a": assignee, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "released", {"status": target}, actor=actor, at=now)
    task.update(status=target, assignee=assignee)
    return task_out(task)


def release(db: Database, board: str, task_id: str, *, actor: str | None = None) -> Row:
    return db.write(_on_live_board(_release), board, task_id, actor)


#: a run's metadata when a person (no run token) closed it while its worker ran: the dispatcher
#: stops that worker at once instead of giving it the grace of a worker that reported
BY_HAND = {"closed_by_hand": True}


def _close_open_run(tx: Tx, task: Row, outcome: str, now: float, *, summary: str | None = None,
                    error: str | None = None, by_hand: bool = False) -> int | None:
    run_id = task.get("current_run_id")
    if run_id is None:
        return None
    closed = tx.one(
        "UPDATE task_runs SET status = 'closed', outcome = :o, ended_at = :now, "
        "summary = COALESCE(:s, summary), error = COALESCE(:e, error), metadata = COALESCE(:m, metadata) "
        "WHERE id = :r AND status = 'open'" + budgets.CLOSED_RUN,
        {"o": outcome, "now": now, "s": summary, "e": error, "m": dump_json(BY_HAND) if by_hand else None,
         "r": run_id},
    )
    budgets.account_run_in(tx, closed, task=task)
    return int(run_id)


_CLEAR_CLAIM = (
    "current_run_id = NULL, claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, "
    "worker_host = NULL"
)


def _block_reason(reason: str | None, kind: str) -> str:
    """A block's reason, checked (it must say what the task waits for) with its kind."""
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("a block needs a reason: say what the task is waiting for")
    if kind not in states.BLOCK_KINDS:
        raise InvalidInput(f"invalid block kind {kind!r}: use one of {', '.join(states.BLOCK_KINDS)}")
    model.body(reason, model.COMMENT_MAX, "reason")
    return reason


def _block(tx: Tx, board: str, task_id: str, reason: str, kind: str, run_id: int | None, actor: str | None,
           on: str | None = None, until: float | None = None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    if run_id is not None and task["current_run_id"] != run_id:
        raise stale_error(task, run_id)
    if kind == "dependency" and on:
        return _wait(tx, board, task, reason, on, actor)
    states.check("block", task["status"], states.BLOCKED, task_id)
    now = time.time()
    closed = None
    if task["status"] == states.RUNNING:
        # a run stopped by a rate limit keeps that as its outcome; the run keeps the whole text
        closed = _close_open_run(tx, task, "rate_limited" if kind == "rate_limited" else "blocked", now,
                                 summary=reason, by_hand=run_id is None)
    full, reason = reason, model.reason_line(reason) or reason  # the task's reason is one line
    tx.execute(
        f"UPDATE tasks SET status = 'blocked', block_kind = :k, block_reason = :r, block_on = NULL, {_CLEAR_CLAIM}, "
        "cooldown_until = :u, updated_at = :now WHERE id = :id",
        {"k": kind, "r": reason, "u": until, "now": now, "id": task_id},
    )
    payload: dict[str, Any] = {"reason": reason, "kind": kind}
    if full != reason:
        payload["detail"] = full
    if until is not None:
        payload["until"] = until
    tx.event(board, task_id, "blocked", payload, run_id=closed, actor=actor, at=now)
    task.update(status=states.BLOCKED, block_kind=kind, block_reason=reason, current_run_id=None, block_on=None,
                cooldown_until=until)
    task = hooks.blocked(tx, board, task, kind, reason, actor)
    return task_out(task)


def _wait(tx: Tx, board: str, task: Row, reason: str, on: str, actor: str | None) -> Row:
    """A ``dependency`` block: ``task`` waits in todo, as a child of ``on``, and resumes by itself
    (promoted to ready) when ``on`` is done."""
    task_id = task["id"]
    other = tx.one("SELECT id, board, status FROM tasks WHERE id = :id", {"id": on})
    if other is None or other["board"] != board:
        raise NotFound(f"no task {on} on board {board!r} to wait for")
    if on == task_id:
        raise InvalidInput(f"a task cannot wait for itself ({task_id})")
    path = cycle_path(tx, on, task_id)
    if path:
        raise Conflict(f"{task_id} cannot wait for {on}: {' → '.join(path + [task_id])} would be a cycle")
    states.check("wait", task["status"], states.TODO, task_id)
    now = time.time()
    closed = None
    if task["status"] == states.RUNNING:
        closed = _close_open_run(tx, task, "blocked", now, summary=reason)
    tx.execute(
        "INSERT INTO task_links (parent_id, child_id, board, created_at) VALUES (:p, :c, :b, :now) "
        "ON CONFLICT (parent_id, child_id) DO NOTHING",
        {"p": on, "c": task_id, "b": board, "now": now},
    )
    tx.execute(
        f"UPDATE tasks SET status = 'todo', block_kind = 'dependency', block_reason = :r, block_on = :on, {_CLEAR_CLAIM}, "
        "updated_at = :now WHERE id = :id",
        {"r": reason, "on": on, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "blocked", {"reason": reason, "kind": "dependency", "on": on, "status": states.TODO},
             run_id=closed, actor=actor, at=now)
    task.update(status=states.TODO, block_kind="dependency", block_reason=reason, block_on=on, current_run_id=None)
    if other["status"] in states.SATISFIED:  # nothing to wait for: it resumes at once
        promote_children(tx, board, on, actor)
        task = get_task(tx, board, task_id)
    hooks.blocked(tx, board, task, "dependency", reason, actor)
    return task_out(task)


def block(
    db: Database,
    board: str,
    task_id: str,
    reason: str,
    *,
    kind: str = "manual",
    run_id: int | None = None,
    on: str | None = None,
    actor: str | None = None,
    until: float | None = None,
) -> Row:
    """Block a task with a reason and a kind. ``kind="dependency"`` with ``on=TASK_ID``: the task
    waits in todo and resumes by itself when that task is done. ``until`` (epoch seconds): when a
    timed kind (``rate_limited``) ends; the dispatcher unblocks the task then, by itself."""
    reason = _block_reason(reason, kind)
    on = (on or "").strip() or None
    if on and kind != "dependency":
        raise InvalidInput("--on names the task a dependency waits for: use it with --kind dependency")
    if until is not None and kind not in states.TIMED_BLOCK_KINDS:
        raise InvalidInput(f"only a {' or '.join(sorted(states.TIMED_BLOCK_KINDS))} block ends at a set time")
    # a person's block on an archived board is refused; a worker's (with its run) cannot be there
    return db.write(_block if run_id is not None else _on_live_board(_block), board, task_id, reason, kind, run_id,
                    actor, on, until)


def _race_unblock_refusal(tx: Tx, task: Row) -> str | None:
    """Why the attempt ``task`` of a race must not be unblocked on its own: its race is not
    running — finished, or settled where running the race again is the race's own verb."""
    race = tx.one("SELECT id, status FROM tasks WHERE id = :r", {"r": task["race_of"]})
    if race is None or race["status"] in (states.READY, states.RUNNING):
        return None
    rid, status = race["id"], race["status"]
    head = f"task {task['id']} is an attempt of race {rid}, which is {status}"
    if status == states.DONE:
        return f"{head}: the race is finished, and an attempt of a finished race does not run again"
    if status == states.ARCHIVED:
        return f"{head}: restore the race to run its attempts again (`agentboard restore {rid}`)"
    if status == states.REVIEW:
        return (f"{head}: pick the attempt that wins (`agentboard pick {rid} N`), or send the race back to run its "
                f"attempts again (`agentboard review {rid} --request-changes \"...\"`)")
    if status == states.BLOCKED:
        return f"{head}: unblock the race, which runs its failed and stopped attempts again (`agentboard unblock {rid}`)"
    return f"{head}: its attempts run when the race does"


def _unblock(tx: Tx, board: str, task_id: str, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    target = ready_or_todo(tx, task_id, task["assignee"], board)
    states.check("unblock", task["status"], target, task_id)
    if task.get("race_of"):
        refused = _race_unblock_refusal(tx, task)
        if refused:
            raise Conflict(refused)
    if task.get("block_kind") == "budget" and (actor or "").startswith("supervisor:"):
        # the dispatcher would block it again at once, and that wakes the supervisor again
        spent = budgets.gate_in(tx, task)
        if spent:
            raise Conflict(f"{spent}; a supervisor cannot raise a budget: escalate it to a person "
                           f"(`agentboard supervisor escalate {task_id} \"...\"`)")
    assignee = task["assignee"] or (default_assignee(tx, board) if target == states.READY else None)
    now = time.time()
    tx.execute(
        "UPDATE tasks SET status = :s, assignee = :a, block_kind = NULL, block_reason = NULL, block_on = NULL, "
        "block_to = NULL, consecutive_failures = 0, protocol_violations = 0, cooldown_until = NULL, updated_at = :now "
        "WHERE id = :id",
        {"s": target, "a": assignee, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "unblocked", {"status": target}, actor=actor, at=now)
    task.update(status=target, block_kind=None, block_reason=None, consecutive_failures=0)
    return task_out(task)


def unblock(db: Database, board: str, task_id: str, *, actor: str | None = None) -> Row:
    return db.write(_on_live_board(_unblock), board, task_id, actor)


def unblock_in(tx: Tx, board: str, task_id: str, *, actor: str | None = None) -> Row:
    """:func:`unblock` inside the caller's transaction."""
    return _unblock(tx, board, task_id, actor)


def _archive(tx: Tx, board: str, task_id: str, actor: str | None, reason: str | None = None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    states.check("archive", task["status"], states.ARCHIVED, task_id)
    now = time.time()
    closed = _close_open_run(tx, task, "reclaimed", now, error="archived while running")
    tx.execute(
        f"UPDATE tasks SET status = 'archived', {_CLEAR_CLAIM}, updated_at = :now WHERE id = :id",
        {"now": now, "id": task_id},
    )
    payload: dict[str, Any] = {"from": task["status"], "closed_run": closed}
    if reason:
        payload["reason"] = reason
    tx.event(board, task_id, "archived", payload, run_id=closed, actor=actor, at=now)
    task.update(status=states.ARCHIVED, current_run_id=None)
    after_satisfied(tx, board, task, actor)
    return task_out(task)


def archive(db: Database, board: str, task_id: str, *, actor: str | None = None) -> Row:
    return db.write(_on_live_board(_archive), board, task_id, actor)


def _restore(tx: Tx, board: str, task_id: str, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    target = ready_or_todo(tx, task_id, task["assignee"], board)
    states.check("restore", task["status"], target, task_id)
    if task["idempotency_key"]:
        clash = tx.one(
            "SELECT id FROM tasks WHERE board = :b AND idempotency_key = :k AND status != 'archived'",
            {"b": board, "k": task["idempotency_key"]},
        )
        if clash:
            raise Conflict(
                f"task {clash['id']} already uses idempotency key {task['idempotency_key']!r}; archive it first"
            )
    if task["completed_at"] is not None:  # archived once done: no longer done
        hooks.task_undone(tx, board, task_id)
    now = time.time()
    tx.execute(
        "UPDATE tasks SET status = :s, updated_at = :now WHERE id = :id",
        {"s": target, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "restored", {"status": target}, actor=actor, at=now)
    demote_ready_children(tx, board, task_id, actor)
    reopen_goal(tx, task["goal_id"])
    task.update(status=target)
    return task_out(task)


def restore(db: Database, board: str, task_id: str, *, actor: str | None = None) -> Row:
    return db.write(_on_live_board(_restore), board, task_id, actor)


def _reopen(tx: Tx, board: str, task_id: str, reason: str | None, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    target = ready_or_todo(tx, task_id, task["assignee"], board)
    states.check("reopen", task["status"], target, task_id)
    hooks.task_undone(tx, board, task_id)
    now = time.time()
    tx.execute(
        "UPDATE tasks SET status = :s, completed_at = NULL, updated_at = :now WHERE id = :id",
        {"s": target, "now": now, "id": task_id},
    )
    demoted = demote_ready_children(tx, board, task_id, actor)
    tx.event(board, task_id, "reopened", {"status": target, "reason": reason, "demoted": demoted}, actor=actor, at=now)
    reopen_goal(tx, task["goal_id"])
    task.update(status=target, completed_at=None)
    return task_out(task)


def reopen(db: Database, board: str, task_id: str, *, reason: str | None = None, actor: str | None = None) -> Row:
    return db.write(_on_live_board(_reopen), board, task_id, reason, actor)

# -- the dashboard's status drag -----------------------------------------------------------------


def set_status(db: Database, board: str, task_id: str, status: str, *, reason: str | None = None,
               actor: str | None = None, integrated: bool = False, expected: str | None = None) -> Row:
    """Map a requested status to the verb that reaches it; never a raw column write.

    One transaction: a refused move changes nothing. A move to done that integrates the task's
    branch needs ``integrated=True``: surfaces call ``dispatch.finish.set_status``, which runs
    the gates and the integration first. ``expected``: the status the person saw when they
    asked for the move (the dashboard's); a task in another status by then is refused
    (:func:`expect_status`), checked under the task's lock in the same transaction.
    """
    _check_status(status)
    if expected is not None:
        _check_status(expected)
    return db.write(_on_live_board(_set_status), board, task_id, status, reason, actor, integrated, expected)


def _check_status(status: str) -> None:
    if status not in states.STATUSES:
        raise InvalidInput(f"unknown status {status!r}; use one of {', '.join(states.STATUSES)}")


def expect_status(task: Row, expected: str | None) -> None:
    """Refuse (:class:`Conflict`, 409) a change asked for a task in status ``expected`` that has
    left it since (a worker finished it, a reviewer approved it): what the person confirmed,
    say a request for changes, would be another verb now (a reopen). None: no expectation."""
    if expected is not None and task["status"] != expected:
        raise Conflict(f"task {task['id']} is now {task['status']}, no longer {expected}: nothing changed")


def _set_status(tx: Tx, board: str, task_id: str, status: str, reason: str | None, actor: str | None,
                integrated: bool = False, expected: str | None = None) -> Row:
    current = get_task(tx, board, task_id, lock=True)
    expect_status(current, expected)
    cur = current["status"]
    if cur == status:
        if status == states.BLOCKED and reason and reason.strip() != (current.get("block_reason") or ""):
            # as `block` on a blocked task: a new reason is never dropped without a word
            raise InvalidTransition(f"task {task_id} is blocked already (\"{current.get('block_reason') or ''}\"): "
                                    "unblock it first, or add the new reason as a comment")
        return task_out(current)
    if status == states.RUNNING:
        raise Conflict("a task cannot be moved to running by hand; the dispatcher starts it when it is ready")
    if status == states.ARCHIVED:
        return _archive(tx, board, task_id, actor)
    if status == states.BLOCKED:
        if cur == states.REVIEW:  # a person's rejection of the reviewed work: a review verdict
            verdict = Verdict.build("rejected", reason or f"rejected by {actor or 'a person'}", actor=actor)
            return review_in(tx, board, task_id, verdict, actor=actor)
        why = _block_reason(reason or f"blocked by {actor or 'a person'}", "manual")
        return _block(tx, board, task_id, why, "manual", None, actor)
    if status == states.DONE:
        if cur == states.REVIEW:
            return review_in(tx, board, task_id, Verdict.build("approved", actor=actor), actor=actor,
                             integrated=integrated)
        return complete_in(tx, board, task_id, Report(), actor=actor, integrated=integrated)
    if status == states.REVIEW:
        if cur != states.RUNNING:
            raise Conflict(f"only a running task can be handed to review (task {task_id} is {cur})")
        return request_review_in(tx, board, task_id, actor=actor)
    if status == states.TRIAGE:
        raise Conflict(f"cannot move task {task_id} back to triage")
    if status == states.READY:
        # refuse before any verb runs
        pending = pending_parents(tx, task_id)
        if pending:
            raise Conflict(f"task {task_id} has parents that are not done: {', '.join(pending)}")
        if not current.get("assignee") and not default_assignee(tx, board):
            raise Conflict(f"task {task_id} has no assignee; assign a profile to make it ready")
    # ready / todo
    if cur == states.ARCHIVED:
        out = _restore(tx, board, task_id, actor)
    elif cur == states.DONE:
        out = _reopen(tx, board, task_id, None, actor)
    elif cur == states.BLOCKED:
        out = _unblock(tx, board, task_id, actor)
    elif cur == states.TRIAGE:
        out = _release(tx, board, task_id, actor)
    elif cur == states.RUNNING:
        out = reclaim_in(tx, board, task_id, actor=actor)
    elif cur == states.REVIEW:
        verdict = Verdict.build("changes_requested", reason or "sent back to the queue", actor=actor)
        out = review_in(tx, board, task_id, verdict, actor=actor)
    else:
        out = _move_todo_ready(tx, board, task_id, status, actor)
    if status == states.READY and out["status"] != states.READY:
        # the verb landed in todo: refuse, and the transaction leaves the task as it was
        pending = pending_parents(tx, task_id)
        if pending:
            raise Conflict(f"task {task_id} has parents that are not done: {', '.join(pending)}")
        if not out.get("assignee"):
            raise Conflict(f"task {task_id} has no assignee; assign a profile to make it ready")
    if status == states.TODO and out["status"] == states.READY:
        # the verb let the task land in ready (its parents are done): a person asked for todo
        out = _move_todo_ready(tx, board, task_id, states.TODO, actor)
    return out


def _refuse_integration(tx: Tx, board: str, task_id: str, reason: str, run_id: int, detail: dict[str, Any],
                        actor: str | None) -> Row:
    out = _block(tx, board, task_id, reason, "needs_input", run_id, actor)
    tx.execute("UPDATE tasks SET integration = 'refused', last_outcome = 'integration_refused' WHERE id = :id",
               {"id": task_id})
    tx.event(board, task_id, "integration_refused", {"reason": reason, **detail}, run_id=run_id, actor=actor)
    out["integration"] = "refused"
    return out


def refuse_integration(db: Database, board: str, task_id: str, reason: str, *, run_id: int,
                       detail: dict[str, Any] | None = None, actor: str | None = None) -> Row:
    """A worker's run on a task without review succeeded (and was verified), but its branch
    could not be integrated into the board's base branch: the run closes, the task is blocked
    ``needs_input`` with the reason (an ``integration_refused`` event), and nothing in git changed."""
    why = _block_reason(reason, "needs_input")
    return db.write(_refuse_integration, board, task_id, why, run_id, dict(detail or {}), actor)

def _move_todo_ready(tx: Tx, board: str, task_id: str, status: str, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    cur = task["status"]
    if status == states.READY:
        pending = pending_parents(tx, task_id)
        if pending:
            raise Conflict(f"task {task_id} has parents that are not done: {', '.join(pending)}")
        assignee = task["assignee"] or default_assignee(tx, board)
        if not assignee:
            raise Conflict(f"task {task_id} has no assignee; assign a profile to make it ready")
        verb = "promote"
    else:
        assignee = task["assignee"]
        verb = "demote"
    states.check(verb, cur, status, task_id)
    now = time.time()
    # a person's todo for a task whose parents are done is a hold (nothing else would keep it
    # there: the dispatcher's safety net promotes such tasks); ready ends it
    held = status == states.TODO and not pending_parents(tx, task_id)
    kind, why = task.get("block_kind"), task.get("block_reason")
    if held:
        kind, why = states.HELD, f"held in todo by {actor or 'a person'}: move it to ready to let it run"
    elif kind == states.HELD:
        kind = why = None
    tx.execute(
        "UPDATE tasks SET status = :s, assignee = :a, updated_at = :now, block_kind = :k, block_reason = :w "
        "WHERE id = :id",
        {"s": status, "a": assignee, "now": now, "id": task_id, "k": kind, "w": why},
    )
    tx.event(board, task_id, "status", {"from": cur, "to": status, **({"held": True} if held else {})},
             actor=actor, at=now)
    task.update(status=status, assignee=assignee, block_kind=kind, block_reason=why)
    return task_out(task)


#: the verbs in a caller's transaction (the supervisor's tools combine them with their checks)
release_in = _release
archive_in = _archive
block_in = _block
block_reason = _block_reason
