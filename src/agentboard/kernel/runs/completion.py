"""Finishing a run: a worker's or a person's completion (with the holds for verification,
integration, a spawn not yet recorded and a worktree worker's exit) and a running task handed to review."""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import orjson

from ...domain import model, states
from ...domain.errors import Conflict, InvalidInput
from ...store.engine import EVENT_COLUMNS, Database, Row, Tx, dump_json
from .. import budgets, hooks
from ..branches import integration_due_in, left_in
from ..children import CLAIM_KEYS, check_created_in
from ..common import first_line, get_task, run_metadata, task_out
from ..flow import after_satisfied
from .claims import _CLEAR_CLAIM, HAND_CLAIM, stale_error

# -- complete -----------------------------------------------------------------------------------


USAGE_MAX = model.USAGE_MAX


def usage_params(usage: dict[str, Any] | None) -> dict[str, Any]:
    """A run's usage report as statement parameters (``model.usage``: ``InvalidInput`` for an
    unknown key, or a number that is not a finite one >= 0)."""
    if not usage:  # none reported (most reports): nothing to check
        return {"in_t": None, "out_t": None, "cost": None}
    u = model.usage(usage)
    return {"in_t": u["input_tokens"], "out_t": u["output_tokens"], "cost": u["cost_usd"]}


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
        if metadata is not None:
            model.strings(metadata, "metadata")
        if metadata is not None and len(dump_json(metadata)) > model.METADATA_MAX:
            raise InvalidInput(f"metadata is larger than {model.METADATA_MAX} bytes")
        if result is not None:
            result = first_line(result, 500) or None
        if usage:  # an unknown key or a bad number: refused before anything else
            model.usage(usage)
        return cls(summary=summary, metadata=metadata, result=result, usage=usage)


#: PostgreSQL: the task locked for its completion; sent unread, with :data:`_COMPLETE_HINTS_PG`
#: right behind it (both answers come back in one round trip)
_LOCK_FOR_COMPLETE_PG = "SELECT t.* FROM tasks t WHERE t.id = :id AND t.board = :board FOR UPDATE OF t"
#: PostgreSQL: whether any budget may cover the run (a profile budget counts as one: without one,
#: no budget is looked up) and whether any child waits in todo (without one,
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
#: branch may have to be integrated first), its run closed (a run is open until this statement
#: closes it, so it counts once) and the event (``completed`` or ``review_requested``, the run's
#: outcome); the answer carries the closed run's spend (``usage_row``: its row of ``task_runs`` is
#: what the budgets read, so nothing is written to the ledger). No row back: nothing was written,
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
    "WHERE task_runs.id = :run AND task_runs.status = 'open' RETURNING task_runs.board, task_runs.task_id, "
    "task_runs.profile, task_runs.started_at, task_runs.ended_at, task_runs.input_tokens, "
    "task_runs.output_tokens, task_runs.cost_usd, task_runs.exit_code, task_runs.worker_pid, task_runs.synthetic), "
    f"e AS (INSERT INTO task_events {EVENT_COLUMNS} SELECT t.board, t.id, :run, t.last_outcome, :payload, "
    ":actor, :now FROM t) "
    "SELECT t.*, (SELECT row_to_json(u) FROM (SELECT r.board, r.task_id, t.goal_id, "
    "COALESCE(r.profile, t.assignee) AS profile, r.ended_at AS at, 1 AS runs, "
    "CASE WHEN r.ended_at > r.started_at THEN r.ended_at - r.started_at ELSE 0 END AS runtime, "
    "COALESCE(r.input_tokens, 0) + COALESCE(r.output_tokens, 0) AS tokens, COALESCE(r.cost_usd, 0) AS cost_usd, "
    "r.exit_code IS NULL AND r.worker_pid IS NOT NULL AS pending FROM r WHERE r.synthetic = 0) u) AS usage_row FROM t"
)
#: the spend's keys in :data:`_COMPLETE_RUNNING_PG`'s ``usage_row``
_USAGE_KEYS = ("board", "task_id", "goal_id", "profile", "at", "runs", "runtime", "tokens", "cost_usd", "pending")


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
    if usage:  # the run closed (and, when it made its task done, that too: one pending row)
        hooks.run_closed(tx, run_id, done=done)
    if usage and hints.get("budget_hint", True):
        budgets.account_row_in(tx, {k: usage.get(k) for k in _USAGE_KEYS}, run_id, now, actor=actor)
    return _after_completed(tx, board, task, task["status"], run_id, actor,
                            children=bool(hints.get("children_hint", True)), done_counted=bool(usage) and done)


