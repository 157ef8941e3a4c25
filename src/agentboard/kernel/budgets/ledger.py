"""What was spent: a closed run's usage, read from its row of ``task_runs``, and the ``budget_usage``
ledger of what is not a run (an LLM helper call); reading what a scope spent (with its running
totals), and counting a closed run or an LLM call, with the warnings and exhaustion it causes.

A run is never written to the ledger: its board, task, profile, start and end, tokens and cost
are on its own row already. The ledger holds the LLM calls and, while a budget covers a run
closed before its worker's exit was recorded, that run's ``pending`` marker (no spend: the gate
reserves the expected cost of one run for it until the exit brings its usage)."""

from __future__ import annotations

import time
from typing import Any

from ...domain.errors import InvalidInput
from ...store.engine import Database, Row, Tx, in_list
from .. import hooks
from .scopes import (
    LIMIT_OF,
    METRICS,
    PERS,
    SUPERVISION,
    WARN_AT,
    _supervised,
    amount,
    own_scope,
    scope_name,
    window,
)

# -- reading spend -----------------------------------------------------------------------------


def spend_in(tx: Tx, scope: str, ref: str, per: str, now: float | None = None, *,
             running: bool | list[Row] = False) -> dict[str, float]:
    """What budgeted scope ``ref`` spent in its current window: runs, runtime, tokens, cost (one
    row of ``budget_totals``, kept with the ledger). A task's budget also covers what its race's
    attempts spent, if it is a race (:func:`attempts_spend_in`). ``running``: the runtime of the
    scope's runs under way so far counts too (:func:`open_runtime_in`; a list: all the runs under
    way, as :func:`open_runs_in` read them, instead of reading the scope's)."""
    now = time.time() if now is None else now
    key, _ = window(per, now)
    row = tx.one("SELECT runs, runtime, tokens, cost_usd AS cost FROM budget_totals "
                 "WHERE scope = :s AND ref = :r AND win = :w", {"s": scope, "r": ref, "w": key}) or {}
    out = {m: float(row.get(m) or 0) for m in METRICS}
    if scope == "task":
        for m, v in attempts_spend_in(tx, ref).items():
            out[m] += v
    if running is not False:
        out["runtime"] += open_runtime_in(tx, scope, ref, now, None if running is True else running)
    return out


def totals_in(tx: Tx, keys: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], dict[str, float]]:
    """The running totals of budgets (scope, ref, window key) in one statement — without what a
    race's attempts spent (:func:`spend_in` adds it)."""
    if not keys:
        return {}
    params: dict[str, Any] = {}
    sql = ("SELECT scope, ref, win, runs, runtime, tokens, cost_usd AS cost FROM budget_totals WHERE scope IN "
           + in_list("s", sorted({k[0] for k in keys}), params) + " AND ref IN "
           + in_list("r", sorted({k[1] for k in keys}), params) + " AND win IN "
           + in_list("w", sorted({k[2] for k in keys}), params))
    rows = {(r["scope"], r["ref"], r["win"]): r for r in tx.all(sql, params)}
    return {k: {m: float((rows.get(k) or {}).get(m) or 0) for m in METRICS} for k in keys}


# -- runs under way ------------------------------------------------------------------------------
#
# A run's runtime is on its row once it closed (``budget_totals`` has it then); while it runs, what
# it spent so far is ``now - started_at``. The runs under way are each running task's current run
# and each open review run: found through the partial index of running tasks and the tasks in
# review, then their run by its key — never by reading the runs.

_OPEN_COLS = ("SELECT r.id, r.task_id, t.board, t.goal_id, COALESCE(r.profile, t.assignee) AS profile, "
              "t.purpose, t.race_of, r.started_at FROM tasks t{hint} JOIN task_runs r ON ")
