"""The checks: the dispatcher's gate before a spawn (and the release of the tasks it blocked),
and the running workers of an exhausted scope told to stop."""

from __future__ import annotations

import statistics
import time
from typing import Any

from ...domain import states
from ...store.engine import Database, Row, Tx, in_list
from .. import hooks
from ..common import ready_or_todo
from .ledger import (
    CLOSED_RUN,
    PENDING_FOR,
    RUN_COST,
    RUN_COUNTED,
    RUN_RUNTIME,
    RUN_TOKENS,
    _for_task,
    _matching,
    _ratio,
    account_run_in,
    spend_in,
)
from .scopes import (
    _SCOPE_COL,
    EXPECTED_RUNS,
    LIMIT_OF,
    METRICS,
    amount,
    own_scope,
    scope_name,
    window,
)

# -- the gate ------------------------------------------------------------------------------------


def _pending_rows(tx: Tx, now: float) -> list[Row]:
    """Closed runs whose usage is still to come (their worker's exit not processed) that a budget
    covers: their ``pending`` markers in the ledger, few, found through a partial index."""
    return tx.all("SELECT task_id, goal_id, board, profile FROM budget_usage WHERE pending = 1 AND at > :since",
                  {"since": now - PENDING_FOR})


def _pending(rows: list[Row], scope: str, ref: str) -> int:
    col = _SCOPE_COL[scope]
    return sum(1 for r in rows if r.get(col) == ref)


def _in_flight(tx: Tx, scope: str, ref: str) -> int:
    """Runs of a scope under way (tasks running; for a task, its race's attempts running)."""
    if scope == "task":
        return int(tx.scalar("SELECT COUNT(*) FROM tasks WHERE race_of = :r AND status = 'running'", {"r": ref}) or 0)
    if scope == "goal":
        # through the small index of running tasks, not the goal's (which holds all its tasks)
        sql = "SELECT COUNT(*) FROM tasks WHERE status = 'running' AND COALESCE(goal_id, '') = :r"
    elif scope == "supervision":
        sql = "SELECT COUNT(*) FROM tasks WHERE board = :r AND status = 'running' AND purpose = 'supervision'"
    elif scope == "board":
        sql = "SELECT COUNT(*) FROM tasks WHERE board = :r AND status = 'running'"
        if own_scope(tx, ref):
            sql += " AND COALESCE(purpose, '') <> 'supervision'"
    else:
        sql = "SELECT COUNT(*) FROM tasks WHERE status = 'running' AND assignee = :r"
    sql += " AND race_until IS NULL"  # a race's own task runs nothing: its attempts are counted
    return int(tx.scalar(sql, {"r": ref}) or 0)


#: the last runs of profile ``:p`` that spent, newest first: its own (``ix_runs_profile``) and
#: those without a profile on a task it is assigned (an LLM review counts against the task's)
_RECENT_RUNS = (
    f"SELECT runtime, tokens, cost_usd FROM (SELECT * FROM (SELECT r.id, {RUN_RUNTIME} AS runtime, "
    f"{RUN_TOKENS} AS tokens, {RUN_COST} AS cost_usd FROM task_runs r WHERE r.profile = :p AND {RUN_COUNTED} "
    f"ORDER BY r.id DESC LIMIT {EXPECTED_RUNS}) own UNION ALL SELECT * FROM (SELECT r.id, {RUN_RUNTIME} AS runtime, "
    f"{RUN_TOKENS} AS tokens, {RUN_COST} AS cost_usd FROM task_runs r JOIN tasks t ON t.id = r.task_id "
    f"WHERE r.profile IS NULL AND t.assignee = :p AND {RUN_COUNTED} ORDER BY r.id DESC LIMIT {EXPECTED_RUNS}) "
    f"assigned) recent ORDER BY id DESC LIMIT {EXPECTED_RUNS}"
)