#: SQLite: a worker's completion of its running task as the task's compare-and-swap (the same
#: conditions as :data:`_COMPLETE_RUNNING_PG`: the task runs this run, no verify commands wait,
#: no branch may have to be integrated, the spawn is recorded when the report awaits it), which
#: answers with the row as it now is and two hints read in the same statement: whether any
#: budget may cover the run (without one, no budget is looked up) and whether any
#: child waits in todo (NULL: none, nothing to promote; 1: all of them have an assignee, so
#: the promotion is one statement; 2: one has none). No row: nothing was written, and the
#: general path decides why.
_COMPLETE_RUNNING_SQLITE = (
    "UPDATE tasks SET "
    "status = CASE WHEN review_required = 1 AND :force = 0 THEN 'review' ELSE 'done' END, "
    f"{_CLEAR_CLAIM}, completed_at = CASE WHEN review_required = 1 AND :force = 0 THEN NULL ELSE :now END, "
    "result = COALESCE(:res, result), consecutive_failures = 0, protocol_violations = 0, "
    "block_kind = NULL, block_reason = NULL, "
    "last_outcome = CASE WHEN review_required = 1 AND :force = 0 THEN 'review_requested' ELSE 'completed' END, "
    "updated_at = :now WHERE id = :id AND board = :board AND status = 'running' AND current_run_id = :run "
    "AND (:noverify = 1 OR verify = '[]') AND (:integrated = 1 OR workspace_kind != 'worktree') "
    "AND (:await_spawn = 0 OR worker_pid IS NOT NULL) "
    "RETURNING *, EXISTS (SELECT 1 FROM budgets b WHERE (b.scope = 'task' AND b.ref = tasks.id) "
    "OR (b.scope = 'goal' AND b.ref = tasks.goal_id) OR (b.scope IN ('board', 'supervision') AND b.ref = tasks.board) "
    "OR b.scope = 'profile') AS budget_hint, "
    "(SELECT MAX(CASE WHEN COALESCE(c.assignee, '') = '' THEN 2 ELSE 1 END) FROM task_links l "
    "JOIN tasks c ON c.id = l.child_id WHERE l.parent_id = tasks.id AND c.status = 'todo') AS children_hint"
)


def _complete_running_sqlite(
    tx: Tx, board: str, task_id: str, report: Report, run_id: int, actor: str | None, force_done: bool,
    verified: bool, exit_code: int | None, integrated: bool, await_spawn: bool,
) -> Row | None:
    """A running task's completion without reading the task first: the swap, the run closed
    (its budgets looked up only when one may apply) and one rollup upsert for the run
    and its task done; None, with nothing written, when the swap does not apply."""
    now = time.time()
    up = usage_params(report.usage)  # a bad number is refused before anything is written
    task = tx.one(_COMPLETE_RUNNING_SQLITE, {
        "force": 1 if force_done else 0, "now": now, "res": report.result, "id": task_id, "board": board,
        "run": run_id, "noverify": 1 if verified or not tx.db.settings.verify else 0,
        "integrated": 1 if integrated else 0, "await_spawn": 1 if await_spawn else 0})
    if task is None:
        return None
    budgeted, children = bool(task.pop("budget_hint")), task.pop("children_hint")
    target = task["status"]
    done = target == states.DONE
    counted = _close_completed_run(tx, run_id, task, target, report, report.metadata, up, now, exit_code, actor,
                                   budgeted=budgeted, done=done)
    tx.event(board, task_id, task["last_outcome"], _completed_payload(report, synthetic=False), run_id=run_id,
             actor=actor, at=now)
    return _after_completed(tx, board, task, target, run_id, actor, children=children is not None,
                            done_counted=counted and done, unassigned=children != 1)


