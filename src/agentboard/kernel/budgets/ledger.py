"""The ``budget_usage`` ledger: reading what a scope spent (with its running totals), and
writing a closed run's or an LLM call's row, with the warnings and exhaustion it causes."""

from __future__ import annotations

import time
from typing import Any

from ...domain.errors import InvalidInput
from ...store.engine import Database, Row, Tx
from .. import hooks
from .scopes import (
    _SCOPE_COL,
    LIMIT_OF,
    METRICS,
    PERS,
    WARN_AT,
    _supervised,
    amount,
    own_scope,
    scope_name,
    window,
)

# -- reading spend -----------------------------------------------------------------------------


def spend_in(tx: Tx, scope: str, ref: str, per: str, now: float | None = None) -> dict[str, float]:
    """What budgeted scope ``ref`` spent in its current window: runs, runtime, tokens, cost (one
    row of ``budget_totals``, kept with the ledger)."""
    key, _ = window(per, time.time() if now is None else now)
    row = tx.one("SELECT runs, runtime, tokens, cost_usd AS cost FROM budget_totals "
                 "WHERE scope = :s AND ref = :r AND win = :w", {"s": scope, "r": ref, "w": key}) or {}
    return {m: float(row.get(m) or 0) for m in METRICS}


#: the ledger rows of a board's supervision tasks
_SUPERVISION_ROWS = "task_id IN (SELECT id FROM tasks WHERE board = :ref AND purpose = 'supervision')"


def _rebuild_totals(tx: Tx, scope: str, ref: str, per: str, now: float) -> None:
    """A budget set or changed: its current window's total summed from the ledger once."""
    key, start = window(per, now)
    col = _SCOPE_COL[scope]
    only = ""
    if scope == "supervision":
        only = " AND " + _SUPERVISION_ROWS
    elif scope == "board" and own_scope(tx, ref):
        only = " AND (task_id IS NULL OR NOT " + _SUPERVISION_ROWS + ")"
    tx.execute("DELETE FROM budget_totals WHERE scope = :s AND ref = :r", {"s": scope, "r": ref})
    tx.execute(
        f"INSERT INTO budget_totals (scope, ref, win, runs, runtime, tokens, cost_usd) "
        f"SELECT :s, :r, :w, COALESCE(SUM(runs), 0), COALESCE(SUM(runtime), 0), COALESCE(SUM(tokens), 0), "
        f"COALESCE(SUM(cost_usd), 0) FROM budget_usage WHERE {col} = :ref AND at >= :start{only}",
        {"s": scope, "r": ref, "w": key, "ref": ref, "start": start})


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
    """The budgets a task counts against (its own, its goal's, its board's — or its board's
    supervision budget —, its profile's)."""
    row = tx.one("SELECT id, board, goal_id, assignee, purpose FROM tasks WHERE id = :t", {"t": task_id})
    if row is None:
        return []
    return _matching(tx, task_id, row["goal_id"], row["board"], profile or row["assignee"], purpose=row["purpose"],
                     known=True)


def _matching(tx: Tx, task_id: str | None, goal_id: str | None, board: str | None, profile: str | None,
              *, purpose: str | None = None, known: bool = False, facts: Row | None = None) -> list[Row]:
    """The budgets a run of ``task_id`` counts against. ``purpose``: the task's, when the caller
    has it (``known``); else it is read only if the board has a board or supervision budget.
    ``facts``: gets ``supervised`` (whether the run counts against the supervision budget) when
    the board has either."""
    params: dict[str, Any] = {}
    ors = []
    for scope, ref in (("task", task_id), ("goal", goal_id), ("profile", profile)):
        if ref:
            params[scope] = ref
            ors.append(f"(scope = '{scope}' AND ref = :{scope})")
    if board:
        params["board"] = board
        ors.append("(scope IN ('board', 'supervision') AND ref = :board)")
    if not ors:
        return []
    rows = tx.all("SELECT * FROM budgets WHERE " + " OR ".join(ors), params)
    if any(r["scope"] in ("board", "supervision") for r in rows):
        sup = _supervised(tx, task_id, board, purpose, known)
        rows = [r for r in rows if r["scope"] != ("board" if sup else "supervision")]
        if facts is not None:
            facts["supervised"] = sup
    return rows


def _split_in(tx: Tx, board: str, since: float) -> dict[str, dict[str, float]]:
    """What the board's work and its supervision spent since ``since`` (from the ledger)."""
    rows = tx.all(
        "SELECT CASE WHEN u.task_id IN (SELECT id FROM tasks WHERE board = :b AND purpose = 'supervision') "
        "THEN 'supervision' ELSE 'work' END AS spender, COALESCE(SUM(u.runs), 0) AS runs, "
        "COALESCE(SUM(u.runtime), 0) AS runtime, COALESCE(SUM(u.tokens), 0) AS tokens, "
        "COALESCE(SUM(u.cost_usd), 0) AS cost FROM budget_usage u WHERE u.board = :b2 AND u.at >= :since "
        "GROUP BY 1", {"b": board, "b2": board, "since": since})
    out = {k: {m: 0.0 for m in METRICS} for k in ("work", "supervision")}
    for r in rows:
        out[str(r["spender"])] = {m: float(r[m] or 0) for m in METRICS}
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
    spent = spend_in(tx, b["scope"], b["ref"], b["per"], now)
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