#: the claim lock of a review run (``kernel.runs.REVIEW_CLAIM``, which imports this package)
_REVIEW_LOCK = "review:%"
#: the predicate of ``ix_tasks_waiting`` (``store.engine.WAITING``), written out: SQLite uses a
#: partial index only for a query that says it
_WAITING = "(t.status IN ('review', 'triage') OR (t.status = 'running' AND t.race_until IS NOT NULL))"
#: the runs under way (``{scope}``: a filter of the scope's, with ``:ref``; ``{hint}``: the
#: index the tasks in review are found through on SQLite when the scope has no index of its own,
#: whose planner would otherwise read every run with an empty or young statistics table)
_OPEN_RUNS = (
    _OPEN_COLS.format(hint="") + "r.id = t.current_run_id WHERE t.status = 'running' AND t.race_until IS NULL "
    "AND r.status = 'open'{scope} UNION ALL "
    + _OPEN_COLS + f"r.task_id = t.id WHERE t.status = 'review' AND {_WAITING} AND r.status = 'open' "
    "AND r.claim_lock LIKE :rv{scope}"
)
#: (a goal's through the running tasks, not the goal's index, which holds all its tasks)
_OPEN_SCOPE = {"task": " AND (t.id = :ref OR t.race_of = :ref)", "goal": " AND COALESCE(t.goal_id, '') = :ref",
               "profile": " AND COALESCE(r.profile, t.assignee) = :ref",
               "supervision": " AND t.board = :ref AND t.purpose = 'supervision'", "board": " AND t.board = :ref"}


def open_runs_in(tx: Tx, scope: str | None = None, ref: str | None = None) -> list[Row]:
    """The runs under way (one statement), or those of budgeted scope ``ref``: ``id``,
    ``task_id``, ``board``, ``goal_id``, ``profile``, ``purpose``, ``race_of``, ``started_at``."""
    where = "" if scope is None else _OPEN_SCOPE[scope]
    hint = " INDEXED BY ix_tasks_waiting" if scope in (None, "profile", "goal") and tx.db.dialect == "sqlite" else ""
    return tx.all(_OPEN_RUNS.replace("{hint}", hint).format(scope=where),
                  {"ref": ref, "rv": _REVIEW_LOCK} if scope is not None else {"rv": _REVIEW_LOCK})


def _open_counts(scope: str, ref: str, run: Row, own: bool) -> bool:
    """Whether run under way ``run`` counts against budgeted scope ``ref`` (as its close will;
    ``own``: a board's supervision counts against its own budget, :func:`own_scope`)."""
    if scope == "task":
        return ref in (run["task_id"], run.get("race_of"))
    if scope == "goal":
        return bool(run.get("goal_id")) and run["goal_id"] == ref
    if scope == "profile":
        return bool(run.get("profile")) and run["profile"] == ref
    if run["board"] != ref:
        return False
    if scope == "supervision":
        return run.get("purpose") == SUPERVISION
    return run.get("purpose") != SUPERVISION or not own


def open_in_scope(tx: Tx, scope: str, ref: str, runs: list[Row] | None = None) -> list[Row]:
    """The runs under way of budgeted scope ``ref``. ``runs``: every run under way
    (:func:`open_runs_in`), read once by the caller (else the scope's are read)."""
    runs = open_runs_in(tx, scope, ref) if runs is None else runs
    # whether the board's supervision counts against its own budget: read only when it runs
    own = scope != "board" or not any(r["board"] == ref and r.get("purpose") == SUPERVISION for r in runs) \
        or own_scope(tx, ref)
    return [r for r in runs if _open_counts(scope, ref, r, own)]


def open_runtime_in(tx: Tx, scope: str, ref: str, now: float, runs: list[Row] | None = None) -> float:
    """What the runs under way of budgeted scope ``ref`` spent so far (seconds; ``runs``: as
    :func:`open_in_scope` takes them)."""
    return so_far(open_in_scope(tx, scope, ref, runs), now)


def so_far(runs: list[Row], now: float) -> float:
    """The runtime of runs under way at ``now``."""
    return sum(max(now - float(r["started_at"] or now), 0.0) for r in runs)


#: the attempts of race ``:ref`` (none for a task that is no race: found through ``ix_tasks_race_of``)
_ATTEMPTS_OF = "SELECT id FROM tasks WHERE race_of = :ref"


def attempts_spend_in(tx: Tx, race: str) -> dict[str, float]:
    """What the attempts of race ``race`` spent (their runs and LLM calls), which its task budget
    covers: each attempt is a task of its own, whose runs are not in the race's running totals
    (nothing tells a run's close it counts against its race's task budget), so they are summed
    here from their rows — a few tasks, their runs found by task. A task budget has no window."""
    rows = tx.all(
        f"SELECT {_RUN_SUMS} FROM task_runs r WHERE r.task_id IN ({_ATTEMPTS_OF}) AND {RUN_COUNTED} "
        f"UNION ALL SELECT {_LEDGER_SUMS} FROM budget_usage u WHERE u.task_id IN ({_ATTEMPTS_OF}) "
        f"AND {_NOT_A_RUN}", {"ref": race})
    return {m: sum(float(r.get(m) or 0) for r in rows) for m in METRICS}