def expected_in(tx: Tx, profile: str | None) -> tuple[dict[str, float], str]:
    """The expected spend of one run of ``profile`` per metric, and where it comes from: the
    configured ``expected_cost`` of the profile's budget, else the median of its recent runs."""
    out = {"runs": 1.0, "runtime": 0.0, "tokens": 0.0, "cost": 0.0}
    if not profile:
        return out, "no profile"
    rows = tx.all(_RECENT_RUNS, {"p": profile})
    source = f"the median of the last {len(rows)} runs of profile {profile!r}" if rows else "no runs yet"
    if rows:
        out["runtime"] = float(statistics.median(float(r["runtime"] or 0) for r in rows))
        out["tokens"] = float(statistics.median(float(r["tokens"] or 0) for r in rows))
        out["cost"] = float(statistics.median(float(r["cost_usd"] or 0) for r in rows))
    configured = tx.scalar("SELECT expected_cost FROM budgets WHERE scope = 'profile' AND ref = :p", {"p": profile})
    if configured is not None:
        out["cost"] = float(configured)
        source = f"the expected_cost configured for profile {profile!r}"
    return out, source


def _in_scope(scope: str, ref: str, t: Row) -> bool:
    key = {"task": "id", "goal": "goal_id", "board": "board", "profile": "assignee", "supervision": "board"}[scope]
    if scope == "task" and t.get("race_of") == ref:  # a race's attempt (set by gate_in when its race has a budget)
        return True
    if scope in ("board", "supervision") and "supervised" in t:  # set by gate_in for the board's rows
        return t.get(key) == ref and bool(t["supervised"]) == (scope == "supervision")
    return bool(t.get(key)) and t.get(key) == ref


def gate_in(tx: Tx, task: Row, *, also: list[Row] | None = None, now: float | None = None) -> str | None:
    """Why a run of ``task`` (``id``, ``board``, ``goal_id``, ``assignee``: the profile) must not
    start now, or None. ``also``: tasks this transaction is starting too (their runs count as
    under way)."""
    # ``supervised`` is kept on the row: which of the board's two scopes it counts against, read
    # by _in_scope when the row is among the ``also`` of a later task
    budgets = _matching(tx, task["id"], task.get("goal_id"), task["board"], task.get("assignee"),
                        purpose=task.get("purpose"), known="purpose" in task, facts=task, races=True)
    budgets = [b for b in budgets if any(b.get(LIMIT_OF[m]) is not None for m in METRICS)]
    if not budgets:
        return None
    now = time.time() if now is None else now
    expected: tuple[dict[str, float], str] | None = None
    pending_rows: list[Row] | None = None
    for b in budgets:
        spent = spend_in(tx, b["scope"], b["ref"], b["per"], now)
        flying = _in_flight(tx, b["scope"], b["ref"]) + sum(1 for t in also or () if _in_scope(b["scope"], b["ref"], t))
        unknown = None  # closed runs whose usage is still to come count like runs under way for tokens and cost
        for m in METRICS:
            limit = b.get(LIMIT_OF[m])
            if limit is None:
                continue
            limit = float(limit)
            if spent[m] >= limit:
                over = spent[m] - limit
                return (f"{scope_name(b)} is spent: {m} {amount(m, spent[m])} of {amount(m, limit)}"
                        + (f" (over by {amount(m, over)})" if over > 0 else "")
                        + f"; raise it with `agentboard budget set --{b['scope']} {b['ref']} --max-{m} ...`")
            if m == "runs":
                need, source = 1.0, "one run"
            else:
                if expected is None:
                    expected = expected_in(tx, task.get("assignee"))
                need, source = expected[0][m], expected[1]
            waiting = flying
            if m in ("tokens", "cost") and need > 0:
                if pending_rows is None:
                    pending_rows = _pending_rows(tx, now)
                if unknown is None:
                    unknown = _pending(pending_rows, b["scope"], b["ref"])
                waiting += unknown
            remaining = limit - spent[m] - waiting * need
            if need > 0 and remaining < need:
                under_way = f", {waiting} under way" if waiting else ""
                return (f"{scope_name(b)} cannot afford another run: {m} {amount(m, spent[m])} of "
                        f"{amount(m, limit)} spent{under_way}, {amount(m, max(remaining, 0.0))} left is below "
                        f"the expected {amount(m, need)} of one run ({source}); raise it with "
                        f"`agentboard budget set --{b['scope']} {b['ref']} --max-{m} ...`")
    return None


