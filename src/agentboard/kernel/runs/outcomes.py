"""Back to the queue: a person's reclaim, the dispatcher's outcomes (fail, give up) and the facts
it learns about a run afterwards (telemetry, exit code, usage, nudges)."""

from __future__ import annotations

import time
from typing import Any

from ...domain import model, states
from ...domain.errors import InvalidInput
from ...store.engine import Database, Row, Tx, dump_json
from .. import budgets, hooks
from ..common import (
    board_settings,
    get_task,
    ready_or_todo,
    task_out,
)
from .claims import _CLEAR_CLAIM, stale_error

# -- back to the queue: reclaim and the dispatcher's outcomes ------------------------------------------


def _limit(tx: Tx, board: str, task: Row) -> tuple[int, str]:
    if task.get("max_retries"):
        return int(task["max_retries"]), "task max_retries"
    bs = board_settings(tx, board)
    if bs.get("failure_limit"):
        return int(bs["failure_limit"]), "board failure_limit"
    return int(tx.db.settings.failure_limit), "global failure_limit"


def return_to_queue(
    tx: Tx, board: str, task: Row, outcome: str, *, error: str | None, count_failure: bool,
    actor: str | None, run_id: int | None, exit_code: int | None = None,
    cooldown: float | None = None, payload: dict[str, Any] | None = None,
) -> Row:
    """Close a running task's run with ``outcome`` and send the task back to the queue, inside
    the caller's transaction; a counted failure at the limit blocks it (``gave_up``) instead."""
    task_id = task["id"]
    if run_id is not None and (task["current_run_id"] != run_id or task["status"] != states.RUNNING):
        raise stale_error(task, run_id)
    target = ready_or_todo(tx, task_id, task["assignee"], board)
    states.check("reclaim" if outcome == "reclaimed" else outcome, task["status"], target, task_id)
    now = time.time()
    rid = task["current_run_id"]
    closed = tx.one(
        "UPDATE task_runs SET status = 'closed', outcome = :o, ended_at = :now, error = :e, "
        "exit_code = COALESCE(:x, exit_code) WHERE id = :r AND status = 'open'" + budgets.CLOSED_RUN,
        {"o": outcome, "now": now, "e": error, "x": exit_code, "r": rid},
    )
    budgets.account_run_in(tx, closed, task=task, actor=actor)
    failures = int(task["consecutive_failures"] or 0) + (1 if count_failure else 0)
    violations = int(task.get("protocol_violations") or 0) + 1 if outcome == "protocol_violation" else 0
    if outcome == "reclaimed" and not count_failure:
        failures = 0
    limit, source = _limit(tx, board, task)
    if outcome == "verify_failed" and source == "global failure_limit" and len(tx.db.settings.verify_backoff) + 1 > limit:
        # failed verifications are retried with back-off (verify_backoff) before the default gives up
        limit, source = len(tx.db.settings.verify_backoff) + 1, "verification back-off"
    gave_up = count_failure and (failures >= limit or violations >= 3)
    body: dict[str, Any] = {"error": error, "exit_code": exit_code, "failures": failures}
    body.update(payload or {})
    tx.event(board, task_id, outcome, body, run_id=rid, actor=actor, at=now)
    if gave_up:
        why = (
            f"{violations} protocol violations in a row" if violations >= 3
            else f"{failures} consecutive failures reached the {source} of {limit}"
        )
        # one line: the run keeps the whole error, its log the whole output
        reason = model.reason_line(f"gave up: {why}; last error: {model.error_line(error) or outcome}")
        tx.execute(
            f"UPDATE tasks SET status = 'blocked', block_kind = 'gave_up', block_reason = :r, {_CLEAR_CLAIM}, "
            "consecutive_failures = :f, protocol_violations = :pv, last_failure_error = :e, "
            "last_outcome = :o, updated_at = :now WHERE id = :id",
            {"r": reason, "f": failures, "pv": violations, "e": error or outcome, "o": outcome, "now": now, "id": task_id},
        )
        tx.event(board, task_id, "gave_up", {"limit": limit, "source": source, "failures": failures,
                                             "protocol_violations": violations, "last_error": error or outcome},
                 run_id=rid, actor=actor, at=now)
        task.update(status=states.BLOCKED, block_kind="gave_up", block_reason=reason, current_run_id=None)
        task = hooks.gave_up(tx, board, task, actor)
    else:
        tx.execute(
            f"UPDATE tasks SET status = :s, {_CLEAR_CLAIM}, consecutive_failures = :f, "
            "protocol_violations = :pv, last_failure_error = COALESCE(:e, last_failure_error), "
            "last_outcome = :o, cooldown_until = :cd, updated_at = :now WHERE id = :id",
            {"s": target, "f": failures, "pv": violations, "e": error if count_failure or outcome == "rate_limited" else None,
             "o": outcome, "cd": cooldown, "now": now, "id": task_id},
        )
        task.update(status=target, current_run_id=None)
        if outcome == "verify_failed":
            hooks.sent_back(tx, board, task, actor)
        elif count_failure:
            hooks.failed(tx, board, task, outcome, failures, actor)
    task.update(current_run_id=None, consecutive_failures=failures, closed_run_id=rid)
    return task_out(task)