def check_race_in(tx: Tx, board: str, race: str, *, actor: str | None = "dispatcher") -> None:
    """Check race ``race``'s task budget against what it and its attempts spent (the warning,
    the exhaustion that stops its running attempts): a settle of the race does it each pass, as
    the runs of its attempts close."""
    found = tx.all("SELECT * FROM budgets WHERE scope = 'task' AND ref = :r", {"r": race})
    if found:
        _check_in(tx, found, board, race, None, time.time(), actor=actor)


#: the rows (of runs ``r``, or of the ledger ``u``) of a board's supervision tasks
_SUPERVISION_ROWS = "task_id IN (SELECT id FROM tasks WHERE board = :ref AND purpose = 'supervision')"

# A closed run's spend, read from its row (``task_runs r``, its task ``t`` LEFT JOINed where a
# scope needs it): one run, its runtime, its tokens and cost, at the moment it closed; against its
# task, the task's goal, its board and the profile that ran it (the task's assignee for a run
# without one: an LLM review). Synthetic runs (a person closing a task no worker ran) spend nothing.
RUN_AT = "COALESCE(r.ended_at, r.started_at)"
RUN_RUNTIME = "CASE WHEN r.ended_at > r.started_at THEN r.ended_at - r.started_at ELSE 0 END"
RUN_TOKENS = "COALESCE(r.input_tokens, 0) + COALESCE(r.output_tokens, 0)"
RUN_COST = "COALESCE(r.cost_usd, 0)"
#: the runs that spent (closed, not synthetic)
RUN_COUNTED = "r.status = 'closed' AND r.synthetic = 0"
#: a counted run whose worker's exit is not recorded yet (its usage may still come)
RUN_PENDING = "r.exit_code IS NULL AND r.worker_pid IS NOT NULL"
#: the sums of the runs a statement selects, as the ledger's columns
_RUN_SUMS = (f"COUNT(*) AS runs, COALESCE(SUM({RUN_RUNTIME}), 0) AS runtime, COALESCE(SUM({RUN_TOKENS}), 0) "
             f"AS tokens, COALESCE(SUM({RUN_COST}), 0) AS cost")
_LEDGER_SUMS = ("COALESCE(SUM(u.runs), 0) AS runs, COALESCE(SUM(u.runtime), 0) AS runtime, "
                "COALESCE(SUM(u.tokens), 0) AS tokens, COALESCE(SUM(u.cost_usd), 0) AS cost")
#: the ledger rows that are not a run's: a run's row as the ledger held them before migration 0024
#: (in a dump of an older schema imported since) is counted from the run's own row instead
_NOT_A_RUN = "u.source <> 'run'"


def _scope_filters(tx: Tx, scope: str, ref: str) -> tuple[str, str, bool]:
    """What counts against budgeted scope ``ref`` (``:ref``): the filter of its runs (``r``), the
    filter of its ledger rows (``u``), and whether the runs' filter reads their task (``t``)."""
    if scope == "task":
        return "r.task_id = :ref", "u.task_id = :ref", False
    if scope == "goal":
        return "t.goal_id = :ref", "u.goal_id = :ref", True
    if scope == "profile":
        return "(r.profile = :ref OR (r.profile IS NULL AND t.assignee = :ref))", "u.profile = :ref", True
    if scope == "supervision":
        return f"r.board = :ref AND r.{_SUPERVISION_ROWS}", f"u.board = :ref AND u.{_SUPERVISION_ROWS}", False
    if own_scope(tx, ref):  # the board's work, without its supervision
        return (f"r.board = :ref AND NOT r.{_SUPERVISION_ROWS}",
                f"u.board = :ref AND (u.task_id IS NULL OR NOT u.{_SUPERVISION_ROWS})", False)
    return "r.board = :ref", "u.board = :ref", False


def _runs_from(joined: bool) -> str:
    return "task_runs r LEFT JOIN tasks t ON t.id = r.task_id" if joined else "task_runs r"