def _close_completed_run(tx: Tx, rid: int, task: Row, target: str, report: Report, metadata: dict[str, Any] | None,
                         up: dict[str, Any], now: float, exit_code: int | None, actor: str | None, *,
                         budgeted: bool | None, done: bool = False) -> bool:
    """Close the completed task's open run with the report (``metadata``: its checked metadata),
    and count it against its budgets (``done``: the close makes its task done). True when the
    ``run_closed`` hook fired for it."""
    meta = metadata
    close = (
        "UPDATE task_runs SET status = 'closed', outcome = :o, ended_at = :now, summary = :s, "
        "metadata = :m, input_tokens = COALESCE(:in_t, input_tokens), "
        "output_tokens = COALESCE(:out_t, output_tokens), cost_usd = COALESCE(:cost, cost_usd), "
        "exit_code = COALESCE(:ec, exit_code) "
        "WHERE id = :r AND status = 'open'")
    outcome = "review_requested" if target == states.REVIEW else "completed"
    params = {"o": outcome, "now": now, "s": report.summary,
              "m": dump_json(meta) if meta is not None else None, "r": rid, "ec": exit_code, **up}
    if budgeted is False:  # nothing to count but the run itself: the statement's count is enough
        tx.execute(close, params)
        # PostgreSQL: sent unread (an answer would cost a round trip); the task's row is locked
        # while it runs this run, so the run is open and closes here, once
        if tx.db.dialect != "postgresql" and tx.rowcount != 1:
            return False
        hooks.run_closed(tx, rid, done=done)
        return True
    closed = tx.one(close + (budgets.CLOSED_RUN_FACTS if budgeted else budgets.CLOSED_RUN), params)
    return budgets.account_run_in(tx, closed, task=task, actor=actor, budgeted=budgeted, done=done)


def _completed_payload(report: Report, *, synthetic: bool) -> dict[str, Any]:
    """A ``completed`` (or ``review_requested``) event's payload: the summary's first line and
    the result when there are any, ``synthetic`` only for a person's close of a task that was not
    running (no agent's run). Nothing written for what is absent: every completion's event is a
    row of the busiest table."""
    out: dict[str, Any] = {}
    if summary := first_line(report.summary):
        out["summary"] = summary
    if report.result is not None:
        out["result"] = report.result
    if synthetic:
        out["synthetic"] = True
    return out


def _after_completed(tx: Tx, board: str, task: Row, target: str, rid: int, actor: str | None, *,
                     children: bool, done_counted: bool = False, unassigned: bool = True) -> Row:
    """What follows a task becoming done (promotion of its children, its goal), and the answer.
    ``done_counted``: the ``run_closed`` hook already said the run made its task done;
    ``unassigned=False``: every child waiting in todo has an assignee."""
    if target == states.DONE:
        if not done_counted:
            hooks.task_done(tx, board, task["id"])
        task["promoted"] = after_satisfied(tx, board, task, actor, children=children, unassigned=unassigned)
    task["run_id"] = rid
    return task_out(task)


