"""Waking the supervisor: its wakes enqueued by the kernel's hooks (one pending row per board,
reason and subject) and the kernel's own replan proposals."""

from __future__ import annotations

import json
import time
from typing import Any

from ...domain import model, states
from ...domain.errors import InvalidInput
from ...store.engine import Row, Tx, dump_json, in_list
from .. import hooks
from ..common import board_settings
from ..tasks import NewTask, create_in

#: ``tasks.purpose`` of the supervisor's own tasks
SUPERVISION = "supervision"
#: who the kernel's own replan proposals are created by
REPLAN_ACTOR = "replan"
ACTOR_PREFIX = "supervisor:"

REASONS = (
    "blocked", "gave_up", "degraded", "sent_back", "crashed", "stale", "goal_verifying",
    "replan_proposed", "block_loop", "run_lost", "stuck", "unrunnable",
)
WAKE_STATUSES = states.WAKE_STATUSES
#: the events that make up a task's failure history
HISTORY_KINDS = (
    "blocked", "gave_up", "rejected", "changes_requested", "verify_failed", "crashed", "stale",
    "timed_out", "protocol_violation", "result_degraded", "spawn_failed", "block_loop_detected",
)
#: outcomes that wake the supervisor when they repeat
REPEATED_OUTCOMES = {"crashed": "crashed", "stale": "stale", "timed_out": "crashed"}
#: how many wakes one pass turns into supervision tasks per board
TAKE_LIMIT = 500


def supervisor_actor(profile: str) -> str:
    return f"{ACTOR_PREFIX}{profile}"


def is_supervisor_actor(actor: str | None) -> bool:
    return bool(actor) and str(actor).startswith(ACTOR_PREFIX)


def supervisor_of(tx: Tx, board: str) -> str | None:
    """The board's supervisor profile (its ``supervisor`` setting), or None."""
    name = board_settings(tx, board).get("supervisor")
    return str(name) if name else None


def _setting(tx: Tx, board: str, key: str) -> int:
    value = board_settings(tx, board).get(key)
    return int(value) if value else int(getattr(tx.db.settings, key))


# -- enqueue -----------------------------------------------------------------------------------

_ENQUEUE = (
    "INSERT INTO supervisor_wakes (board, reason, subject, status, created_at, updated_at, detail, attempt) "
    "VALUES (:b, :r, :s, 'pending', :now, :now, :d, :a) ON CONFLICT DO NOTHING RETURNING id"
)


def enqueue(
    tx: Tx, board: str, reason: str, subject: str, *, actor: str | None = None,
    detail: dict[str, Any] | None = None, task: Row | None = None, attempt: int = 1, supervised: bool = False,
) -> int | None:
    """Enqueue a wake in the caller's transaction; its id, or None when none was added (no
    supervisor, the supervisor's own action or task, or one is already pending).
    ``supervised``: the caller already knows the board has a supervisor."""
    if reason not in REASONS:
        raise InvalidInput(f"unknown wake reason {reason!r}")
    if is_supervisor_actor(actor):
        return None
    if task is not None and task.get("purpose") == SUPERVISION:
        return None
    if not supervised and supervisor_of(tx, board) is None:
        return None
    now = time.time()
    row = tx.one(_ENQUEUE, {"b": board, "r": reason, "s": subject, "now": now,
                            "d": dump_json(detail or {}), "a": attempt})
    if row is None:
        return None
    wid = int(row["id"])
    task_id = subject if subject.startswith("t_") else None
    tx.event(board, task_id, "supervisor_woken",
             {"wake": wid, "reason": reason, "subject": subject, "attempt": attempt, **(detail or {})},
             actor=actor, at=now)
    return wid


# -- the hooks ---------------------------------------------------------------------------------

#: block kinds the board lifts by itself, so the task did nothing that loops: a rate limit (the
#: dispatcher resumes the task when its cool-down ends), a budget (released when the budget
#: allows runs again) and a dependency (resumed when the task waited for is done). They are not
#: counted as blocks of a block loop, and never move a task to triage
SELF_LIFTED = states.TIMED_BLOCK_KINDS | {"budget", "dependency"}