def _rebuild_totals(tx: Tx, scope: str, ref: str, per: str, now: float) -> None:
    """A budget set or changed: its current window's total summed once from the runs (every
    run closed in the window, budgeted then or not) and the ledger; the runs of its scope whose
    usage is still to come get their ``pending`` markers."""
    key, start = window(per, now)
    runs_where, ledger_where, joined = _scope_filters(tx, scope, ref)
    params = {"ref": ref, "start": start}
    spent = [tx.one(f"SELECT {_RUN_SUMS} FROM {_runs_from(joined)} WHERE {RUN_COUNTED} AND {RUN_AT} >= :start "
                    f"AND {runs_where}", params) or {},
             tx.one(f"SELECT {_LEDGER_SUMS} FROM budget_usage u WHERE u.at >= :start AND {_NOT_A_RUN} "
                    f"AND {ledger_where}", params) or {}]
    tx.execute("DELETE FROM budget_totals WHERE scope = :s AND ref = :r", {"s": scope, "r": ref})
    tx.execute(
        "INSERT INTO budget_totals (scope, ref, win, runs, runtime, tokens, cost_usd) "
        "VALUES (:s, :r, :w, :runs, :rt, :tok, :cost)",
        {"s": scope, "r": ref, "w": key, "runs": int(sum(float(x.get("runs") or 0) for x in spent)),
         "rt": sum(float(x.get("runtime") or 0) for x in spent), "tok": int(sum(float(x.get("tokens") or 0) for x in spent)),
         "cost": sum(float(x.get("cost") or 0) for x in spent)})
    # runs closed before their worker's exit while no budget covered them: the gate counts them now
    tx.execute(
        f"INSERT INTO budget_usage (board, task_id, goal_id, profile, run_id, source, at, pending) "
        f"SELECT r.board, r.task_id, t.goal_id, COALESCE(r.profile, t.assignee), r.id, 'pending', {RUN_AT}, 1 "
        f"FROM task_runs r LEFT JOIN tasks t ON t.id = r.task_id WHERE {RUN_COUNTED} AND {RUN_PENDING} "
        f"AND {RUN_AT} > :since AND {runs_where} AND NOT EXISTS (SELECT 1 FROM budget_usage m "
        "WHERE m.task_id = r.task_id AND m.run_id = r.id AND m.pending = 1)",
        {"ref": ref, "since": now - PENDING_FOR})


def rebuild_board_in(tx: Tx, board: str) -> None:
    """The board's ``supervision_budget`` setting changed: its board and supervision budgets'
    totals summed again under the new rule."""
    now = time.time()
    for b in tx.all("SELECT scope, ref, per FROM budgets WHERE scope IN ('board', 'supervision') AND ref = :r",
                    {"r": board}):
        _rebuild_totals(tx, b["scope"], b["ref"], b["per"], now)


_ADD_TOTAL = (
    "INSERT INTO budget_totals (scope, ref, win, runs, runtime, tokens, cost_usd) "
    "VALUES (:s, :r, :w, :runs, :rt, :tok, :cost) ON CONFLICT (scope, ref, win) DO UPDATE SET "
    "runs = budget_totals.runs + excluded.runs, runtime = budget_totals.runtime + excluded.runtime, "
    "tokens = budget_totals.tokens + excluded.tokens, cost_usd = budget_totals.cost_usd + excluded.cost_usd"
)


def _add_totals(tx: Tx, budgets: list[Row], at: float, runs: int, runtime: float, tokens: int, cost: float) -> None:
    """Add one ledger row's spend to the totals of the budgets it counts against."""
    if not budgets or not (runs or runtime or tokens or cost):
        return
    tx.executemany(_ADD_TOTAL, [
        {"s": b["scope"], "r": b["ref"], "w": window(b["per"], at)[0], "runs": int(runs), "rt": float(runtime),
         "tok": int(tokens), "cost": float(cost)} for b in budgets])


def _ratio(b: Row, spent: dict[str, float]) -> tuple[float, str | None]:
    """The highest share of a limit spent and its metric (0, None without limits)."""
    best, metric = 0.0, None
    for m in METRICS:
        limit = b.get(LIMIT_OF[m])
        if limit is None:
            continue
        r = spent[m] / float(limit) if float(limit) > 0 else (1.0 if spent[m] >= 0 else 0.0)
        if metric is None or r > best:
            best, metric = r, m
    return best, metric