def complete_in(
    tx: Tx, board: str, task_id: str, report: Report, *, run_id: int | None = None,
    actor: str | None = None, force_done: bool = False, verified: bool = False,
    exit_code: int | None = None, integrated: bool = False, await_spawn: bool = False,
) -> Row:
    """Complete a task inside the caller's transaction (see :func:`complete`)."""
    report = report if verified else _measured_first(tx, report, run_id)  # verified: the dispatcher chose
    if (tx.db.dialect == "postgresql" and run_id is not None
            and not any(k in (report.metadata or {}) for k in CLAIM_KEYS)):
        done = _complete_running_pg(tx, board, task_id, report, run_id, actor, force_done, verified, exit_code,
                                    integrated, await_spawn)
        if done is not None:
            return done
    elif tx.db.dialect == "sqlite" and run_id is not None and not any(k in (report.metadata or {}) for k in CLAIM_KEYS):
        done = _complete_running_sqlite(tx, board, task_id, report, run_id, actor, force_done, verified, exit_code,
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
        if (target == states.DONE and task.get("workspace_kind") == "worktree"
                and not str(task.get("claim_lock") or "").startswith(HAND_CLAIM)):
            # its branch is what the tasks after it start from: done once the worker has exited and
            # what it left uncommitted is on it (``dispatch.finish.complete_verified``)
            return _hold_for_verification(tx, board, task, report, run_id, actor, reason="exit")
    states.check("complete", cur, target, task_id)  # a task already done says so, not how to finish it
    if due == "integrate" and not integrated:
        raise Conflict(f"task {task_id}'s branch is integrated into the board's base branch when it is done: "
                       "finish it through agentboard (the dispatcher after its worker's run, `agentboard complete`, "
                       "the API or the dashboard), which integrates it first")
    now = time.time()
    metadata = report.metadata
    if cur == states.RUNNING:  # children the run says it created must exist and be its own
        metadata = check_created_in(tx, board, task_id, task["current_run_id"], metadata, actor=actor)
        if run_id is None:  # a person's close: its worker is stopped at once (``tasks.moves.BY_HAND``)
            metadata = {**(metadata or {}), "closed_by_hand": True}
    up = usage_params(report.usage)
    outcome = "review_requested" if target == states.REVIEW else "completed"
    if cur == states.RUNNING:
        rid = task["current_run_id"]
        _close_completed_run(tx, rid, task, target, report, metadata, up, now, exit_code, actor, budgeted=budgeted)
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


def _reports_usage(report: Report) -> bool:
    return any(v is not None for v in (report.usage or {}).values())


def _measured_first(tx: Tx, report: Report, run_id: int | None) -> Report:
    """A worker's ``report`` without its usage when its run holds usage already — what the
    dispatcher read from its agent CLI's output (a report's own usage is written only as it closes
    the run): a worker's word never replaces what its CLI measured (``docs/budgets.md``). The
    dispatcher's own completion (``verified``) gives the usage it chose (``protocol.lifecycle``)."""
    if run_id is None or not _reports_usage(report):
        return report
    usage_params(report.usage)  # a bad number is refused all the same
    found = tx.one("SELECT 1 AS x FROM task_runs WHERE id = :r AND (input_tokens IS NOT NULL OR "
                   "output_tokens IS NOT NULL OR cost_usd IS NOT NULL)", {"r": run_id})
    return report if found is None else replace(report, usage=None)


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
                           reason: str = "verification", review: bool = False) -> Row:
    """Record the worker's success report on its run; the task stays running until the
    dispatcher has run the verify commands after the worker exits (protocol.lifecycle), or
    (``reason="integration"``) has integrated the task's branch into the board's base branch,
    or (``"spawn"``) has seen the exit of a worker whose spawn it had not recorded yet, or
    (``"exit"``, a worktree task) has seen its worker exit and committed what it left."""
    pending = {"summary": report.summary, "metadata": report.metadata, "result": report.result,
               "usage": report.usage, "actor": actor, **({"review": True} if review else {})}
    tx.execute("UPDATE task_runs SET pending_report = :p WHERE id = :r", {"p": dump_json(pending), "r": run_id})
    kind = "integration_pending" if reason == "integration" else "verify_pending"
    tx.event(board, task["id"], kind, {"summary": first_line(report.summary), "until": reason}, run_id=run_id,
             actor=actor)
    out = task_out(task)
    out.update(run_id=run_id, pending=reason, pending_verification=reason == "verification",
               pending_integration=reason == "integration")
    return out