def review_gate(db: Database, board: str, task_id: str, profile: str | None) -> str | None:
    """Why a review run of ``task_id`` (by ``profile``, or by the LLM: the task's own profile)
    must not start now, or None (the claim of the run checks it again)."""
    def _r(tx: Tx) -> str | None:
        t = tx.one("SELECT id, board, goal_id, assignee FROM tasks WHERE id = :t AND board = :b",
                   {"t": task_id, "b": board})
        if t is None:
            return None
        return gate_in(tx, {**t, "assignee": profile or t["assignee"]})
    return db.read(_r)


def block_in(tx: Tx, task: Row, reason: str, *, actor: str | None = "dispatcher") -> None:
    """Block a ready task with kind ``budget`` (the gate refused it)."""
    now = time.time()
    tx.execute("UPDATE tasks SET status = 'blocked', block_kind = 'budget', block_reason = :r, updated_at = :now "
               "WHERE id = :id AND status = 'ready'", {"r": reason, "now": now, "id": task["id"]})
    if tx.rowcount == 1:
        tx.event(task["board"], task["id"], "blocked", {"reason": reason, "kind": "budget"}, actor=actor, at=now)
        hooks.budget_blocked(tx, task["board"], task["id"], actor)


def gate_batch_in(tx: Tx, rows: list[Row], *, actor: str | None = "dispatcher",
                  refused: dict[str, str] | None = None) -> list[Row]:
    """The rows (ready tasks about to be claimed) the budgets let through; the others are
    blocked with kind ``budget`` (and put in ``refused``, task id → why, when given)."""
    if not rows or tx.scalar("SELECT 1 FROM budgets LIMIT 1") is None:
        return rows
    ok: list[Row] = []
    for r in rows:
        why = gate_in(tx, r, also=ok)
        if why is None:
            ok.append(r)
        else:
            block_in(tx, r, why, actor=actor)
            if refused is not None:
                refused[r["id"]] = why
    return ok


def release_in(tx: Tx, boards: list[str] | None = None, *, actor: str | None = None) -> list[str]:
    """Unblock the tasks blocked by a budget that the gate lets through now (a limit raised or
    cleared, a new window). Returns their ids."""
    if boards is None:
        boards = [r["slug"] for r in tx.all("SELECT slug FROM boards WHERE archived = 0")]
    if not boards:
        return []
    params: dict[str, Any] = {}
    rows = tx.all("SELECT id, board, goal_id, assignee, purpose FROM tasks WHERE board IN " + in_list("b", boards, params)
                  + " AND status = 'blocked' AND block_kind = 'budget' ORDER BY priority DESC, created_at", params)
    released: list[str] = []
    let_through: list[Row] = []
    now = time.time()
    for r in rows:
        if gate_in(tx, r, also=let_through, now=now) is not None:
            continue
        if r["purpose"] == "supervision" and not hooks.budget_releasing(tx, r["board"], r, actor):
            continue  # the supervisor's side retired it (its wakes went elsewhere meanwhile)
        target = ready_or_todo(tx, r["id"], r["assignee"], r["board"])
        tx.execute("UPDATE tasks SET status = :s, block_kind = NULL, block_reason = NULL, updated_at = :now "
                   "WHERE id = :id AND status = 'blocked' AND block_kind = 'budget'",
                   {"s": target, "now": now, "id": r["id"]})
        if tx.rowcount == 1:
            tx.event(r["board"], r["id"], "unblocked", {"status": target, "reason": "the budget allows a run again"},
                     actor=actor, at=now)
            released.append(r["id"])
            if target == states.READY:
                let_through.append(r)
    return released


def release(db: Database, boards: list[str] | None = None) -> list[str]:
    """:func:`release_in` in its own transaction (the dispatcher, once per interval)."""
    def _has(tx: Tx) -> bool:
        params: dict[str, Any] = {}
        sql = "SELECT 1 FROM tasks WHERE status = 'blocked' AND block_kind = 'budget'"
        if boards is not None:
            if not boards:
                return False
            sql += " AND board IN " + in_list("b", boards, params)
        return tx.scalar(sql + " LIMIT 1", params) is not None
    if not db.read(_has):
        return []
    return db.write(release_in, boards, actor="dispatcher")