def _for_task(tx: Tx, task_id: str, profile: str | None = None) -> list[Row]:
    """The budgets a task counts against (its own — and its race's, for a race's attempt —, its
    goal's, its board's — or its board's supervision budget —, its profile's)."""
    row = tx.one("SELECT id, board, goal_id, assignee, purpose FROM tasks WHERE id = :t", {"t": task_id})
    if row is None:
        return []
    return _matching(tx, task_id, row["goal_id"], row["board"], profile or row["assignee"], purpose=row["purpose"],
                     known=True, races=True)


def _matching(tx: Tx, task_id: str | None, goal_id: str | None, board: str | None, profile: str | None,
              *, purpose: str | None = None, known: bool = False, facts: Row | None = None,
              races: bool = False) -> list[Row]:
    """The budgets a run of ``task_id`` counts against. ``purpose``: the task's, when the caller
    has it (``known``); else it is read only if the board has a board or supervision budget.
    ``facts``: gets ``supervised`` (whether the run counts against the supervision budget) when
    the board has either, and ``race_of`` (the race it is an attempt of) when its race has a
    budget. ``races``: a race's attempt also counts against its race's task budget — which the
    gate and the stop checks read, while its running total is not added to (what the attempts
    spent is summed with it when it is read, :func:`spend_in`)."""
    params: dict[str, Any] = {}
    ors = []
    for scope, ref in (("task", task_id), ("goal", goal_id), ("profile", profile)):
        if ref:
            params[scope] = ref
            ors.append(f"(scope = '{scope}' AND ref = :{scope})")
    if races and task_id:
        ors.append("(scope = 'task' AND ref = (SELECT race_of FROM tasks WHERE id = :task))")
    if board:
        params["board"] = board
        ors.append("(scope IN ('board', 'supervision') AND ref = :board)")
    if not ors:
        return []
    rows = tx.all("SELECT * FROM budgets WHERE " + " OR ".join(ors), params)
    if races and facts is not None:
        race = next((r["ref"] for r in rows if r["scope"] == "task" and r["ref"] != task_id), None)
        if race is not None:
            facts["race_of"] = race
    if any(r["scope"] in ("board", "supervision") for r in rows):
        sup = _supervised(tx, task_id, board, purpose, known)
        rows = [r for r in rows if r["scope"] != ("board" if sup else "supervision")]
        if facts is not None:
            facts["supervised"] = sup
    return rows


def _split_in(tx: Tx, board: str, since: float) -> dict[str, dict[str, float]]:
    """What the board's work and its supervision spent since ``since``: its runs closed since
    then and its ledger rows (LLM calls)."""
    spender = ("CASE WHEN {a}.task_id IN (SELECT id FROM tasks WHERE board = :b AND purpose = 'supervision') "
               "THEN 'supervision' ELSE 'work' END AS spender")
    params = {"b": board, "since": since}
    rows = tx.all(f"SELECT {spender.format(a='r')}, {_RUN_SUMS} FROM task_runs r WHERE r.board = :b AND "
                  f"{RUN_COUNTED} AND {RUN_AT} >= :since GROUP BY 1", params)
    rows += tx.all(f"SELECT {spender.format(a='u')}, {_LEDGER_SUMS} FROM budget_usage u WHERE u.board = :b "
                   f"AND u.at >= :since AND {_NOT_A_RUN} GROUP BY 1", params)
    out = {k: {m: 0.0 for m in METRICS} for k in ("work", "supervision")}
    for r in rows:
        into = out[str(r["spender"])]
        for m in METRICS:
            into[m] += float(r[m] or 0)
    return out


def _split_out(split: dict[str, dict[str, float]]) -> dict[str, Row]:
    return {k: {"spent": v, "text": ", ".join(amount(m, v[m]) for m in METRICS if m != "runtime" or v[m])}
            for k, v in split.items()}


