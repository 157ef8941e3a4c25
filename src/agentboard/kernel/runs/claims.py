"""Claiming a run and keeping it: claim, the next ready tasks, the dispatcher's spawn record,
heartbeats and claim extensions.

Every write against a running task is a compare-and-swap on the task's status and current run,
so a late worker and a dispatcher's reclaim can never both apply.
"""

from __future__ import annotations

import time
from typing import Any

from ...domain import model, states
from ...domain.errors import Conflict, InvalidInput, NotFound, StaleRun
from ...store.engine import EVENT_COLUMNS, Database, Row, Tx, dump_json, in_list
from .. import budgets
from ..common import (
    get_task,
    pending_parents,
)

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
        return ttl_seconds(ttl)
    return int(tx.db.settings.claim_ttl)


#: the longest claim a worker may ask for, in seconds (the API's bound)
TTL_MAX = 100_000_000
#: the longest a worker's heartbeat extends its run's claim, in seconds (a day)
WORKER_TTL_MAX = 86_400
#: the longest heartbeat note kept, in characters: a progress line, not a report
NOTE_MAX = 2_000


def ttl_seconds(ttl: Any) -> int:
    """A claim's TTL given by a caller, checked: whole seconds from 1 to :data:`TTL_MAX`."""
    try:
        if isinstance(ttl, bool):
            raise TypeError
        seconds = int(ttl)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInput(f"invalid ttl {ttl!r}: give whole seconds (or 30s, 30m, 2h, 1d)") from None
    if not 1 <= seconds <= TTL_MAX:
        raise InvalidInput(f"ttl is {seconds} seconds; give 1 to {TTL_MAX} seconds (about 3 years)")
    return seconds


# -- claim ------------------------------------------------------------------------------------

#: The check that a task found by its key is still ready, in a claim's compare-and-swap. Written
#: so that no index of ready tasks can serve the statement: their predicate is ``status =
#: 'ready'``, and with statistics from a quiet spell (none ready then) PostgreSQL prices such an
#: index as empty and reads the task through the whole of it, not its primary key, so that every
#: claim walked the ready queue (``tests/postgres/test_quiet_statistics.py``).
STILL_READY = "status || '' = 'ready'"


def still_ready(alias: str = "") -> str:
    """:data:`STILL_READY` for the table named ``alias`` (``"t"``: ``t.status || '' = 'ready'``)."""
    return (alias + "." if alias else "") + STILL_READY

#: the task and whether any parent is still pending, in one statement
_CLAIM_READ = (
    "SELECT t.id, t.status, t.assignee, t.board, t.parents_override = 0 AND EXISTS ("
    " SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id"
    " WHERE l.child_id = t.id AND p.status NOT IN ('done', 'archived')) AS pending "
    "FROM tasks t WHERE t.id = :id AND t.board = :b"
)


def _claim_pg(read: str, task: str) -> str:
    """The claim's statement over the task ``read`` selects (``task``: its id in the update)."""
    return (
        "WITH t AS (" + read + "), "
        "r AS (INSERT INTO task_runs (task_id, board, profile, attempt, status, claim_lock, claim_expires, "
        "worker_pid, worker_host, started_at, last_heartbeat_at, synthetic) "
        "SELECT t.id, t.board, t.assignee, (SELECT COALESCE(MAX(attempt), 0) + 1 FROM task_runs WHERE task_id = t.id), "
        "'open', :lock, :exp, :pid, :host, :now, :now, 0 FROM t WHERE t.status = 'ready' AND NOT t.pending "
        "RETURNING id), "
        "u AS (UPDATE tasks SET status = 'running', current_run_id = (SELECT id FROM r), claim_lock = :lock, "
        "claim_expires = :exp, worker_pid = :pid, worker_host = :host, last_heartbeat_at = :now, "
        "started_at = COALESCE(started_at, :now), updated_at = :now "
        f"WHERE id = {task} AND {STILL_READY} AND current_run_id IS NULL AND EXISTS (SELECT 1 FROM r) RETURNING id), "
        f"e AS (INSERT INTO task_events {EVENT_COLUMNS} SELECT t.board, t.id, r.id, 'claimed', "
        "jsonb_strip_nulls(jsonb_build_object('host', CAST(:host AS text), 'assignee', t.assignee))::text, :actor, :now "
        "FROM t JOIN r ON true JOIN u ON u.id = t.id) "
        "SELECT t.*, (SELECT id FROM r) AS run_id, (SELECT COUNT(*) FROM u) AS swapped FROM t"
    )


#: PostgreSQL: the whole claim of a ready task with no pending parent in one statement — the
#: read, the run's insert and the task's compare-and-swap (a task that is not claimable comes back
#: with ``run_id`` NULL and nothing written, and takes the general path below)
_CLAIM_PG = _claim_pg(_CLAIM_READ, ":id")
#: PostgreSQL: the claim of the next ready task, by the number of assignees it is narrowed to
#: (None: any); built on first use
_claim_next_pg: dict[int | None, str] = {}


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
        f"WHERE id = :id AND {STILL_READY} AND current_run_id IS NULL",
        {"r": run_id, "lock": claim_lock, "exp": expires, "pid": pid, "host": host, "now": now, "id": task_id},
    )
    if tx.rowcount != 1:
        raise Conflict(f"task {task_id} was claimed by someone else")
    return _claimed(tx, board, task_id, run_id, task["assignee"], claim_lock, expires, host, actor, now)