# -- stopping running workers ----------------------------------------------------------------------


def stop_reason_in(tx: Tx, task_id: str) -> str | None:
    """Why the running task ``task_id`` must stop: one of its budgets is spent (None if not)."""
    budgets = [b for b in _for_task(tx, task_id) if b.get("exhausted_window")]
    now = time.time()
    for b in budgets:
        key, _ = window(b["per"], now)
        if b["exhausted_window"] != key:
            continue
        spent = spend_in(tx, b["scope"], b["ref"], b["per"], now)
        ratio, metric = _ratio(b, spent)
        if metric is not None and ratio >= 1.0:
            limit = float(b[LIMIT_OF[metric]])
            return (f"{scope_name(b)} is spent: {metric} {amount(metric, spent[metric])} of {amount(metric, limit)}; "
                    "stop now")
    return None


def running_over_budget(db: Database) -> list[Row]:
    """Running tasks one of whose budgets is spent: ``id``, ``board``, ``current_run_id``, ``reason``
    (the dispatcher stops them after a grace period)."""
    def _r(tx: Tx) -> list[Row]:
        out: dict[str, Row] = {}
        now = time.time()
        for b in tx.all("SELECT * FROM budgets WHERE exhausted_window IS NOT NULL"):
            key, _ = window(b["per"], now)
            if b["exhausted_window"] != key:
                continue
            spent = spend_in(tx, b["scope"], b["ref"], b["per"], now)
            ratio, metric = _ratio(b, spent)
            if metric is None or ratio < 1.0:
                continue
            col = {"task": "id", "goal": "goal_id", "board": "board", "profile": "assignee",
                   "supervision": "board"}[b["scope"]]
            which = ""
            if b["scope"] == "task":  # a race's task budget: its attempts are the tasks that run
                which = " OR race_of = :r"
            elif b["scope"] == "supervision":
                which = " AND purpose = 'supervision'"
            elif b["scope"] == "board" and own_scope(tx, b["ref"]):
                which = " AND COALESCE(purpose, '') <> 'supervision'"
            limit = float(b[LIMIT_OF[metric]])
            reason = (f"{scope_name(b)} is spent: {metric} {amount(metric, spent[metric])} of "
                      f"{amount(metric, limit)}; stopped")
            where = f"({col} = :r{which})" if b["scope"] == "task" else f"{col} = :r{which}"
            for r in tx.all(f"SELECT id, board, current_run_id, worker_pid FROM tasks WHERE {where} "
                            "AND status = 'running'", {"r": b["ref"]}):
                out.setdefault(r["id"], {**r, "reason": reason})
        return list(out.values())
    return db.read(_r)


def _stop_run(tx: Tx, board: str, task_id: str, run_id: int, reason: str) -> bool:
    task = tx.one("SELECT * FROM tasks WHERE id = :t AND board = :b", {"t": task_id, "b": board})
    if task is None or task["status"] != states.RUNNING or task["current_run_id"] != run_id:
        return False
    now = time.time()
    closed = tx.one("UPDATE task_runs SET status = 'closed', outcome = 'blocked', ended_at = :now, error = :e "
                    "WHERE id = :r AND status = 'open'" + CLOSED_RUN, {"now": now, "e": reason, "r": run_id})
    account_run_in(tx, closed, task=task, actor="dispatcher")
    tx.execute(
        "UPDATE tasks SET status = 'blocked', block_kind = 'budget', block_reason = :r, current_run_id = NULL, "
        "claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, worker_host = NULL, last_outcome = 'blocked', "
        "updated_at = :now WHERE id = :id", {"r": reason, "now": now, "id": task_id})
    tx.event(board, task_id, "blocked", {"reason": reason, "kind": "budget", "stopped": True}, run_id=run_id,
             actor="dispatcher", at=now)
    hooks.budget_blocked(tx, board, task_id, "dispatcher")
    return True


def stop_run(db: Database, board: str, task_id: str, run_id: int, reason: str) -> bool:
    """Close the run of a worker stopped for its budget and block its task with kind ``budget``
    (False when the run is no longer current)."""
    return db.write(_stop_run, board, task_id, run_id, reason)
