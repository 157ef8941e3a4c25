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
    RUN_AT,
    RUN_COST,
    RUN_COUNTED,
    RUN_PENDING,
    RUN_RUNTIME,
    RUN_TOKENS,
    _check_in,
    _for_task,
    _matching,
    _ratio,
    account_run_in,
    attempts_spend_in,
    open_in_scope,
    open_runs_in,
    open_runtime_in,
    so_far,
    spend_in,
    totals_in,
)
from .scopes import (
    _SCOPE_COL,
    EXPECTED_RUNS,
    LIMIT_OF,
    METRICS,
    WARN_AT,
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


#: whether a run's usage is still to come (:data:`RUN_PENDING`, for :data:`PENDING_FOR` seconds
#: after it closed: ``:since``)
_USAGE_TO_COME = f"CASE WHEN {RUN_PENDING} AND {RUN_AT} > :since THEN 1 ELSE 0 END"
_RECENT_COLS = (f"r.id, {RUN_RUNTIME} AS runtime, {RUN_TOKENS} AS tokens, {RUN_COST} AS cost_usd, "
                f"{_USAGE_TO_COME} AS to_come")
#: the last runs of profile ``:p`` that spent, newest first: its own (``ix_runs_profile``) and
#: those without a profile on a task it is assigned (an LLM review counts against the task's)
_RECENT_RUNS = (
    f"SELECT runtime, tokens, cost_usd, to_come FROM (SELECT * FROM (SELECT {_RECENT_COLS} FROM task_runs r "
    f"WHERE r.profile = :p AND {RUN_COUNTED} ORDER BY r.id DESC LIMIT {EXPECTED_RUNS}) own UNION ALL "
    f"SELECT * FROM (SELECT {_RECENT_COLS} FROM task_runs r JOIN tasks t ON t.id = r.task_id "
    f"WHERE r.profile IS NULL AND t.assignee = :p AND {RUN_COUNTED} ORDER BY r.id DESC LIMIT {EXPECTED_RUNS}) "
    f"assigned) recent ORDER BY id DESC LIMIT {EXPECTED_RUNS}"
)


def _expected(tx: Tx, profile: str | None, now: float) -> tuple[dict[str, float], str, set[str]]:
    """:func:`expected_in`, and the metrics whose expected spend is unknown: tokens and cost
    while the profile has no run whose usage is known (closed, its worker's exit recorded) —
    cost not when its ``expected_cost`` is configured."""
    out = {"runs": 1.0, "runtime": 0.0, "tokens": 0.0, "cost": 0.0}
    if not profile:
        return out, "no profile", set()
    rows = tx.all(_RECENT_RUNS, {"p": profile, "since": now - PENDING_FOR})
    source = f"the median of the last {len(rows)} runs of profile {profile!r}" if rows else "no runs yet"
    # a run whose usage is still to come spent 0 so far: its tokens and cost are not what it cost
    known = [r for r in rows if not r["to_come"]]
    unknown = set() if known else {"tokens", "cost"}
    if rows:
        out["runtime"] = float(statistics.median(float(r["runtime"] or 0) for r in rows))
    if known:
        out["tokens"] = float(statistics.median(float(r["tokens"] or 0) for r in known))
        out["cost"] = float(statistics.median(float(r["cost_usd"] or 0) for r in known))
        if len(known) < len(rows):
            source = f"the median of the last {len(known)} runs of profile {profile!r} whose usage is known"
    configured = tx.scalar("SELECT expected_cost FROM budgets WHERE scope = 'profile' AND ref = :p", {"p": profile})
    if configured is not None:
        out["cost"] = float(configured)
        source = f"the expected_cost configured for profile {profile!r}"
        unknown.discard("cost")
    return out, source, unknown


def expected_in(tx: Tx, profile: str | None) -> tuple[dict[str, float], str]:
    """The expected spend of one run of ``profile`` per metric, and where it comes from: the
    configured ``expected_cost`` of the profile's budget, else the median of its recent runs
    (for tokens and cost, of those whose usage is known)."""
    out, source, _ = _expected(tx, profile, time.time())
    return out, source


def _unknown_reason(b: Row, m: str, profile: str | None, waiting: int) -> str:
    """Why a run is refused while one is under way in a scope with a ``m`` limit and the expected
    ``m`` of one run of ``profile`` is unknown."""
    how = (f"give it with `agentboard budget set --profile {profile} --expected-cost USD` to start more at once"
           if m == "cost" else "then the median of its runs is expected")
    return (f"{scope_name(b)} starts one run at a time while the {m} of a run is unknown: profile {profile!r} has "
            f"no run whose usage is known{' and no expected_cost' if m == 'cost' else ''}, and {waiting} "
            f"{'is' if waiting == 1 else 'are'} under way; the next starts once a run has closed with its "
            f"usage ({how})")


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
    expected: tuple[dict[str, float], str, set[str]] | None = None
    pending_rows: list[Row] | None = None
    for b in budgets:
        spent = spend_in(tx, b["scope"], b["ref"], b["per"], now)
        # what the runs under way spent so far counts against a runtime limit (and is at least
        # what is reserved for them)
        so_far = open_runtime_in(tx, b["scope"], b["ref"], now) if b.get("max_runtime") is not None else 0.0
        flying = _in_flight(tx, b["scope"], b["ref"]) + sum(1 for t in also or () if _in_scope(b["scope"], b["ref"], t))
        unknown = None  # closed runs whose usage is still to come count like runs under way for tokens and cost
        for m in METRICS:
            limit = b.get(LIMIT_OF[m])
            if limit is None:
                continue
            limit = float(limit)
            now_spent = spent[m] + (so_far if m == "runtime" else 0.0)
            if now_spent >= limit:
                over = now_spent - limit
                return (f"{scope_name(b)} is spent: {m} {amount(m, now_spent)} of {amount(m, limit)}"
                        + (f" (over by {amount(m, over)})" if over > 0 else "")
                        + f"; raise it with `agentboard budget set --{b['scope']} {b['ref']} --max-{m} ...`")
            if m == "runs":
                need, source = 1.0, "one run"
            else:
                if expected is None:
                    expected = _expected(tx, task.get("assignee"), now)
                need, source = expected[0][m], expected[1]
            waiting = flying
            blind = m in expected[2] if expected is not None and m != "runs" else False
            if m in ("tokens", "cost") and (need > 0 or blind):
                if pending_rows is None:
                    pending_rows = _pending_rows(tx, now)
                if unknown is None:
                    unknown = _pending(pending_rows, b["scope"], b["ref"])
                waiting += unknown
            if blind:  # nothing tells what a run spends: one at a time, until one has closed with its usage
                if waiting:
                    return _unknown_reason(b, m, task.get("assignee"), waiting)
                continue
            held = waiting * need
            if m == "runtime":
                held = max(held, so_far)
            remaining = limit - spent[m] - held
            if need > 0 and remaining < need:
                under_way = f", {waiting} under way" if waiting else ""
                return (f"{scope_name(b)} cannot afford another run: {m} {amount(m, now_spent)} of "
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
        spent = spend_in(tx, b["scope"], b["ref"], b["per"], now, running=b.get("max_runtime") is not None)
        ratio, metric = _ratio(b, spent)
        if metric is not None and ratio >= 1.0:
            limit = float(b[LIMIT_OF[metric]])
            return (f"{scope_name(b)} is spent: {metric} {amount(metric, spent[metric])} of {amount(metric, limit)}; "
                    "stop now")
    return None


def running_over_budget(db: Database) -> list[Row]:
    """Running tasks one of whose budgets is spent: ``id``, ``board``, ``current_run_id``, ``reason``
    (the dispatcher stops them after a grace period)."""
    return running_over(db)[0]


def running_over(db: Database) -> tuple[list[Row], float | None]:
    """:func:`running_over_budget`, counting what the runs under way spent so far against the
    runtime limits, and when the runs under way next pass a runtime limit (None: none will).

    One statement reads the budgets; with a runtime limit among them, one more reads every run
    under way (through the partial index of running tasks); one more the running totals of the
    budgets spent in their window or with a run under way in their scope (the others are not
    looked at). A runtime limit the runs under way reached
    (or 80% of it) is marked as the close of a run marks it — its ``budget_exhausted`` (or
    ``budget_warning``) event, and the heartbeats of its workers told to stop — in a transaction
    of its own, only then."""
    def _r(tx: Tx) -> tuple[list[Row], float | None, list[Row]]:
        out: dict[str, Row] = {}
        now = time.time()
        due: float | None = None
        to_mark: list[Row] = []
        found = tx.all("SELECT * FROM budgets WHERE exhausted_window IS NOT NULL OR max_runtime IS NOT NULL")
        runs = open_runs_in(tx) if any(b.get("max_runtime") is not None for b in found) else []
        looked: list[tuple[Row, str, list[Row]]] = []
        for b in found:
            key, _ = window(b["per"], now)
            mine = open_in_scope(tx, b["scope"], b["ref"], runs) if b.get("max_runtime") is not None else []
            if b["exhausted_window"] == key or mine:  # spent in this window, or spending runtime now
                looked.append((b, key, mine))
        # their running totals in one statement; a race's task budget adds what its attempts spent
        sums = totals_in(tx, [(b["scope"], b["ref"], key) for b, key, _ in looked])
        for b, key, mine in looked:
            totals = dict(sums[(b["scope"], b["ref"], key)])
            if b["scope"] == "task" and (b["exhausted_window"] == key
                                         or any(r.get("race_of") == b["ref"] for r in mine)):
                for m, v in attempts_spend_in(tx, b["ref"]).items():
                    totals[m] += v
            totals["runtime"] += so_far(mine, now)
            ratio, metric = _ratio(b, totals)
            if mine:
                limit_rt = float(b["max_runtime"])
                if totals["runtime"] < limit_rt:  # the runs under way pass it then
                    at = now + (limit_rt - totals["runtime"]) / len(mine)
                    due = at if due is None else min(due, at)
                if (ratio >= 1.0 and b["exhausted_window"] != key) or (
                        WARN_AT <= ratio < 1.0 and b.get("warned_window") != key):
                    to_mark.append({**b, "run_board": mine[0]["board"]})
            if metric is None or ratio < 1.0:
                continue
            for r in _running_in(tx, b):
                out.setdefault(r["id"], {**r, "reason": (
                    f"{scope_name(b)} is spent: {metric} {amount(metric, totals[metric])} of "
                    f"{amount(metric, float(b[LIMIT_OF[metric]]))}; stopped")})
        return list(out.values()), due, to_mark
    over, due, to_mark = db.read(_r)
    if to_mark:
        db.write(_mark_in, to_mark)
    return over, due


def _running_in(tx: Tx, b: Row) -> list[Row]:
    """The running tasks of budget ``b``'s scope (a race's attempts for a race's task budget)."""
    col = {"task": "id", "goal": "goal_id", "board": "board", "profile": "assignee",
           "supervision": "board"}[b["scope"]]
    which = ""
    if b["scope"] == "task":  # a race's task budget: its attempts are the tasks that run
        which = " OR race_of = :r"
    elif b["scope"] == "supervision":
        which = " AND purpose = 'supervision'"
    elif b["scope"] == "board" and own_scope(tx, b["ref"]):
        which = " AND COALESCE(purpose, '') <> 'supervision'"
    where = f"({col} = :r{which})" if b["scope"] == "task" else f"{col} = :r{which}"
    return tx.all(f"SELECT id, board, current_run_id, worker_pid FROM tasks WHERE {where} AND status = 'running'",
                  {"r": b["ref"]})


def _mark_in(tx: Tx, marks: list[Row]) -> None:
    """Runtime limits the runs under way reached (or 80% of them): their events and windows
    marked, as when a run's close passes them (read again: another dispatcher may have)."""
    for m in marks:
        b = tx.one("SELECT * FROM budgets WHERE id = :id", {"id": m["id"]})
        if b is not None:
            _check_in(tx, [b], b.get("board") or m["run_board"], b["ref"] if b["scope"] == "task" else None,
                      None, time.time(), actor="dispatcher")


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