def spending(db: Database, board: str, *, per: str = "") -> Row:
    """What spent what on a board in a window (``per``: ``""`` everything, ``day``, ``month``):
    its work and its supervision (the runs of its supervision tasks), and which budget each
    counts against."""
    if per not in PERS:
        raise InvalidInput(f"invalid window {per!r}: use day or month (or leave it out for no window)")

    def _r(tx: Tx) -> Row:
        now = time.time()
        key, start = window(per, now)
        own = own_scope(tx, board)
        return {"board": board, "window": key if per else None, "supervision_budget": own,
                "supervision_counts_against": "supervision" if own else "board",
                **_split_out(_split_in(tx, board, start))}
    return db.read(_r)


def _budget_out(tx: Tx, b: Row, now: float) -> Row:
    spent = spend_in(tx, b["scope"], b["ref"], b["per"], now, running=True)
    key, start = window(b["per"], now)
    ratio, metric = _ratio(b, spent)
    lines = {}
    for m in METRICS:
        limit = b.get(LIMIT_OF[m])
        lines[m] = {"spent": spent[m], "limit": float(limit) if limit is not None else None,
                    "ratio": (spent[m] / float(limit) if limit else (1.0 if limit == 0 else None)),
                    "text": amount(m, spent[m]) + (f" / {amount(m, float(limit))}" if limit is not None else "")}
    return {"scope": b["scope"], "ref": b["ref"], "board": b.get("board"), "per": b["per"] or None,
            "window": key if b["per"] else None, "window_start": start if b["per"] else None,
            "max_runs": b.get("max_runs"), "max_runtime": b.get("max_runtime"), "max_tokens": b.get("max_tokens"),
            "max_cost": b.get("max_cost"), "expected_cost": b.get("expected_cost"),
            "spent": spent, "lines": lines, "ratio": ratio, "metric": metric,
            "exhausted": metric is not None and ratio >= 1.0,
            "warning": metric is not None and WARN_AT <= ratio < 1.0,
            "updated_at": b.get("updated_at"),
            # what counts against it: a board's budget without its supervision (by default), and
            # what the board's work and its supervision spent in the window
            **(_board_facts(tx, b, start) if b["scope"] in ("board", "supervision") else {})}


def _board_facts(tx: Tx, b: Row, start: float) -> Row:
    own = own_scope(tx, b["ref"])
    if b["scope"] == "board":
        counts = "work" if own else "work and supervision"
    else:
        counts = "supervision" if own else "nothing (the board's supervision_budget setting is off)"
    return {"counts": counts,
            "by": _split_out(_split_in(tx, b["ref"], start))}

# -- accounting ----------------------------------------------------------------------------------


#: a closed run whose worker's exit is not processed after this many seconds no longer counts as
#: a run whose usage is still to come
PENDING_FOR = 600.0

#: what a statement closing a run (``UPDATE task_runs SET status = 'closed' ... WHERE ... AND
#: status = 'open'``) returns for :func:`account_run_in`: the run's facts. No row: the statement
#: closed nothing, and nothing is counted.
CLOSED_RUN_FACTS = (
    " RETURNING id, task_id, board, profile, started_at, ended_at, input_tokens, output_tokens, cost_usd, "
    "exit_code, worker_pid, synthetic"
)
#: :data:`CLOSED_RUN_FACTS` and, in the same statement, whether any budget may cover the run (a
#: profile budget counts as one): without one, no budget is looked up
CLOSED_RUN = (
    CLOSED_RUN_FACTS + ", EXISTS (SELECT 1 FROM budgets b WHERE (b.scope = 'task' AND b.ref = task_runs.task_id) "
    "OR (b.scope IN ('board', 'supervision') AND b.ref = task_runs.board) OR b.scope = 'profile' "
    "OR (b.scope = 'goal' AND b.ref = (SELECT g.goal_id FROM tasks g WHERE g.id = task_runs.task_id))) AS budget_hint"
)


def run_spend(closed: Row, task: Row | None) -> Row:
    """A closed run's spend (``closed``: its row as :data:`CLOSED_RUN` returns it) at the moment
    it closed, with the scopes it counts against (``task``: its task's ``goal_id`` and
    ``assignee``) and whether its usage is still to come (``pending``)."""
    started, ended = float(closed.get("started_at") or 0), closed.get("ended_at")
    end = float(ended) if ended is not None else started
    return {"board": closed["board"], "task_id": closed["task_id"], "goal_id": (task or {}).get("goal_id"),
            "profile": closed.get("profile") or (task or {}).get("assignee"), "at": end, "runs": 1,
            "runtime": end - started if end > started else 0.0,
            "tokens": int(closed.get("input_tokens") or 0) + int(closed.get("output_tokens") or 0),
            "cost_usd": float(closed.get("cost_usd") or 0),
            "pending": closed.get("exit_code") is None and closed.get("worker_pid") is not None}