#: PostgreSQL: a worker's completion as one server-side function (``agentboard_complete_running_json``,
#: migrations 0030–0038), a transaction of its own: :data:`_COMPLETE_RUNNING_PG`, the run pending for
#: the rollups, the children it unblocks, its goal's check, in one round trip. It answers the task's
#: row as one JSON text (:func:`_task_of_json`) and the promoted children (the task NULL: the swap
#: does not apply) or raises :data:`_DECLINED` (all rolled back) where the general path has more to
#: do: a waiting child has no assignee, the goal's last open task, a budget (detail :data:`_BUDGETED`).
_COMPLETE_FUNCTION_PG = (
    "SELECT f.task AS task__, f.promoted AS promoted__ FROM agentboard_complete_running_json(:id, :board, "
    "CAST(:run AS bigint), :now, CAST(:force AS integer), :res, CAST(:noverify AS integer), "
    "CAST(:integrated AS integer), CAST(:await_spawn AS integer), :s, :m, CAST(:in_t AS bigint), "
    "CAST(:out_t AS bigint), CAST(:cost AS double precision), CAST(:ec AS integer), :actor, :payload, :by) f"
)
_PG_FUNCTION = "agentboard_complete_running_json"
#: the detail of its decline where a budget may count the run (0032)
_BUDGETED = "budget"
#: the SQLSTATE with which :data:`_COMPLETE_FUNCTION_PG` declines after its swap
_DECLINED = "ABC01"
#: seconds a board whose completion the function declined because a budget may count the run
#: sends its completions straight to the general path: a budget stays for a while, and the
#: function's decline costs its writes, rolled back
BUDGETED_FOR = 30.0
#: per database, the boards whose completions take the general path, and until when (monotonic)
_budgeted: weakref.WeakKeyDictionary[Database, dict[str, float]] = weakref.WeakKeyDictionary()


def _budgeted_now(db: Database, board: str) -> bool:
    """Whether ``board``'s completions skip the function for now (a budget may count them)."""
    until = _budgeted.get(db, {}).get(board)
    return until is not None and time.monotonic() < until


def _remember_budgeted(db: Database, board: str) -> Callable[[BaseException], None]:
    def remember(exc: BaseException) -> None:
        diag = getattr(exc, "diag", None)
        if getattr(diag, "message_detail", None) == _BUDGETED:
            _budgeted.setdefault(db, {})[board] = time.monotonic() + BUDGETED_FOR
    return remember


def _complete_function_pg(
    db: Database, board: str, task_id: str, report: Report, run_id: int, actor: str | None, force_done: bool,
    verified: bool, exit_code: int | None, integrated: bool, await_spawn: bool,
) -> Row | None:
    """A worker's completion of its running task in one round trip (see
    :data:`_COMPLETE_FUNCTION_PG`); None, with nothing written, when the general path must do it."""
    now = time.time()
    up = usage_params(report.usage)  # a bad number is refused before anything is sent
    rows = db.write_one(_COMPLETE_FUNCTION_PG, {
        "id": task_id, "board": board, "run": run_id, "now": now, "force": 1 if force_done else 0,
        "res": report.result, "noverify": 1 if verified or not db.settings.verify else 0,
        "integrated": 1 if integrated else 0, "await_spawn": 1 if await_spawn else 0,
        "s": report.summary, "m": dump_json(report.metadata) if report.metadata is not None else None,
        "ec": exit_code, "actor": actor, "payload": dump_json(_completed_payload(report, synthetic=False)),
        "by": dump_json({"by": task_id}), **up}, verb=complete_in, declined=_DECLINED,
        on_declined=_remember_budgeted(db, board))
    answer = rows[0] if rows else None
    if answer is None or answer["task__"] is None:
        return None
    task = _task_of_json(answer["task__"])
    promoted = answer["promoted__"]
    db.signal({board})
    if task["status"] == states.DONE:
        task["promoted"] = list(promoted)
    task["run_id"] = run_id
    return task_out(task)


#: the task's columns of type ``double precision`` (``store.schema``: the times): ``row_to_json``
#: writes a whole one without a fraction, which JSON reads back as an integer
TASK_FLOATS = frozenset({"created_at", "updated_at", "started_at", "completed_at", "cooldown_until", "claim_expires",
                         "last_heartbeat_at", "not_before"})