def block_count(tx: Tx, task_id: str) -> int:
    """How many times ``task_id`` was blocked within ``block_loop_window`` for a block loop: its
    ``blocked`` events (all but those of a :data:`SELF_LIFTED` kind), ``gave_up`` and
    ``rejected``, through the task's event index."""
    since = time.time() - float(tx.db.settings.block_loop_window)
    rows = tx.all("SELECT kind, payload FROM task_events WHERE task_id = :t "
                  "AND kind IN ('blocked', 'gave_up', 'rejected') AND created_at > :since",
                  {"t": task_id, "since": since})
    return sum(1 for r in rows if r["kind"] != "blocked" or _block_kind(r["payload"]) not in SELF_LIFTED)


def _block_kind(payload: str | None) -> str | None:
    try:
        data = json.loads(payload or "{}")
    except ValueError:
        return None
    kind = data.get("kind") if isinstance(data, dict) else None
    return str(kind) if kind else None


@hooks.on("blocked")
def on_blocked(tx: Tx, board: str, task: Row, kind: str, reason: str, actor: str | None) -> Row:
    """A task was blocked (any kind) in this transaction: detect a block loop (the task goes to
    triage), else enqueue a ``blocked`` (or ``gave_up``) wake. Returns the task as it now is."""
    if task.get("purpose") == SUPERVISION:
        return task
    limit = _setting(tx, board, "block_loop_limit")
    count = 0 if kind in SELF_LIFTED else block_count(tx, task["id"])
    if count > limit and task.get("status") == states.BLOCKED:
        states.check("block_loop", states.BLOCKED, states.TRIAGE, task["id"])
        now = time.time()
        why = f"blocked {count} times within {int(tx.db.settings.block_loop_window)}s (limit {limit}); last: {reason}"
        # triage waits for a person: nothing of the block is left to end by itself
        tx.execute("UPDATE tasks SET status = 'triage', block_reason = :r, cooldown_until = NULL, updated_at = :now "
                   "WHERE id = :id", {"r": why[: model.COMMENT_MAX], "now": now, "id": task["id"]})
        tx.event(board, task["id"], "block_loop_detected", {"count": count, "limit": limit, "kind": kind,
                                                           "reason": reason[:2000]}, actor=actor, at=now)
        task = dict(task, status=states.TRIAGE, block_reason=why, cooldown_until=None)
        enqueue(tx, board, "block_loop", task["id"], actor=actor, detail={"count": count, "kind": kind}, task=task)
        return task
    wake_reason = "gave_up" if kind == "gave_up" else "blocked"
    enqueue(tx, board, wake_reason, task["id"], actor=actor, task=task,
            detail={"kind": kind, **({"on": task["block_on"]} if task.get("block_on") else {})})
    return task


@hooks.on("gave_up")
def on_gave_up(tx: Tx, board: str, task: Row, actor: str | None) -> Row:
    """The breaker gave up on a task: the block hook, then a replan proposal (no LLM decides)."""
    if task.get("purpose") == SUPERVISION:
        return task
    task = on_blocked(tx, board, task, "gave_up", str(task.get("block_reason") or "gave up"), actor)
    propose_replan(tx, board, task, "the circuit breaker gave up on it", actor)
    return task


@hooks.on("sent_back")
def on_sent_back(tx: Tx, board: str, task: Row, actor: str | None) -> None:
    """Review or verification sent a task back: wake at the ``replan_after``-th time, propose a
    replan when it happens more often than that."""
    if task.get("purpose") == SUPERVISION:
        return
    n = int(tx.scalar("SELECT COUNT(*) FROM task_events WHERE task_id = :t AND kind IN "
                      "('changes_requested', 'verify_failed')", {"t": task["id"]}) or 0)
    limit = _setting(tx, board, "replan_after")
    if n == limit:  # once: past it, the replan proposal wakes it (one waiting at a time)
        enqueue(tx, board, "sent_back", task["id"], actor=actor, task=task, detail={"times": n})
    if n > limit:
        propose_replan(tx, board, task, f"review or verification sent it back {n} times (limit {limit})", actor)


@hooks.on("failed")
def on_failed(tx: Tx, board: str, task: Row, outcome: str, failures: int, actor: str | None) -> None:
    """A run crashed, went stale or timed out: wake when it happens again (two in a row)."""
    reason = REPEATED_OUTCOMES.get(outcome)
    if reason is None or failures < 2 or task.get("status") == states.BLOCKED:
        return
    enqueue(tx, board, reason, task["id"], actor=actor, task=task, detail={"outcome": outcome, "failures": failures})


