"""Run verbs: claim, heartbeat, complete, review, reclaim and the dispatcher's outcomes.

Every write against a running task is a compare-and-swap on the task's status and current run,
so a late worker and a dispatcher's reclaim can never both apply.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ..domain import model, states
from ..domain.errors import Conflict, InvalidInput, NotFound, StaleRun
from ..store.engine import EVENT_COLUMNS, Database, Row, Tx, dump_json, in_list
from . import budgets, hooks
from .branches import integration_due_in, left_in
from .children import CLAIM_KEYS, check_created_in
from .common import (
    board_settings,
    first_line,
    get_task,
    pending_parents,
    ready_or_todo,
    task_out,
)
from .flow import after_satisfied

_CLEAR_CLAIM = (
    "current_run_id = NULL, claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, "
    "worker_host = NULL"
)


#: prefix of the claim lock of a run claimed by hand (``agentboard claim``): a person or an
#: outside agent works on it, so no dispatcher watches a process for it — only its claim expiry
HAND_CLAIM = "hand:"


def stale_error(task: Row, run_id: int | None) -> StaleRun:
    current = task.get("current_run_id")
    return StaleRun(
        f"run {run_id} is no longer current for task {task['id']} (task is {task['status']}; "
        f"current run: {current if current is not None else 'none'}); stop and do not report"
    )


def claim_ttl(tx: Tx, ttl: int | None) -> int:
    """How long a claim lasts, in seconds: ``ttl`` when given, else the ``claim_ttl`` setting."""
    if ttl:
        return int(ttl)
    return int(tx.db.settings.claim_ttl)


# -- claim ------------------------------------------------------------------------------------

#: the task and whether any parent is still pending, in one statement
_CLAIM_READ = (
    "SELECT t.id, t.status, t.assignee, t.board, t.parents_override = 0 AND EXISTS ("
    " SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id"
    " WHERE l.child_id = t.id AND p.status NOT IN ('done', 'archived')) AS pending "
    "FROM tasks t WHERE t.id = :id AND t.board = :b"
)


#: PostgreSQL: the whole claim of a ready task with no pending parent in one statement — the
#: read, the run's insert and the task's compare-and-swap (a task that is not claimable comes back
#: with ``run_id`` NULL and nothing written, and takes the general path below)
_CLAIM_PG = (
    "WITH t AS (" + _CLAIM_READ + "), "
    "r AS (INSERT INTO task_runs (task_id, board, profile, attempt, status, claim_lock, claim_expires, "
    "worker_pid, worker_host, started_at, last_heartbeat_at, synthetic) "
    "SELECT t.id, t.board, t.assignee, (SELECT COALESCE(MAX(attempt), 0) + 1 FROM task_runs WHERE task_id = t.id), "
    "'open', :lock, :exp, :pid, :host, :now, :now, 0 FROM t WHERE t.status = 'ready' AND NOT t.pending "
    "RETURNING id), "
    "u AS (UPDATE tasks SET status = 'running', current_run_id = (SELECT id FROM r), claim_lock = :lock, "
    "claim_expires = :exp, worker_pid = :pid, worker_host = :host, last_heartbeat_at = :now, "
    "started_at = COALESCE(started_at, :now), updated_at = :now "
    "WHERE id = :id AND status = 'ready' AND current_run_id IS NULL AND EXISTS (SELECT 1 FROM r) RETURNING id), "
    f"e AS (INSERT INTO task_events {EVENT_COLUMNS} SELECT t.board, t.id, r.id, 'claimed', "
    "json_build_object('host', CAST(:host AS text), 'assignee', t.assignee)::text, :actor, :now "
    "FROM t JOIN r ON true JOIN u ON u.id = t.id) "
    "SELECT t.*, (SELECT id FROM r) AS run_id, (SELECT COUNT(*) FROM u) AS swapped FROM t"
)


def claim_in(
    tx: Tx,
    board: str,
    task_id: str,
    *,
    ttl: int | None = None,
    host: str | None = None,
    pid: int | None = None,
    lock: str | None = None,
    actor: str | None = None,
) -> Row:
    """Claim one task inside the caller's transaction. A task with a parent not done is moved
    back to todo instead, and the result says ``claimed: False`` with the ``pending`` parents."""
    if tx.db.dialect == "postgresql":
        now = time.time()
        expires = now + claim_ttl(tx, ttl)
        claim_lock = lock or f"{host or ''}:{pid or ''}:{now}"
        task = tx.one(_CLAIM_PG, {"id": task_id, "b": board, "lock": claim_lock, "exp": expires, "pid": pid,
                                  "host": host, "now": now, "actor": actor})
        if task is not None and task["run_id"] is not None:
            if task["swapped"] != 1:
                raise Conflict(f"task {task_id} was claimed by someone else")
            tx.events_written(board)  # the statement inserted the claimed event
            return _claimed_out(task_id, task["run_id"], task["assignee"], claim_lock, expires)
    else:
        task = tx.one(_CLAIM_READ, {"id": task_id, "b": board})
    if task is None:
        get_task(tx, board, task_id)
        raise NotFound(task_id)  # pragma: no cover
    if task["status"] != states.READY:
        states.check("claim", task["status"], states.RUNNING, task_id)
    pending = pending_parents(tx, task_id) if task["pending"] else []
    now = time.time()
    if pending:
        tx.execute(
            "UPDATE tasks SET status = 'todo', updated_at = :now WHERE id = :id AND status = 'ready'",
            {"now": now, "id": task_id},
        )
        tx.event(board, task_id, "demoted", {"reason": "parents not done", "pending": pending}, actor=actor, at=now)
        return {"claimed": False, "pending": pending, "id": task_id}
    expires = now + claim_ttl(tx, ttl)
    claim_lock = lock or f"{host or ''}:{pid or ''}:{now}"
    run_id = tx.scalar(
        "INSERT INTO task_runs (task_id, board, profile, attempt, status, claim_lock, claim_expires, "
        "worker_pid, worker_host, started_at, last_heartbeat_at, synthetic) "
        "VALUES (:id, :b, :p, (SELECT COALESCE(MAX(attempt), 0) + 1 FROM task_runs WHERE task_id = :id2), "
        "'open', :lock, :exp, :pid, :host, :now, :now2, 0) RETURNING id",
        {"id": task_id, "id2": task_id, "b": board, "p": task["assignee"], "lock": claim_lock, "exp": expires,
         "pid": pid, "host": host, "now": now, "now2": now},
    )
    tx.execute(
        "UPDATE tasks SET status = 'running', current_run_id = :r, claim_lock = :lock, "
        "claim_expires = :exp, worker_pid = :pid, worker_host = :host, last_heartbeat_at = :now, "
        "started_at = COALESCE(started_at, :now), updated_at = :now "
        "WHERE id = :id AND status = 'ready' AND current_run_id IS NULL",
        {"r": run_id, "lock": claim_lock, "exp": expires, "pid": pid, "host": host, "now": now, "id": task_id},
    )
    if tx.rowcount != 1:
        raise Conflict(f"task {task_id} was claimed by someone else")
    return _claimed(tx, board, task_id, run_id, task["assignee"], claim_lock, expires, host, actor, now)


def _claimed(tx: Tx, board: str, task_id: str, run_id: int, assignee: str | None, claim_lock: str,
             expires: float, host: str | None, actor: str | None, now: float) -> Row:
    tx.event(board, task_id, "claimed", {"host": host, "assignee": assignee}, run_id=run_id, actor=actor, at=now)
    return _claimed_out(task_id, run_id, assignee, claim_lock, expires)


def _claimed_out(task_id: str, run_id: int, assignee: str | None, claim_lock: str, expires: float) -> Row:
    return {"claimed": True, "id": task_id, "run_id": run_id, "claim_lock": claim_lock,
            "claim_expires": expires, "assignee": assignee, "status": states.RUNNING}


def claim(
    db: Database,
    board: str,
    task_id: str,
    *,
    ttl: int | None = None,
    host: str | None = None,
    pid: int | None = None,
    lock: str | None = None,
    actor: str | None = None,
) -> Row:
    """Claim a ready task (compare-and-swap): exactly one claimer wins and gets a run id."""
    out = db.write(claim_in, board, task_id, ttl=ttl, host=host, pid=pid, lock=lock, actor=actor)
    if not out["claimed"]:
        raise Conflict(f"task {task_id} has parents that are not done: {', '.join(out['pending'])}; moved back to todo")
    return out


def _claim_next(tx: Tx, board: str, limit: int, assignees: list[str] | None, ttl: int | None, host: str | None, actor: str | None) -> list[Row]:
    sql = (
        "SELECT id FROM tasks WHERE board = :b AND status = 'ready' "
        "AND (cooldown_until IS NULL OR cooldown_until <= :now) "
    )
    params: dict[str, Any] = {"b": board, "now": time.time(), "n": limit}
    if assignees is not None:
        if not assignees:
            return []
        sql += "AND assignee IN " + in_list("a", assignees, params) + " "
    sql += "ORDER BY priority DESC, created_at, id LIMIT :n"
    if tx.db.dialect == "postgresql":
        sql += " FOR UPDATE SKIP LOCKED"
    out = []
    for row in tx.all(sql, params):
        res = claim_in(tx, board, row["id"], ttl=ttl, host=host, actor=actor)
        if res["claimed"]:
            out.append(res)
    return out


def claim_next(
    db: Database,
    board: str,
    *,
    limit: int = 1,
    assignees: list[str] | None = None,
    ttl: int | None = None,
    host: str | None = None,
    actor: str | None = None,
) -> list[Row]:
    """Claim up to ``limit`` ready tasks by priority then age (SKIP LOCKED on PostgreSQL)."""
    return db.write(_claim_next, board, limit, assignees, ttl, host, actor)


def _record_spawn(
    tx: Tx, board: str, task_id: str, run_id: int, *, pid: int, host: str | None,
    log_path: str | None, workspace: str | None, extra: dict[str, Any] | None,
) -> None:
    now = time.time()
    tx.execute(
        "UPDATE tasks SET worker_pid = :pid, worker_host = COALESCE(:host, worker_host), "
        "workspace_path = COALESCE(:ws, workspace_path), updated_at = :now "
        "WHERE id = :id AND current_run_id = :r",
        {"pid": pid, "host": host, "ws": workspace, "now": now, "id": task_id, "r": run_id},
    )
    if tx.rowcount != 1:
        task = get_task(tx, board, task_id)
        raise stale_error(task, run_id)
    tx.execute(
        "UPDATE task_runs SET worker_pid = :pid, worker_host = COALESCE(:host, worker_host), "
        "log_path = :log, workspace_path = :ws WHERE id = :r",
        {"pid": pid, "host": host, "log": log_path, "ws": workspace, "r": run_id},
    )
    payload = {"pid": pid, "host": host, "log": log_path, "workspace": workspace}
    payload.update(extra or {})
    tx.event(board, task_id, "spawned", payload, run_id=run_id, actor="dispatcher", at=now)


def record_spawn(
    db: Database, board: str, task_id: str, run_id: int, *, pid: int, host: str | None = None,
    log_path: str | None = None, workspace: str | None = None, extra: dict[str, Any] | None = None,
) -> None:
    db.write(_record_spawn, board, task_id, run_id, pid=pid, host=host, log_path=log_path,
             workspace=workspace, extra=extra)


# -- heartbeat ----------------------------------------------------------------------------------


def _heartbeat(
    tx: Tx, board: str, task_id: str, *, run_id: int | None, note: str | None, ttl: int | None,
    actor: str | None, messages: bool = False,
) -> Row:
    now = time.time()
    expires = now + claim_ttl(tx, ttl)
    payload = dump_json({"note": note} if note else {})
    params = {"now": now, "exp": expires, "id": task_id, "b": board, "r": run_id, "payload": payload,
              "actor": actor}
    pg = tx.db.dialect == "postgresql"
    sql = (
        "UPDATE tasks SET last_heartbeat_at = :now, claim_expires = :exp "
        "WHERE id = :id AND board = :b AND status = 'running'"
    )
    if run_id is not None:
        sql += " AND current_run_id = :r"
    if pg:  # one statement: the task, its run and the event
        sql = (f"WITH t AS ({sql} RETURNING id, board, current_run_id), "
               "r AS (UPDATE task_runs SET last_heartbeat_at = :now, claim_expires = :exp FROM t "
               "WHERE task_runs.id = t.current_run_id), "
               f"e AS (INSERT INTO task_events {EVENT_COLUMNS} SELECT t.board, t.id, t.current_run_id, "
               "'heartbeat', :payload, :actor, :now FROM t) "
               "SELECT t.current_run_id, EXISTS (SELECT 1 FROM budgets WHERE exhausted_window IS NOT NULL) AS spent "
               "FROM t")
    else:  # one round trip: the run, and whether any budget is spent at all (only then is it looked up)
        sql += (" RETURNING current_run_id, "
                "EXISTS (SELECT 1 FROM budgets WHERE exhausted_window IS NOT NULL) AS spent")
    row = tx.one(sql, params)
    if row is None:
        task = get_task(tx, board, task_id)
        if run_id is not None and task["current_run_id"] != run_id:
            raise stale_error(task, run_id)
        states.check("heartbeat", task["status"], states.RUNNING, task_id)
        raise AssertionError("unreachable: a running task's heartbeat updates its row")
    if run_id is None:
        run_id = row["current_run_id"]
    if pg:
        tx.events_written(board)
    else:
        tx.execute(
            "UPDATE task_runs SET last_heartbeat_at = :now, claim_expires = :exp WHERE id = :r",
            {"now": now, "exp": expires, "r": run_id},
        )
        tx.event(board, task_id, "heartbeat", {"note": note} if note else {}, run_id=run_id, actor=actor, at=now)
    out: Row = {"id": task_id, "run_id": run_id, "claim_expires": expires}
    if messages:  # the worker's own heartbeat also hands it the comments since it last looked
        from .inbox import take_in

        out["messages"] = take_in(tx, board, task_id, run_id)
    stop = budgets.stop_reason_in(tx, task_id) if row["spent"] else None
    if stop:  # the worker is told to stop; the dispatcher ends it after a grace period
        out.update(stop=True, stop_reason=stop)
    return out


def heartbeat(
    db: Database, board: str, task_id: str, *, run_id: int | None = None, note: str | None = None,
    ttl: int | None = None, actor: str | None = None, messages: bool = False,
) -> Row:
    """Record liveness and extend the claim; with ``messages`` (the worker's own call) the result
    also holds the comments written on the task since the worker last looked."""
    if note:
        note = model.body(note, model.COMMENT_MAX, "note")
    return db.write(_heartbeat, board, task_id, run_id=run_id, note=note, ttl=ttl, actor=actor,
                    messages=messages)


def _extend_claim(tx: Tx, board: str, task_id: str, run_id: int, ttl: int | None) -> bool:
    now = time.time()
    exp = now + claim_ttl(tx, ttl)
    tx.execute(
        "UPDATE tasks SET claim_expires = :exp WHERE id = :id AND current_run_id = :r AND status = 'running'",
        {"exp": exp, "id": task_id, "r": run_id},
    )
    if tx.rowcount != 1:
        return False
    tx.execute("UPDATE task_runs SET claim_expires = :exp WHERE id = :r", {"exp": exp, "r": run_id})
    tx.event(board, task_id, "claim_extended", {"until": exp}, run_id=run_id, actor="dispatcher", at=now)
    return True


def extend_claim(db: Database, board: str, task_id: str, run_id: int, *, ttl: int | None = None) -> bool:
    return db.write(_extend_claim, board, task_id, run_id, ttl)


# -- complete -----------------------------------------------------------------------------------


def usage_params(usage: dict[str, Any] | None) -> dict[str, Any]:
    """A run's usage report as statement parameters (``InvalidInput`` if a number is not one)."""
    usage = usage or {}
    def num(key: str, cast: type) -> Any:
        value = usage.get(key)
        if value is None:
            return None
        try:
            return cast(value)
        except (TypeError, ValueError):
            raise InvalidInput(f"usage.{key} must be a number") from None
    return {"in_t": num("input_tokens", int), "out_t": num("output_tokens", int), "cost": num("cost_usd", float)}


@dataclass(frozen=True)
class Report:
    """What a finished run reports: a summary, structured metadata, a one-line result and the
    token/cost usage. Build it with :meth:`build` to check and normalize the fields."""

    summary: str | None = None
    metadata: dict[str, Any] | None = None
    result: str | None = None
    usage: dict[str, Any] | None = None

    @classmethod
    def build(
        cls, *, summary: str | None = None, metadata: dict[str, Any] | None = None,
        result: str | None = None, usage: dict[str, Any] | None = None,
    ) -> Report:
        """Check the sizes and shapes (raises ``InvalidInput``); keep the first line of ``result``."""
        if summary is not None:
            summary = model.body(summary, model.SUMMARY_MAX, "summary").strip() or None
        if metadata is not None and not isinstance(metadata, dict):
            raise InvalidInput("metadata must be a JSON object")
        if metadata is not None and len(dump_json(metadata)) > model.METADATA_MAX:
            raise InvalidInput(f"metadata is larger than {model.METADATA_MAX} bytes")
        if result is not None:
            result = first_line(result, 500) or None
        return cls(summary=summary, metadata=metadata, result=result, usage=usage)


#: PostgreSQL: the task locked for its completion; sent unread, with :data:`_COMPLETE_HINTS_PG`
#: right behind it (both answers come back in one round trip)
_LOCK_FOR_COMPLETE_PG = "SELECT t.* FROM tasks t WHERE t.id = :id AND t.board = :board FOR UPDATE OF t"
#: PostgreSQL: whether any budget may cover the run (a profile budget counts as one: without one,
#: the run's ledger row is written unread) and whether any child waits in todo (without one,
#: there is nothing to promote). A statement of its own, after the lock: its snapshot sees a child
#: whose creation committed while the lock waited (a new child's creation reads its parents
#: ``FOR SHARE``, so none can be linked after it).
_COMPLETE_HINTS_PG = (
    "SELECT EXISTS (SELECT 1 FROM budgets b WHERE (b.scope = 'task' AND b.ref = t.id) OR "
    "(b.scope = 'goal' AND b.ref = t.goal_id) OR (b.scope IN ('board', 'supervision') AND b.ref = t.board) "
    "OR b.scope = 'profile') "
    "AS budget_hint, EXISTS (SELECT 1 FROM task_links l JOIN tasks c ON c.id = l.child_id "
    "WHERE l.parent_id = t.id AND c.status = 'todo') AS children_hint "
    "FROM tasks t WHERE t.id = :id"
)


#: PostgreSQL: a worker's completion of its running task in one statement, with no separate row
#: lock: the task's compare-and-swap (it matches only while the task is running this run with no
#: verify commands waiting, ``:noverify``, and — unless ``:integrated`` — not a worktree task, whose
#: branch may have to be integrated first), its run closed and the run's row of the budget ledger
#: (a run is open until this statement closes it, so it has no ledger row yet) and the event
#: (``completed`` or ``review_requested``, the run's outcome). No row back: nothing was written,
#: and the general path below decides why.
_COMPLETE_RUNNING_PG = (
    "WITH t AS (UPDATE tasks SET "
    "status = CASE WHEN review_required = 1 AND :force = 0 THEN 'review' ELSE 'done' END, "
    f"{_CLEAR_CLAIM}, completed_at = CASE WHEN review_required = 1 AND :force = 0 THEN NULL ELSE :now END, "
    "result = COALESCE(:res, result), consecutive_failures = 0, protocol_violations = 0, "
    "block_kind = NULL, block_reason = NULL, "
    "last_outcome = CASE WHEN review_required = 1 AND :force = 0 THEN 'review_requested' ELSE 'completed' END, "
    "updated_at = :now WHERE id = :id AND board = :board AND status = 'running' AND current_run_id = :run "
    "AND (:noverify = 1 OR verify = '[]') AND (:integrated = 1 OR workspace_kind != 'worktree') "
    "AND (:await_spawn = 0 OR worker_pid IS NOT NULL) RETURNING *), "
    "r AS (UPDATE task_runs SET status = 'closed', outcome = t.last_outcome, ended_at = :now, summary = :s, "
    "metadata = :m, input_tokens = COALESCE(:in_t, task_runs.input_tokens), "
    "output_tokens = COALESCE(:out_t, task_runs.output_tokens), cost_usd = COALESCE(:cost, task_runs.cost_usd), "
    "exit_code = COALESCE(:ec, task_runs.exit_code) FROM t "
    "WHERE task_runs.id = :run AND task_runs.status = 'open' RETURNING task_runs.*), "
    "u AS (INSERT INTO budget_usage (board, task_id, goal_id, profile, run_id, source, at, runs, runtime, tokens, "
    "cost_usd, pending) SELECT r.board, r.task_id, t.goal_id, COALESCE(r.profile, t.assignee), r.id, 'run', :now, 1, "
    "CASE WHEN r.ended_at > r.started_at THEN r.ended_at - r.started_at ELSE 0 END, "
    "COALESCE(r.input_tokens, 0) + COALESCE(r.output_tokens, 0), COALESCE(r.cost_usd, 0), "
    "CASE WHEN r.exit_code IS NULL AND r.worker_pid IS NOT NULL THEN 1 ELSE 0 END "
    "FROM r JOIN t ON t.id = r.task_id WHERE r.synthetic = 0 "
    "RETURNING board, task_id, goal_id, profile, at, runs, runtime, tokens, cost_usd), "
    f"e AS (INSERT INTO task_events {EVENT_COLUMNS} SELECT t.board, t.id, :run, t.last_outcome, :payload, "
    ":actor, :now FROM t) "
    "SELECT t.*, (SELECT row_to_json(u) FROM u) AS usage_row FROM t"
)
#: the ledger's columns in :data:`_COMPLETE_RUNNING_PG`'s ``usage_row``
_USAGE_KEYS = ("board", "task_id", "goal_id", "profile", "at", "runs", "runtime", "tokens", "cost_usd")


def _complete_running_pg(
    tx: Tx, board: str, task_id: str, report: Report, run_id: int, actor: str | None, force_done: bool,
    verified: bool, exit_code: int | None, integrated: bool, await_spawn: bool,
) -> Row | None:
    """A running task's completion in two round trips and three statements (the general path
    takes six); None, with nothing written, when the swap does not apply."""
    now = time.time()
    up = usage_params(report.usage)  # a bad number is refused before anything is sent
    meta = dump_json(report.metadata) if report.metadata is not None else None
    swapped = tx.execute(_COMPLETE_RUNNING_PG, {
        "force": 1 if force_done else 0, "now": now, "res": report.result, "id": task_id, "board": board,
        "run": run_id, "noverify": 1 if verified or not tx.db.settings.verify else 0,
        "integrated": 1 if integrated else 0, "await_spawn": 1 if await_spawn else 0,
        "s": report.summary, "m": meta, "ec": exit_code, "actor": actor,
        "payload": dump_json(_completed_payload(report, synthetic=False)), **up})
    # a statement of its own, after the swap: its snapshot sees a child whose creation committed
    # while the task's row was locked
    hints = tx.one(_COMPLETE_HINTS_PG, {"id": task_id}) or {}
    found = tx.rows_of(swapped)
    if not found:
        return None
    task = found[0]
    usage = task.pop("usage_row", None)
    if isinstance(usage, str):
        usage = json.loads(usage)
    tx.events_written(board)
    done = task["status"] == states.DONE
    if usage:  # the run and, when it made its task done, that too: one upsert
        hooks.run_closed(tx, run_id, done=done)
    if usage and hints.get("budget_hint", True):
        budgets.account_row_in(tx, {k: usage.get(k) for k in _USAGE_KEYS}, run_id, now, actor=actor)
    return _after_completed(tx, board, task, task["status"], run_id, actor,
                            children=bool(hints.get("children_hint", True)), done_counted=bool(usage) and done)


def _close_completed_run(tx: Tx, rid: int, target: str, report: Report, metadata: dict[str, Any] | None,
                         up: dict[str, Any], now: float, exit_code: int | None, actor: str | None, *,
                         budgeted: bool | None) -> None:
    """Close the completed task's open run with the report (``metadata``: its checked metadata),
    and count it against its budgets."""
    meta = metadata
    tx.execute(
        "UPDATE task_runs SET status = 'closed', outcome = :o, ended_at = :now, summary = :s, "
        "metadata = :m, input_tokens = COALESCE(:in_t, input_tokens), "
        "output_tokens = COALESCE(:out_t, output_tokens), cost_usd = COALESCE(:cost, cost_usd), "
        "exit_code = COALESCE(:ec, exit_code) "
        "WHERE id = :r AND status = 'open'",
        {"o": "review_requested" if target == states.REVIEW else "completed", "now": now, "s": report.summary,
         "m": dump_json(meta) if meta is not None else None, "r": rid, "ec": exit_code, **up},
    )
    budgets.account_run_in(tx, rid, actor=actor, budgeted=budgeted)


def _completed_payload(report: Report, *, synthetic: bool) -> dict[str, Any]:
    return {"summary": first_line(report.summary), "result": report.result, "synthetic": synthetic}


def _after_completed(tx: Tx, board: str, task: Row, target: str, rid: int, actor: str | None, *,
                     children: bool, done_counted: bool = False) -> Row:
    """What follows a task becoming done (promotion of its children, its goal), and the answer.
    ``done_counted``: the ``run_closed`` hook already said the run made its task done."""
    if target == states.DONE:
        if not done_counted:
            hooks.task_done(tx, board, task["id"])
        task["promoted"] = after_satisfied(tx, board, task, actor, children=children)
    task["run_id"] = rid
    return task_out(task)


def complete_in(
    tx: Tx, board: str, task_id: str, report: Report, *, run_id: int | None = None,
    actor: str | None = None, force_done: bool = False, verified: bool = False,
    exit_code: int | None = None, integrated: bool = False, await_spawn: bool = False,
) -> Row:
    """Complete a task inside the caller's transaction (see :func:`complete`)."""
    if (tx.db.dialect == "postgresql" and run_id is not None
            and not any(k in (report.metadata or {}) for k in CLAIM_KEYS)):
        done = _complete_running_pg(tx, board, task_id, report, run_id, actor, force_done, verified, exit_code,
                                    integrated, await_spawn)
        if done is not None:
            return done
    budgeted: bool | None = None
    if tx.db.dialect == "postgresql":  # the lock's read also says whether a budget may apply
        locked = tx.execute(_LOCK_FOR_COMPLETE_PG, {"id": task_id, "board": board})
        hints = tx.one(_COMPLETE_HINTS_PG, {"id": task_id}) or {}
        found = tx.rows_of(locked)
        task = found[0] if found else get_task(tx, board, task_id)
        budgeted = bool(hints.get("budget_hint", True))
        children = bool(hints.get("children_hint", True))
    else:
        children = True
        task = get_task(tx, board, task_id, lock=True)
    cur = task["status"]
    if run_id is not None and (task["current_run_id"] != run_id or cur != states.RUNNING):
        raise stale_error(task, run_id)
    if cur == states.RUNNING and task["review_required"] and not force_done:
        target = states.REVIEW
    else:
        target = states.DONE
    due = integration_due_in(tx, board, task) if target == states.DONE else None
    if run_id is not None and not force_done and not verified:
        if _verification_pending(tx, task):
            return _hold_for_verification(tx, board, task, report, run_id, actor)
        if due == "integrate" and not integrated:
            return _hold_for_verification(tx, board, task, report, run_id, actor, reason="integration")
        if await_spawn and task.get("worker_pid") is None and _may_have_a_branch(tx, board, task):
            # the worker reported before the dispatcher recorded its spawn (its workspace and
            # branch): its exit applies the report
            return _hold_for_verification(tx, board, task, report, run_id, actor, reason="spawn")
    if due == "integrate" and not integrated:
        raise Conflict(f"task {task_id}'s branch is integrated into the board's base branch when it is done: "
                       "finish it through agentboard (the dispatcher after its worker's run, `agentboard complete`, "
                       "the API or the dashboard), which integrates it first")
    states.check("complete", cur, target, task_id)
    now = time.time()
    metadata = report.metadata
    if cur == states.RUNNING:  # children the run says it created must exist and be its own
        metadata = check_created_in(tx, board, task_id, task["current_run_id"], metadata, actor=actor)
    up = usage_params(report.usage)
    outcome = "review_requested" if target == states.REVIEW else "completed"
    if cur == states.RUNNING:
        rid = task["current_run_id"]
        _close_completed_run(tx, rid, target, report, metadata, up, now, exit_code, actor, budgeted=budgeted)
    else:
        meta = dump_json(metadata) if metadata is not None else None
        rid = tx.scalar(
            "INSERT INTO task_runs (task_id, board, profile, attempt, status, outcome, started_at, "
            "ended_at, summary, metadata, input_tokens, output_tokens, cost_usd, synthetic) "
            "VALUES (:id, :b, :p, (SELECT COALESCE(MAX(attempt), 0) + 1 FROM task_runs WHERE task_id = :id2), "
            "'closed', 'completed', :now, :now2, :s, :m, :in_t, :out_t, :cost, 1) RETURNING id",
            {"id": task_id, "id2": task_id, "b": board, "p": actor, "now": now, "now2": now, "s": report.summary,
             "m": meta, **up},
        )
    tx.execute(
        f"UPDATE tasks SET status = :s, {_CLEAR_CLAIM}, completed_at = :done_at, "
        "result = COALESCE(:res, result), consecutive_failures = 0, protocol_violations = 0, "
        "block_kind = NULL, block_reason = NULL, last_outcome = :o, updated_at = :now "
        "WHERE id = :id AND status = :cur",
        {"s": target, "done_at": now if target == states.DONE else None, "res": report.result,
         "o": outcome, "now": now, "id": task_id, "cur": cur},
    )
    # PostgreSQL: the row is locked (get_task FOR UPDATE), so the swap cannot miss; not asking
    # for the count saves a round trip. SQLite: one writer at a time.
    if tx.db.dialect != "postgresql" and tx.rowcount != 1:  # pragma: no cover
        raise Conflict(f"task {task_id} changed while completing; try again")
    kind = "review_requested" if target == states.REVIEW else "completed"
    tx.event(board, task_id, kind, _completed_payload(report, synthetic=cur != states.RUNNING), run_id=rid,
             actor=actor, at=now)
    task.update(status=target, current_run_id=None, result=report.result or task.get("result"))
    if due == "left":
        left_in(tx, board, task_id, actor)
        task["integration"] = "left"
    return _after_completed(tx, board, task, target, rid, actor, children=children)


def _may_have_a_branch(tx: Tx, board: str, task: Row) -> bool:
    """Whether the task runs (or may run) in a worktree: its own kind says so, or its board has a
    target directory (the dispatcher then decides at the spawn)."""
    if task.get("workspace_kind") == "worktree":
        return True
    if task.get("workspace_kind") not in (None, "scratch"):
        return False
    return tx.scalar("SELECT default_workdir FROM boards WHERE slug = :b", {"b": board}) is not None


def _verification_pending(tx: Tx, task: Row) -> bool:
    """A worker's own report on a task with ``verify`` commands waits until the dispatcher has
    run those commands (unless the ``verify`` setting is off)."""
    try:
        commands = json.loads(task.get("verify") or "[]")
    except ValueError:
        commands = []
    return bool(commands) and tx.db.settings.verify


def _hold_for_verification(tx: Tx, board: str, task: Row, report: Report, run_id: int, actor: str | None, *,
                           reason: str = "verification") -> Row:
    """Record the worker's success report on its run; the task stays running until the
    dispatcher has run the verify commands after the worker exits (protocol.lifecycle), or
    (``reason="integration"``) has integrated the task's branch into the board's base branch,
    or (``"spawn"``) has seen the exit of a worker whose spawn it had not recorded yet."""
    pending = {"summary": report.summary, "metadata": report.metadata, "result": report.result,
               "usage": report.usage, "actor": actor}
    tx.execute("UPDATE task_runs SET pending_report = :p WHERE id = :r", {"p": dump_json(pending), "r": run_id})
    kind = "integration_pending" if reason == "integration" else "verify_pending"
    tx.event(board, task["id"], kind, {"summary": first_line(report.summary), "until": reason}, run_id=run_id,
             actor=actor)
    out = task_out(task)
    out.update(run_id=run_id, pending=reason, pending_verification=reason == "verification",
               pending_integration=reason == "integration")
    return out


def complete(
    db: Database, board: str, task_id: str, *, summary: str | None = None,
    metadata: dict[str, Any] | None = None, result: str | None = None,
    usage: dict[str, Any] | None = None, run_id: int | None = None, actor: str | None = None,
    force_done: bool = False, verified: bool = False, exit_code: int | None = None, integrated: bool = False,
    await_spawn: bool = False,
) -> Row:
    """Finish a task: running → done (or review); a person closing ready/blocked/review → done.

    A worker's report (with its ``run_id``) on a task with ``verify`` commands is held on the run
    until the dispatcher has verified it; the dispatcher then completes with ``verified=True``.
    ``exit_code`` (the dispatcher, after the worker exited) is stored on the closed run.

    A worktree task whose board integrates finished work (``kernel.branches.integration_due``)
    becomes done only with ``integrated=True``: the caller has put its branch on the base branch
    (``dispatch.finish``); a worker's report on it is held like a verification. ``await_spawn``:
    the report comes from a worker the dispatcher started (its run token); before the dispatcher
    has recorded the spawn, it is held the same way.
    """
    report = Report.build(summary=summary, metadata=metadata, result=result, usage=usage)
    return db.write(complete_in, board, task_id, report, run_id=run_id, actor=actor, force_done=force_done,
                    verified=verified, exit_code=exit_code, integrated=integrated, await_spawn=await_spawn)


def request_review_in(
    tx: Tx, board: str, task_id: str, *, summary: str | None = None, run_id: int | None = None,
    actor: str | None = None,
) -> Row:
    """Hand a running task to review inside the caller's transaction."""
    task = get_task(tx, board, task_id, lock=True)
    if run_id is not None and task["current_run_id"] != run_id:
        raise stale_error(task, run_id)
    states.check("request_review", task["status"], states.REVIEW, task_id)
    now = time.time()
    rid = task["current_run_id"]
    tx.execute(
        "UPDATE task_runs SET status = 'closed', outcome = 'review_requested', ended_at = :now, "
        "summary = COALESCE(:s, summary) WHERE id = :r AND status = 'open'",
        {"now": now, "s": summary, "r": rid},
    )
    budgets.account_run_in(tx, rid, actor=actor)
    tx.execute(
        f"UPDATE tasks SET status = 'review', {_CLEAR_CLAIM}, last_outcome = 'review_requested', "
        "updated_at = :now WHERE id = :id",
        {"now": now, "id": task_id},
    )
    tx.event(board, task_id, "review_requested", {"summary": first_line(summary)}, run_id=rid, actor=actor, at=now)
    task.update(status=states.REVIEW, current_run_id=None)
    return task_out(task)


def request_review(db: Database, board: str, task_id: str, *, summary: str | None = None, run_id: int | None = None, actor: str | None = None) -> Row:
    return db.write(request_review_in, board, task_id, summary=summary, run_id=run_id, actor=actor)


# -- review verdicts ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """A review verdict (``approved``, ``changes_requested`` or ``rejected``) with its text,
    its reviewer, an optional 0-100 score and findings. Build it with :meth:`build`."""

    verdict: str
    text: str
    reviewer: str
    score: int | None = None
    findings: tuple[Any, ...] = ()

    @classmethod
    def build(
        cls, verdict: str, text: str | None = "", *, reviewer: str | None = None,
        score: int | None = None, findings: list[Any] | None = None, actor: str | None = None,
    ) -> Verdict:
        """Check the feedback and score (raises ``InvalidInput``); the reviewer defaults to the actor."""
        text = (text or "").strip()
        if verdict in ("changes_requested", "rejected") and not text:
            raise InvalidInput(f"a {verdict.replace('_', ' ')} verdict needs feedback saying why")
        if score is not None and not 0 <= int(score) <= 100:
            raise InvalidInput("score must be between 0 and 100")
        model.body(text, model.COMMENT_MAX, "feedback")
        return cls(verdict, text, reviewer or actor or "person", score, tuple(findings or ()))


def _review_record(tx: Tx, board: str, task_id: str, v: Verdict, now: float) -> int | None:
    rid = tx.scalar(
        "SELECT id FROM task_runs WHERE task_id = :id AND status = 'closed' "
        "AND (claim_lock IS NULL OR claim_lock NOT LIKE :rv) ORDER BY id DESC LIMIT 1",
        {"id": task_id, "rv": REVIEW_CLAIM + "%"},
    )
    findings = list(v.findings)
    record = {"reviewer": v.reviewer, "verdict": v.verdict, "score": v.score, "summary": v.text, "findings": findings}
    tx.execute(
        "INSERT INTO reviews (task_id, board, run_id, reviewer, verdict, score, summary, findings, created_at) "
        "VALUES (:t, :b, :r, :who, :v, :sc, :s, :f, :now)",
        {"t": task_id, "b": board, "r": rid, "who": v.reviewer, "v": v.verdict, "sc": v.score, "s": v.text,
         "f": dump_json(findings), "now": now},
    )
    if rid is not None:
        tx.execute("UPDATE task_runs SET review = :rv WHERE id = :r", {"rv": dump_json(record), "r": rid})
    return int(rid) if rid is not None else None


def review_in(tx: Tx, board: str, task_id: str, v: Verdict, *, actor: str | None = None,
              integrated: bool = False) -> Row:
    """Apply a review verdict inside the caller's transaction (see :func:`review`)."""
    verdict, text, reviewer, score = v.verdict, v.text, v.reviewer, v.score
    task = get_task(tx, board, task_id, lock=True)
    now = time.time()
    if verdict == "approved":
        states.check("approve", task["status"], states.DONE, task_id)
        if not integrated and integration_due_in(tx, board, task, approval=True) == "integrate":
            raise Conflict(f"approving task {task_id} integrates its branch into the board's base branch: approve "
                           "it through agentboard (`agentboard review --approve`, the API, the dashboard or "
                           "Board.approve), which integrates it first")
        rid = _review_record(tx, board, task_id, v, now)
        tx.execute(
            "UPDATE tasks SET status = 'done', completed_at = :now, consecutive_failures = 0, "
            "last_outcome = 'approved', updated_at = :now WHERE id = :id",
            {"now": now, "id": task_id},
        )
        tx.event(board, task_id, "approved", {"reviewer": reviewer, "score": score, "summary": first_line(text)}, run_id=rid, actor=actor, at=now)
        hooks.reviewed(tx, board, task_id, verdict)
        hooks.task_done(tx, board, task_id)
        task.update(status=states.DONE)
        after_satisfied(tx, board, task, actor)
    elif verdict == "changes_requested":
        target = ready_or_todo(tx, task_id, task["assignee"], board)
        states.check("request_changes", task["status"], target, task_id)
        rid = _review_record(tx, board, task_id, v, now)
        tx.execute(
            "INSERT INTO task_comments (task_id, board, author, body, kind, created_at) "
            "VALUES (:t, :b, :a, :body, 'review', :now)",
            {"t": task_id, "b": board, "a": reviewer, "body": f"Changes requested: {text}", "now": now},
        )
        tx.execute(
            "UPDATE tasks SET status = :s, rework_count = rework_count + 1, "
            "last_outcome = 'changes_requested', updated_at = :now WHERE id = :id",
            {"s": target, "now": now, "id": task_id},
        )
        tx.event(board, task_id, "changes_requested", {"reviewer": reviewer, "feedback": text[:2000], "score": score}, run_id=rid, actor=actor, at=now)
        hooks.reviewed(tx, board, task_id, verdict)
        task.update(status=target)
        hooks.sent_back(tx, board, task, actor)
    elif verdict == "rejected":
        states.check("reject", task["status"], states.BLOCKED, task_id)
        rid = _review_record(tx, board, task_id, v, now)
        tx.execute(
            "UPDATE tasks SET status = 'blocked', block_kind = 'rejected', block_reason = :r, "
            "last_outcome = 'rejected', updated_at = :now WHERE id = :id",
            {"r": model.reason_line(text) or text, "now": now, "id": task_id},
        )
        tx.event(board, task_id, "rejected", {"reviewer": reviewer, "reason": text[:2000], "score": score}, run_id=rid, actor=actor, at=now)
        hooks.reviewed(tx, board, task_id, verdict)
        task.update(status=states.BLOCKED, block_kind="rejected", block_reason=model.reason_line(text) or text)
        task = hooks.blocked(tx, board, task, "rejected", text, actor)
    else:
        raise InvalidInput(f"unknown verdict {verdict!r}: use approved, changes_requested or rejected")
    return task_out(task)


def review(
    db: Database, board: str, task_id: str, verdict: str, text: str = "", *, reviewer: str | None = None,
    score: int | None = None, findings: list[Any] | None = None, actor: str | None = None,
    integrated: bool = False,
) -> Row:
    """Record a review verdict (a person's or the reviewer agent's) and apply it. Approving a
    worktree task on a board that integrates needs ``integrated=True`` (``dispatch.finish``)."""
    v = Verdict.build(verdict, text, reviewer=reviewer, score=score, findings=findings, actor=actor)
    return db.write(review_in, board, task_id, v, actor=actor, integrated=integrated)


def approve(db: Database, board: str, task_id: str, *, text: str = "", actor: str | None = None) -> Row:
    return review(db, board, task_id, "approved", text, actor=actor)


def request_changes(db: Database, board: str, task_id: str, feedback: str, *, actor: str | None = None) -> Row:
    return review(db, board, task_id, "changes_requested", feedback, actor=actor)


def reject(db: Database, board: str, task_id: str, reason: str, *, actor: str | None = None) -> Row:
    return review(db, board, task_id, "rejected", reason, actor=actor)


# -- review runs ----------------------------------------------------------------------------------
#
# A review run is a reviewer (a profile's agent, or one LLM call) judging a task in review. It is a
# run of the task like any other (caps, usage, the runs list), marked by its claim lock
# (``REVIEW_CLAIM``) and its metadata (``{"review_run": true, "reviewer": ..., "reviews_run": N}``);
# the task keeps its status and has no current run meanwhile.

#: prefix of the claim lock of a review run
REVIEW_CLAIM = "review:"


def _open_review_run(tx: Tx, board: str, task_id: str, profile: str | None, reviewer: str, host: str | None,
                     reviews_run: int | None, ttl: int | None) -> int | None:
    task = get_task(tx, board, task_id, lock=True)
    if task["status"] != states.REVIEW:
        return None
    if tx.scalar("SELECT 1 FROM task_runs WHERE task_id = :t AND status = 'open' LIMIT 1", {"t": task_id}):
        return None
    if budgets.gate_in(tx, {**task, "assignee": profile or task["assignee"]}) is not None:
        return None  # the budget cannot afford a review run: the task waits in review
    now = time.time()
    meta = dump_json({"review_run": True, "reviewer": reviewer, "reviews_run": reviews_run})
    rid = tx.scalar(
        "INSERT INTO task_runs (task_id, board, profile, attempt, status, claim_lock, claim_expires, "
        "worker_host, started_at, last_heartbeat_at, metadata, synthetic) "
        "VALUES (:t, :b, :p, (SELECT COALESCE(MAX(attempt), 0) + 1 FROM task_runs WHERE task_id = :t2), "
        "'open', :lock, :exp, :host, :now, :now2, :m, 0) RETURNING id",
        {"t": task_id, "t2": task_id, "b": board, "p": profile, "lock": f"{REVIEW_CLAIM}{host or ''}:{now}",
         "exp": now + claim_ttl(tx, ttl), "host": host, "now": now, "now2": now, "m": meta})
    return int(rid)


def open_review_run(db: Database, board: str, task_id: str, *, reviewer: str, profile: str | None = None,
                    host: str | None = None, reviews_run: int | None = None, ttl: int | None = None) -> int | None:
    """Open a review run on a task in review; its id, or None when the task left review or
    already has an open run (one reviewer at a time)."""
    return db.write(_open_review_run, board, task_id, profile, reviewer, host, reviews_run, ttl)


def _close_review_run_in(tx: Tx, board: str, task_id: str, run_id: int, outcome: str, error: str | None,
                         exit_code: int | None, usage: dict[str, Any] | None) -> bool:
    now = time.time()
    tx.execute(
        "UPDATE task_runs SET status = 'closed', outcome = :o, ended_at = :now, error = :e, "
        "exit_code = COALESCE(:ec, exit_code), input_tokens = COALESCE(:in_t, input_tokens), "
        "output_tokens = COALESCE(:out_t, output_tokens), cost_usd = COALESCE(:cost, cost_usd) "
        "WHERE id = :r AND task_id = :t AND status = 'open' AND claim_lock LIKE :rv",
        {"o": outcome, "now": now, "e": error, "ec": exit_code, "r": run_id, "t": task_id,
         "rv": REVIEW_CLAIM + "%", **usage_params(usage)})
    closed = tx.rowcount == 1
    if closed:
        budgets.account_run_in(tx, run_id, actor="dispatcher")
    if closed and error:
        tx.event(board, task_id, outcome, {"review_run": True, "error": error[:2000], "exit_code": exit_code},
                 run_id=run_id, actor="dispatcher", at=now)
    return closed


def extend_review_claim(db: Database, board: str, task_id: str, run_id: int, *, ttl: int | None = None) -> bool:
    """Renew the claim of an open review run whose reviewer is alive, so another host never takes
    it for a dead one. False when the run is closed."""
    def _w(tx: Tx) -> bool:
        now = time.time()
        exp = now + claim_ttl(tx, ttl)
        tx.execute("UPDATE task_runs SET claim_expires = :exp WHERE id = :r AND task_id = :t AND status = 'open' "
                   "AND claim_lock LIKE :rv", {"exp": exp, "r": run_id, "t": task_id, "rv": REVIEW_CLAIM + "%"})
        if tx.rowcount != 1:
            return False
        tx.event(board, task_id, "claim_extended", {"until": exp, "review_run": True}, run_id=run_id,
                 actor="dispatcher", at=now)
        return True
    return db.write(_w)


def close_review_run(db: Database, board: str, task_id: str, run_id: int, outcome: str, *,
                     error: str | None = None, exit_code: int | None = None,
                     usage: dict[str, Any] | None = None) -> bool:
    """Close an open review run that gave no verdict (``outcome``: ``crashed``,
    ``protocol_violation``, ``spawn_failed``, ``superseded``...; an ``error`` is also an event of
    that kind). False when it was closed already."""
    return db.write(_close_review_run_in, board, task_id, run_id, outcome, error, exit_code, usage)


def review_run_verdict(db: Database, board: str, task_id: str, run_id: int, v: Verdict, *,
                       actor: str | None = None, usage: dict[str, Any] | None = None) -> Row:
    """Apply the verdict of review run ``run_id`` and close the run, in one transaction.
    :class:`StaleRun` when the run is closed already; the kernel's refusal when the task left
    review meanwhile (a person decided first)."""
    def _w(tx: Tx) -> Row:
        if not tx.scalar("SELECT 1 FROM task_runs WHERE id = :r AND task_id = :t AND status = 'open' "
                         "AND claim_lock LIKE :rv", {"r": run_id, "t": task_id, "rv": REVIEW_CLAIM + "%"}):
            raise StaleRun(f"review run {run_id} of task {task_id} is closed already")
        out = review_in(tx, board, task_id, v, actor=actor)
        _close_review_run_in(tx, board, task_id, run_id, "reviewed", None, None, usage)
        tx.execute("UPDATE task_runs SET summary = :s, review = :rv WHERE id = :r",
                   {"s": first_line(v.text, 500), "r": run_id, "rv": dump_json(
                       {"reviewer": v.reviewer, "verdict": v.verdict, "score": v.score, "summary": v.text,
                        "findings": list(v.findings)})})
        return out
    return db.write(_w)


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
    tx.execute(
        "UPDATE task_runs SET status = 'closed', outcome = :o, ended_at = :now, error = :e, "
        "exit_code = COALESCE(:x, exit_code) WHERE id = :r AND status = 'open'",
        {"o": outcome, "now": now, "e": error, "x": exit_code, "r": rid},
    )
    budgets.account_run_in(tx, rid, actor=actor)
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
        tx.execute(
            "UPDATE task_runs SET status = 'closed', outcome = 'gave_up', ended_at = :now, error = :e "
            "WHERE id = :r AND status = 'open'",
            {"now": now, "e": reason, "r": rid},
        )
        budgets.account_run_in(tx, rid, actor=actor)
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


def _update_run(tx: Tx, run_id: int, fields: dict[str, Any]) -> None:
    usage_keys = {"input_tokens", "output_tokens", "cost_usd"} & set(fields)
    before = (tx.one("SELECT status, input_tokens, output_tokens, cost_usd, synthetic FROM task_runs "
                     "WHERE id = :r", {"r": run_id}) if usage_keys else None)
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


def update_run(db: Database, run_id: int, **fields: Any) -> None:
    """Attach facts learned after the fact (exit code, usage, verification output) to a run."""
    bad = set(fields) - _RUN_FIELDS
    if bad:
        raise InvalidInput(f"cannot set run fields {sorted(bad)}")
    if "metadata" in fields and not isinstance(fields["metadata"], str):
        fields["metadata"] = dump_json(fields["metadata"])
    if fields:
        db.write(_update_run, run_id, fields)


__all__ = [
    "HAND_CLAIM", "REVIEW_CLAIM", "Report", "Verdict", "approve", "claim", "claim_in", "claim_next", "claim_ttl",
    "close_review_run", "complete", "complete_in", "extend_claim", "fail", "give_up", "heartbeat", "mark_nudged",
    "open_review_run", "reclaim",
    "reclaim_in", "record_spawn", "record_telemetry", "reject", "request_changes", "request_review",
    "request_review_in", "return_to_queue", "review", "review_in", "review_run_verdict", "stale_error", "update_run",
    "usage_params",
]