def reclaim_in(tx: Tx, board: str, task_id: str, *, reason: str | None = None, actor: str | None = None) -> Row:
    """Force a running task back to the queue inside the caller's transaction (see :func:`reclaim`)."""
    task = get_task(tx, board, task_id, lock=True)
    if task["status"] != states.RUNNING:
        states.check("reclaim", task["status"], states.READY, task_id)
    return return_to_queue(tx, board, task, "reclaimed", error=reason or f"reclaimed by {actor or 'a person'}",
                           count_failure=False, actor=actor, run_id=None)


def reclaim(db: Database, board: str, task_id: str, *, reason: str | None = None, actor: str | None = None) -> Row:
    """A person forces a running task back to the queue (resets the failure counter)."""
    return db.write(reclaim_in, board, task_id, reason=reason, actor=actor)


def _fail(
    tx: Tx, board: str, task_id: str, outcome: str, *, run_id: int | None, error: str | None,
    exit_code: int | None, count_failure: bool | None, cooldown: float | None,
    payload: dict[str, Any] | None, actor: str | None,
) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    counted = outcome in states.FAILURE_OUTCOMES if count_failure is None else count_failure
    return return_to_queue(tx, board, task, outcome, error=error, count_failure=counted, actor=actor,
                           run_id=run_id, exit_code=exit_code, cooldown=cooldown, payload=payload)


def fail(
    db: Database, board: str, task_id: str, outcome: str, *, run_id: int | None = None,
    error: str | None = None, exit_code: int | None = None, count_failure: bool | None = None,
    cooldown_seconds: float | None = None, payload: dict[str, Any] | None = None,
    actor: str | None = "dispatcher",
) -> Row:
    """A dispatcher outcome: close the run, return the task to the queue, trip the breaker at the limit."""
    if outcome not in states.RETURN_OUTCOMES:
        raise InvalidInput(f"unknown outcome {outcome!r}; use one of {', '.join(states.RETURN_OUTCOMES)}")
    cooldown = time.time() + cooldown_seconds if cooldown_seconds else None
    return db.write(_fail, board, task_id, outcome, run_id=run_id, error=error, exit_code=exit_code,
                    count_failure=count_failure, cooldown=cooldown, payload=payload, actor=actor)