def _claimed(tx: Tx, board: str, task_id: str, run_id: int, assignee: str | None, claim_lock: str,
             expires: float, host: str | None, actor: str | None, now: float) -> Row:
    tx.event(board, task_id, "claimed", claimed_payload(host, assignee), run_id=run_id, actor=actor, at=now)
    return _claimed_out(task_id, run_id, assignee, claim_lock, expires)


def claimed_payload(host: str | None, assignee: str | None) -> dict[str, Any]:
    """A ``claimed`` event's payload: the host and the assignee, each only when known (the
    PostgreSQL claim's statement builds the same, ``jsonb_strip_nulls``)."""
    return {k: v for k, v in (("host", host), ("assignee", assignee)) if v is not None}


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


def _next_ready(params: dict[str, Any], assignees: list[str] | None, limit: int) -> str:
    """The ready tasks of board ``:b`` in the order they are claimed, up to ``limit``.

    The limit is written into the statement, not bound: PostgreSQL plans a prepared statement
    once for any parameters only while that plan looks no dearer than planning anew, and it
    prices an unknown ``LIMIT`` at a tenth of the rows. On a board of some ten thousand tasks
    that made the claim's generic plan look dearer, and every claim planned its whole statement
    again: 0.5 ms more of the server's CPU per claim (``bench/pg_board_size.py``)."""
    sql = (
        "SELECT id FROM tasks WHERE board = :b AND status = 'ready' "
        "AND (cooldown_until IS NULL OR cooldown_until <= :now) "
    )
    if assignees is not None:
        sql += "AND assignee IN " + in_list("a", assignees, params) + " "
    return sql + f"ORDER BY priority DESC, created_at, id LIMIT {int(limit)}"


def _claim_next_one_pg(db: Database, board: str, assignees: list[str] | None, ttl: int | None, host: str | None,
                       actor: str | None) -> list[Row] | None:
    """PostgreSQL: the next ready task claimed in one statement, a transaction of its own (one
    round trip): the task picked ``FOR UPDATE SKIP LOCKED``, then :data:`_CLAIM_PG`'s run, swap
    and event. None, with nothing written, when the task picked has a parent not done (the
    general path moves it back to todo)."""
    now = time.time()
    expires = now + (ttl_seconds(ttl) if ttl else int(db.settings.claim_ttl))
    claim_lock = f"{host or ''}::{now}"
    params: dict[str, Any] = {"b": board, "now": now, "lock": claim_lock, "exp": expires, "pid": None,
                              "host": host, "actor": actor}
    pick = _next_ready(params, assignees, 1) + " FOR UPDATE SKIP LOCKED"
    shape = None if assignees is None else len(assignees)
    sql = _claim_next_pg.get(shape)
    if sql is None:
        sql = _claim_next_pg[shape] = _claim_pg(_CLAIM_READ.replace("t.id = :id", f"t.id = ({pick})"),
                                                "(SELECT id FROM t)")
    rows = db.write_one(sql, params, verb=_claim_next)
    if not rows:
        return []
    task = rows[0]
    if task["run_id"] is None:
        return None
    db.signal({board})  # the statement inserted the claimed event
    return [_claimed_out(task["id"], task["run_id"], task["assignee"], claim_lock, expires)]


def _claim_next(tx: Tx, board: str, limit: int, assignees: list[str] | None, ttl: int | None, host: str | None, actor: str | None) -> list[Row]:
    params: dict[str, Any] = {"b": board, "now": time.time()}
    if assignees is not None and not assignees:
        return []
    sql = _next_ready(params, assignees, limit)
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
    if db.dialect == "postgresql" and limit == 1 and (assignees is None or assignees):
        one = _claim_next_one_pg(db, board, assignees, ttl, host, actor)
        if one is not None:
            return one
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
        from ..inbox import take_in

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
    also holds the comments written on the task since the worker last looked.

    A worker's heartbeat (``run_id`` given) is an event of the busiest table each time, and a
    looping or hostile agent sends thousands: its note is kept to :data:`NOTE_MAX` characters
    (the rest dropped, marked ``…``), and it extends its claim by :data:`WORKER_TTL_MAX` seconds
    at most (a claim a worker set for years would keep its task from anyone else)."""
    if note:
        note = model.body(note, model.COMMENT_MAX, "note")
        if len(note) > NOTE_MAX:
            note = note[:NOTE_MAX - 1] + "…"
    if run_id is not None and ttl is not None:
        ttl = min(ttl_seconds(ttl), WORKER_TTL_MAX)
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