@hooks.on("telemetry")
def on_telemetry(tx: Tx, board: str, task_id: str | None, kind: str, actor: str | None) -> None:
    """Telemetry that wakes: a result that never validated (``result_degraded``)."""
    if kind != "result_degraded" or not task_id:
        return
    row = tx.one("SELECT id, purpose FROM tasks WHERE id = :t", {"t": task_id})
    if row is not None:
        enqueue(tx, board, "degraded", task_id, actor=actor, task=row)


@hooks.on("goal_verifying")
def on_goal_verifying(tx: Tx, board: str, goal_id: str, actor: str | None) -> None:
    """All of an active goal's tasks are done and the goal is ``verifying`` (never done on counts
    alone): the supervisor is woken to check its acceptance."""
    enqueue(tx, board, "goal_verifying", goal_id, actor=actor, detail={"goal_id": goal_id})


@hooks.on("budget_blocked")
def on_budget_blocked(tx: Tx, board: str, task_id: str, actor: str | None) -> None:
    """A budget block wakes the board's supervisor like any block (not counted as a block loop:
    the task did nothing wrong); a supervision task's own block wakes nobody."""
    row = tx.one("SELECT * FROM tasks WHERE id = :id", {"id": task_id})
    if row is not None:
        enqueue(tx, board, "blocked", task_id, actor=actor, task=row, detail={"kind": "budget"})


# -- replan proposals --------------------------------------------------------------------------


def failure_history(tx: Tx, task_id: str, limit: int = 30) -> list[Row]:
    """The task's failures, oldest first: ``{"at", "kind", "actor", "what"}``."""
    params: dict[str, Any] = {"t": task_id, "n": limit}
    kinds = in_list("k", HISTORY_KINDS, params)
    rows = tx.all(f"SELECT kind, payload, actor, created_at FROM task_events WHERE task_id = :t AND kind IN {kinds} "
                  "ORDER BY id DESC LIMIT :n", params)
    out = []
    for r in reversed(rows):
        try:
            p = json.loads(r["payload"] or "{}")
        except ValueError:
            p = {}
        what = (p.get("error") or p.get("reason") or p.get("feedback") or p.get("last_error")
                or p.get("kind") or "")
        out.append({"at": r["created_at"], "kind": r["kind"], "actor": r["actor"], "what": str(what)[:500]})
    return out


def _history_text(history: list[Row]) -> str:
    if not history:
        return "(no failures recorded)"
    return "\n".join(f"- {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(h['at']))} {h['kind']}"
                     f"{' by ' + h['actor'] if h['actor'] else ''}: {h['what'] or '-'}" for h in history)


def propose_replan(tx: Tx, board: str, task: Row, why: str, actor: str | None) -> str | None:
    """Create a replan proposal for ``task`` in triage, in its goal, with its failure history as
    the body, and wake the supervisor; None when one is already waiting in triage."""
    if supervisor_of(tx, board) is None:  # the deterministic road belongs to a supervised board
        return None
    prefix = f"replan:{task['id']}:"
    rows = tx.all("SELECT id, status FROM tasks WHERE board = :b AND idempotency_key LIKE :k",
                  {"b": board, "k": prefix + "%"})
    if any(r["status"] == states.TRIAGE for r in rows):
        return None
    history = failure_history(tx, task["id"])
    body = (f"The kernel proposes to replan task {task['id']} ({task['title']}): {why}.\n\n"
            f"## Failure history\n{_history_text(history)}\n\n"
            f"## Last block reason\n{task.get('block_reason') or '-'}\n\n"
            "Decide how to re-scope or split it, then release this proposal (or discard it).")
    new = NewTask(board=board, title=f"Replan: {task['title']}"[: model.TITLE_MAX], body=body[: model.BODY_MAX],
                  goal=task.get("goal_id"), priority=int(task.get("priority") or 0), triage=True,
                  tenant=task.get("tenant"), idempotency_key=f"{prefix}{len(rows) + 1}", actor=REPLAN_ACTOR,
                  check_board=False)
    created = create_in(tx, new)
    tx.event(board, task["id"], "replan_proposed", {"proposal": created["id"], "why": why}, actor=actor)
    enqueue(tx, board, "replan_proposed", task["id"], actor=actor, task=task, detail={"proposal": created["id"]})
    return str(created["id"])