def _give_up(tx: Tx, board: str, task_id: str, reason: str, run_id: int | None, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    if run_id is not None and task["current_run_id"] != run_id:
        raise stale_error(task, run_id)
    states.check("gave_up", task["status"], states.BLOCKED, task_id)
    now = time.time()
    rid = task["current_run_id"]
    if rid is not None:
        closed = tx.one(
            "UPDATE task_runs SET status = 'closed', outcome = 'gave_up', ended_at = :now, error = :e "
            "WHERE id = :r AND status = 'open'" + budgets.CLOSED_RUN,
            {"now": now, "e": reason, "r": rid},
        )
        budgets.account_run_in(tx, closed, task=task, actor=actor)
    line = model.reason_line(reason) or reason
    tx.execute(
        f"UPDATE tasks SET status = 'blocked', block_kind = 'gave_up', block_reason = :line, {_CLEAR_CLAIM}, "
        "last_failure_error = :r, last_outcome = 'gave_up', updated_at = :now WHERE id = :id",
        {"line": line, "r": reason, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "gave_up", {"reason": line, "systemic": True, **({"detail": reason} if line != reason
                                                                               else {})}, run_id=rid, actor=actor, at=now)
    task.update(status=states.BLOCKED, block_kind="gave_up", block_reason=line, current_run_id=None)
    task = hooks.gave_up(tx, board, task, actor)
    return task_out(task)


def give_up(db: Database, board: str, task_id: str, reason: str, *, run_id: int | None = None, actor: str | None = "dispatcher") -> Row:
    """Block a task at once with kind ``gave_up`` (e.g. a systemic failure shared by many tasks)."""
    return db.write(_give_up, board, task_id, reason, run_id, actor)


def record_telemetry(db: Database, board: str, task_id: str | None, kind: str, payload: dict[str, Any] | None = None,
                     *, run_id: int | None = None, actor: str | None = "dispatcher") -> None:
    """Append a telemetry event that changes no state (respawn_guarded, reclaim_deferred, …)."""
    def _w(tx: Tx) -> None:
        tx.event(board, task_id, kind, payload or {}, run_id=run_id, actor=actor)
        hooks.telemetry(tx, board, task_id, kind, actor)
    db.write(_w)


def _update_run(tx: Tx, run_id: int, fields: dict[str, Any], add: bool = False) -> None:
    usage_keys = {"input_tokens", "output_tokens", "cost_usd"} & set(fields)
    before = (tx.one("SELECT status, input_tokens, output_tokens, cost_usd, synthetic FROM task_runs "
                     "WHERE id = :r", {"r": run_id}) if usage_keys else None)
    if add and before is not None:  # another process of the same run: its usage comes on top
        for key in usage_keys:
            if before[key] is not None and fields[key] is not None:
                fields[key] = before[key] + fields[key]
    sets = ", ".join(f"{k} = :{k}" for k in fields)
    tx.execute(f"UPDATE task_runs SET {sets} WHERE id = :rid", {**fields, "rid": run_id})
    if before is not None and before["status"] == "closed" and not before["synthetic"]:
        # usage learned after the run closed (its worker reported first): add the difference
        def diff(key: str) -> float:
            return float(fields[key] or 0) - float(before[key] or 0) if key in fields else 0.0
        budgets.run_updated_in(tx, run_id, tokens=int(diff("input_tokens") + diff("output_tokens")),
                               cost_usd=diff("cost_usd"), exited="exit_code" in fields)
        if diff("input_tokens") or diff("output_tokens") or diff("cost_usd"):
            hooks.run_usage(tx, run_id, int(diff("input_tokens")), int(diff("output_tokens")), diff("cost_usd"))
    elif "exit_code" in fields:
        budgets.run_updated_in(tx, run_id, exited=True)


_RUN_FIELDS = {"exit_code", "error", "metadata", "input_tokens", "output_tokens", "cost_usd", "log_path", "summary"}


def mark_nudged(db: Database, board: str, task_id: str, run_id: int, *, exit_code: int | None = None) -> bool:
    """Record that the worker of the open run ``run_id`` is nudged (started once more after it
    stopped without reporting); False when it was nudged already or the run is closed."""
    def _w(tx: Tx) -> bool:
        tx.execute("UPDATE task_runs SET nudged = 1 WHERE id = :r AND task_id = :t AND status = 'open' AND nudged = 0",
                   {"r": run_id, "t": task_id})
        if tx.rowcount != 1:
            return False
        tx.event(board, task_id, "nudged", {"exit_code": exit_code}, run_id=run_id, actor="dispatcher")
        return True
    return db.write(_w)


def update_run(db: Database, run_id: int, *, add_usage: bool = False, **fields: Any) -> None:
    """Attach facts learned after the fact (exit code, usage, verification output) to a run.
    ``add_usage``: the tokens and cost are another process's of the same run (a repair attempt,
    a nudge) and are added to what the run has, not put in its place."""
    bad = set(fields) - _RUN_FIELDS
    if bad:
        raise InvalidInput(f"cannot set run fields {sorted(bad)}")
    if "metadata" in fields and not isinstance(fields["metadata"], str):
        fields["metadata"] = dump_json(fields["metadata"])
    if fields:
        db.write(_update_run, run_id, fields, add_usage)


#: the longest a run of rate limits in a row makes a task wait (seconds), unless
#: ``rate_limit_cooldown`` itself is longer
RATE_LIMIT_BACKOFF_MAX = 6 * 3600.0


def rate_limits_in_a_row(db: Database, task_id: str) -> int:
    """How many of the task's last closed runs ended rate-limited, one after the other."""
    rows = db.read(lambda tx: tx.all("SELECT outcome FROM task_runs WHERE task_id = :t AND status = 'closed' "
                                     "ORDER BY id DESC LIMIT 64", {"t": task_id}))
    n = 0
    for r in rows:
        if r["outcome"] != "rate_limited":
            break
        n += 1
    return n


def rate_limit_backoff(base: float, in_a_row: int) -> float:
    """Seconds a task waits after its rate limit, the ``in_a_row``-th after others: ``base``
    (``rate_limit_cooldown``) doubled for each before it, up to :data:`RATE_LIMIT_BACKOFF_MAX`
    — an agent that is refused every time costs a start every few hours, not every cool-down."""
    return min(float(base) * 2.0 ** min(in_a_row, 30), max(float(base), RATE_LIMIT_BACKOFF_MAX))