_RUN_USAGE = (
    "INSERT INTO budget_usage (board, task_id, goal_id, profile, run_id, source, at, runs, runtime, tokens, cost_usd, "
    "pending) "
    "SELECT r.board, r.task_id, t.goal_id, COALESCE(r.profile, t.assignee), r.id, 'run', :now, 1, "
    "CASE WHEN COALESCE(r.ended_at, :now2) > r.started_at THEN COALESCE(r.ended_at, :now3) - r.started_at ELSE 0 END, "
    "COALESCE(r.input_tokens, 0) + COALESCE(r.output_tokens, 0), COALESCE(r.cost_usd, 0), "
    "CASE WHEN r.exit_code IS NULL AND r.worker_pid IS NOT NULL THEN 1 ELSE 0 END "
    "FROM task_runs r LEFT JOIN tasks t ON t.id = r.task_id WHERE r.id = :r AND r.synthetic = 0 "
    "AND r.status = 'closed' AND NOT EXISTS (SELECT 1 FROM budget_usage u WHERE u.task_id = r.task_id AND u.run_id = :r2 AND u.source = 'run') "
    "RETURNING board, task_id, goal_id, profile, at, runs, runtime, tokens, cost_usd"
)


#: SQLite: the ledger row written unread (its count says whether the guard let it in)
_RUN_USAGE_UNREAD = _RUN_USAGE[:_RUN_USAGE.index(" RETURNING ")]

#: PostgreSQL: the ledger row and, in the same statement, whether any budget covers its scopes
_RUN_USAGE_PG = (
    "WITH ins AS (" + _RUN_USAGE + ") SELECT ins.*, EXISTS (SELECT 1 FROM budgets b WHERE "
    "(b.scope = 'task' AND b.ref = ins.task_id) OR (b.scope = 'goal' AND b.ref = ins.goal_id) OR "
    "(b.scope IN ('board', 'supervision') AND b.ref = ins.board) OR (b.scope = 'profile' AND b.ref = ins.profile)) "
    "AS budgeted FROM ins"
)


def account_run_in(tx: Tx, run_id: int | None, *, actor: str | None = None, budgeted: bool | None = None,
                   done: bool = False) -> bool:
    """Count a run that was just closed against its scopes, and check their budgets.
    ``budgeted=False``: the caller knows no budget covers it; the ledger row is written unread.
    ``done``: the run's close made its task done (the rollups count both at once). True when the
    run's ledger row was written now (the ``run_closed`` hook then fired for it)."""
    if run_id is None:
        return False
    now = time.time()
    params = {"now": now, "now2": now, "now3": now, "r": run_id, "r2": run_id}
    if budgeted is False:
        if tx.db.dialect == "postgresql":  # pipelined: its count would cost a round trip
            tx.execute(_RUN_USAGE, params)
        else:
            tx.execute(_RUN_USAGE_UNREAD, params)
            if tx.rowcount != 1:
                return False
        # the ledger row is written once per run (the statement's guard): so are the rollups
        hooks.run_closed(tx, run_id, done=done)
        return True
    if tx.db.dialect == "postgresql":  # one round trip: the ledger row and whether a budget applies
        row = tx.one(_RUN_USAGE_PG, params)
    else:
        row = tx.one(_RUN_USAGE, params)
    if row is None:
        return False
    hooks.run_closed(tx, run_id, done=done)
    if row.get("budgeted") is not False:
        account_row_in(tx, row, run_id, now, actor=actor)
    return True


def account_row_in(tx: Tx, row: Row, run_id: int, now: float, *, actor: str | None = None) -> None:
    """Add a closed run's ledger row (``board``, ``task_id``, ``goal_id``, ``profile``, ``at``
    and the spend) to the totals of the budgets it counts against, and check them."""
    budgets = _matching(tx, row["task_id"], row["goal_id"], row["board"], row["profile"])
    if budgets:
        _add_totals(tx, budgets, float(row["at"]), int(row["runs"]), float(row["runtime"]), int(row["tokens"]),
                    float(row["cost_usd"]))
        _check_in(tx, budgets, row["board"], row["task_id"], run_id, now, actor=actor)


#: a run's row of the ledger (``:r`` and ``:r2``: the run's id)
_RUN_ROW = "task_id = (SELECT task_id FROM task_runs WHERE id = :r) AND run_id = :r2 AND source = 'run'"


def run_updated_in(tx: Tx, run_id: int, *, tokens: int = 0, cost_usd: float = 0.0, exited: bool = False) -> None:
    """Facts learned after a run closed: the usage its agent printed (added to the run's row of
    the ledger) and its worker's exit (its usage is no longer to come). Checks the budgets."""
    # a run's ledger row is found by its task and run (``ix_budget_usage_task_run``)
    tx.execute("UPDATE budget_usage SET tokens = tokens + :dt, cost_usd = cost_usd + :dc, "
               "pending = CASE WHEN :ex = 1 THEN 0 ELSE pending END "
               f"WHERE {_RUN_ROW}",
               {"dt": int(tokens), "dc": float(cost_usd), "ex": 1 if exited else 0, "r": run_id, "r2": run_id})
    if tx.rowcount != 1 or not (tokens or cost_usd):
        return
    row = tx.one(f"SELECT board, task_id, goal_id, profile, at FROM budget_usage WHERE {_RUN_ROW}",
                 {"r": run_id, "r2": run_id})
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
        spent = spend_in(tx, b["scope"], b["ref"], b["per"], now)
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