def account_run_in(tx: Tx, closed: Row | None, *, task: Row | None = None, actor: str | None = None,
                   budgeted: bool | None = None, done: bool = False) -> bool:
    """Count a run that was just closed against its scopes, and check their budgets. ``closed``:
    what the statement that closed it returned (:data:`CLOSED_RUN`; None when it closed nothing).
    ``task``: its task's row, when the caller has it (else read when a budget may apply).
    ``budgeted=False``: the caller knows no budget covers it (None: the statement's hint says).
    ``done``: the run's close made its task done (the rollups count both at once). True when the
    run counted now (the ``run_closed`` hook then fired for it)."""
    if closed is None or closed.get("synthetic"):
        return False
    run_id = int(closed["id"])
    # the statement closed the run: it counts once, as do the rollups
    hooks.run_closed(tx, run_id, done=done)
    if budgeted is None:
        hint = closed.get("budget_hint")
        budgeted = hint is None or bool(hint)
    if budgeted:
        if task is None or "goal_id" not in task or "assignee" not in task:
            task = tx.one("SELECT goal_id, assignee FROM tasks WHERE id = :t", {"t": closed["task_id"]})
        account_row_in(tx, run_spend(closed, task), run_id, time.time(), actor=actor)
    return True


_MARK_PENDING = (
    "INSERT INTO budget_usage (board, task_id, goal_id, profile, run_id, source, at, pending) "
    "VALUES (:b, :t, :g, :p, :r, 'pending', :at, 1)"
)


def account_row_in(tx: Tx, row: Row, run_id: int, now: float, *, actor: str | None = None) -> None:
    """Add a closed run's spend (``board``, ``task_id``, ``goal_id``, ``profile``, ``at``, the
    spend and ``pending``) to the totals of the budgets it counts against, and check them; a
    ``pending`` run (its worker's exit not recorded yet) covered by a budget gets its marker."""
    budgets = _matching(tx, row["task_id"], row["goal_id"], row["board"], row["profile"])
    if budgets:
        _add_totals(tx, budgets, float(row["at"]), int(row["runs"]), float(row["runtime"]), int(row["tokens"]),
                    float(row["cost_usd"]))
        if row.get("pending"):
            tx.execute(_MARK_PENDING, {"b": row["board"], "t": row["task_id"], "g": row["goal_id"],
                                       "p": row["profile"], "r": run_id, "at": float(row["at"])})
        _check_in(tx, budgets, row["board"], row["task_id"], run_id, now, actor=actor)


def run_updated_in(tx: Tx, run_id: int, *, tokens: int = 0, cost_usd: float = 0.0, exited: bool = False) -> None:
    """Facts learned after a run closed (its row of ``task_runs`` has them already): the usage
    its agent printed, added to the totals of the budgets it counts against (checked), and its
    worker's exit (its usage is no longer to come: its ``pending`` marker goes)."""
    if exited:  # a run's marker is found by its task and run (``ix_budget_usage_task_run``)
        tx.execute("DELETE FROM budget_usage WHERE task_id = (SELECT task_id FROM task_runs WHERE id = :r) "
                   "AND run_id = :r AND source = 'pending'", {"r": run_id})
    if not (tokens or cost_usd):
        return
    row = tx.one(f"SELECT r.board, r.task_id, t.goal_id, COALESCE(r.profile, t.assignee) AS profile, {RUN_AT} AS at "
                 f"FROM task_runs r LEFT JOIN tasks t ON t.id = r.task_id WHERE r.id = :r AND {RUN_COUNTED}",
                 {"r": run_id})
    if row is None:
        return
    found = _matching(tx, row["task_id"], row["goal_id"], row["board"], row["profile"])
    if found:
        _add_totals(tx, found, float(row["at"]), 0, 0.0, int(tokens), float(cost_usd))
        _check_in(tx, found, row["board"], row["task_id"], run_id, time.time(), actor="dispatcher")