def _task_of_json(text: str) -> Row:
    """A task's row from its ``row_to_json``: the values the row's columns decode to."""
    task: Row = orjson.loads(text)
    for key in TASK_FLOATS:
        value = task.get(key)
        if type(value) is int:
            task[key] = float(value)
    return task


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
    has recorded the spawn, it is held the same way. A worker's report that makes a worktree task
    done waits for the worker's exit in every case (not a run claimed by hand): its branch is
    what the tasks after it start from, and the dispatcher commits what the worker left first.
    The report's usage counts only where the run holds none the dispatcher measured.
    """
    report = Report.build(summary=summary, metadata=metadata, result=result, usage=usage)
    if (db.dialect == "postgresql" and run_id is not None
            and (report.metadata is None or not any(k in report.metadata for k in CLAIM_KEYS))
            and hooks.all_mirrored(_PG_FUNCTION, "run_closed", "task_done")
            and not _budgeted_now(db, board)):
        if not verified and _reports_usage(report):  # (a read only where the report has usage to weigh)
            report = db.read(_measured_first, report, run_id)
        done = _complete_function_pg(db, board, task_id, report, run_id, actor, force_done, verified, exit_code,
                                     integrated, await_spawn)
        if done is not None:
            return done
    return db.write(complete_in, board, task_id, report, run_id=run_id, actor=actor, force_done=force_done,
                    verified=verified, exit_code=exit_code, integrated=integrated, await_spawn=await_spawn)


def request_review_in(
    tx: Tx, board: str, task_id: str, *, summary: str | None = None, run_id: int | None = None,
    actor: str | None = None, after_exit: bool = False,
) -> Row:
    """Hand a running task to review inside the caller's transaction. A worker's own hand-off
    (``run_id``) on a task with ``verify`` commands is held like its completion, until the
    dispatcher has run them after the worker exits: review, and an approval after it, never see
    work its checks did not pass. ``after_exit``: the dispatcher's own hand-off once the worker
    has exited (its checks passed, or its result was degraded to review for a person)."""
    task = get_task(tx, board, task_id, lock=True)
    if run_id is not None and task["current_run_id"] != run_id:
        raise stale_error(task, run_id)
    states.check("request_review", task["status"], states.REVIEW, task_id)
    if run_id is not None and not after_exit and _verification_pending(tx, task):
        return _hold_for_verification(tx, board, task, Report.build(summary=summary), run_id, actor, review=True)
    now = time.time()
    rid = task["current_run_id"]
    closed = tx.one(
        "UPDATE task_runs SET status = 'closed', outcome = 'review_requested', ended_at = :now, "
        "summary = COALESCE(:s, summary) WHERE id = :r AND status = 'open'" + budgets.CLOSED_RUN,
        {"now": now, "s": summary, "r": rid},
    )
    budgets.account_run_in(tx, closed, task=task, actor=actor)
    tx.execute(
        f"UPDATE tasks SET status = 'review', {_CLEAR_CLAIM}, last_outcome = 'review_requested', "
        "updated_at = :now WHERE id = :id",
        {"now": now, "id": task_id},
    )
    tx.event(board, task_id, "review_requested", {"summary": first_line(summary)}, run_id=rid, actor=actor, at=now)
    task.update(status=states.REVIEW, current_run_id=None)
    return task_out(task)


def request_review(db: Database, board: str, task_id: str, *, summary: str | None = None, run_id: int | None = None,
                   actor: str | None = None, after_exit: bool = False) -> Row:
    return db.write(request_review_in, board, task_id, summary=summary, run_id=run_id, actor=actor,
                    after_exit=after_exit)


# -- a refused report ---------------------------------------------------------------------------

#: the key of a run's metadata that keeps its worker's last refused report (``report_refused``)
REFUSED_KEY = "report_refused"


def report_refused(db: Database, board: str, task_id: str, run_id: int, verb: str, why: str) -> bool:
    """Remember on the open run ``run_id`` that its worker's report (``verb``: complete, block,
    request review) was refused as bad input, and ``why`` (one transaction), for the exit that
    follows without a report to say so. False when the run is not open on that task."""
    def _w(tx: Tx) -> bool:
        row = tx.one("SELECT metadata FROM task_runs WHERE id = :r AND task_id = :t AND board = :b AND status = 'open'",
                     {"r": run_id, "t": task_id, "b": board})
        if row is not None:
            meta = {**run_metadata(row), REFUSED_KEY: {"verb": verb, "error": first_line(why, 500), "at": time.time()}}
            tx.execute("UPDATE task_runs SET metadata = :m WHERE id = :r", {"m": dump_json(meta), "r": run_id})
        return row is not None
    return db.write(_w)