def account_usage_in(tx: Tx, board: str, task_id: str | None, *, run_id: int | None = None,
                     tokens: int = 0, cost_usd: float = 0.0, source: str = "llm", actor: str | None = None) -> None:
    """Count usage that is not a closed run — an LLM helper call, usage learned after a run
    closed — against the task's scopes, and check their budgets."""
    if not tokens and not cost_usd:
        return
    now = time.time()
    goal = profile = None
    if task_id:
        t = tx.one("SELECT goal_id, assignee FROM tasks WHERE id = :t", {"t": task_id})
        if t is not None:
            goal, profile = t["goal_id"], t["assignee"]
    if run_id is not None:
        profile = tx.scalar("SELECT profile FROM task_runs WHERE id = :r", {"r": run_id}) or profile
    tx.execute(
        "INSERT INTO budget_usage (board, task_id, goal_id, profile, run_id, source, at, runs, runtime, tokens, "
        "cost_usd) VALUES (:b, :t, :g, :p, :r, :src, :now, 0, 0, :tok, :cost)",
        {"b": board, "t": task_id, "g": goal, "p": profile if source != "llm" else None, "r": run_id, "src": source,
         "now": now, "tok": int(tokens), "cost": float(cost_usd)})
    budgets = _matching(tx, task_id, goal, board, profile if source != "llm" else None)
    if budgets:
        _add_totals(tx, budgets, now, 0, 0.0, int(tokens), float(cost_usd))
        _check_in(tx, budgets, board, task_id, run_id, now, actor=actor)


def usage_numbers(usage: dict[str, Any] | None) -> tuple[int, float]:
    """Tokens (input + output) and cost of a usage record (missing numbers are 0)."""
    usage = usage or {}
    def n(key: str) -> float:
        try:
            return float(usage.get(key) or 0)
        except (TypeError, ValueError):
            return 0.0
    return int(n("input_tokens") + n("output_tokens")), n("cost_usd")


def record_llm_usage(db: Database, board: str, task_id: str | None, payload: dict[str, Any], *,
                     actor: str | None = None) -> None:
    """An LLM helper call: its ``llm_used`` event and its usage counted, in one transaction."""
    def _w(tx: Tx) -> None:
        tx.event(board, task_id, "llm_used", payload, actor=actor)
        tokens, cost = usage_numbers(payload)
        account_usage_in(tx, board, task_id, tokens=tokens, cost_usd=cost, source="llm", actor=actor)
    db.write(_w)


def _check_in(tx: Tx, budgets: list[Row], board: str, task_id: str | None, run_id: int | None, now: float,
              *, actor: str | None = None) -> None:
    """The 80% warning and the 100% event, each once per budget and window."""
    for b in budgets:
        spent = spend_in(tx, b["scope"], b["ref"], b["per"], now, running=b.get("max_runtime") is not None)
        ratio, metric = _ratio(b, spent)
        if metric is None or ratio < WARN_AT:
            continue
        key, _ = window(b["per"], now)
        limit = float(b[LIMIT_OF[metric]])
        payload = {"scope": b["scope"], "ref": b["ref"], "per": b["per"] or None, "window": key, "metric": metric,
                   "spent": spent[metric], "limit": limit}
        ev_board = b.get("board") or board
        ev_task = b["ref"] if b["scope"] == "task" else None
        if ratio >= 1.0 and b.get("exhausted_window") != key:
            over = spent[metric] - limit
            payload.update(over_by=over, message=(
                f"{scope_name(b)} is spent: {metric} {amount(metric, spent[metric])} of {amount(metric, limit)}"
                + (f" (over by {amount(metric, over)})" if over > 0 else "")))
            tx.execute("UPDATE budgets SET exhausted_window = :k, warned_window = :k2 WHERE id = :id",
                       {"k": key, "k2": key, "id": b["id"]})
            tx.event(ev_board, ev_task, "budget_exhausted", payload, run_id=run_id, actor=actor, at=now)
        elif ratio < 1.0 and b.get("warned_window") != key:
            payload.update(ratio=ratio, message=(
                f"{scope_name(b)} is at {int(ratio * 100)}%: {metric} {amount(metric, spent[metric])} "
                f"of {amount(metric, limit)}"))
            tx.execute("UPDATE budgets SET warned_window = :k WHERE id = :id", {"k": key, "id": b["id"]})
            tx.event(ev_board, ev_task, "budget_warning", payload, run_id=run_id, actor=actor, at=now)
