"""Budgets: limits on what a task, a goal, a board or a profile may spend, checked before a spawn.

A budget is one row per scope (``task``, ``goal``, ``board``, ``profile`` and its id, and
``supervision`` and a board's slug) with any of four limits — runs, total runtime (seconds),
tokens (input + output) and cost (USD) — and, for a board, its supervision or a profile, an
optional window (``day`` or ``month``, UTC calendar).

Supervision has a scope of its own: with the board setting ``supervision_budget`` (default on),
the runs of the board's supervision tasks (``purpose = 'supervision'``) count against its
``supervision`` budget instead of its ``board`` budget, so the supervisor cannot spend the runs
meant for the work (and a spent work budget does not silence the supervisor). Turned off, they
count against the board's budget like any task.

What was spent is the ``budget_usage`` ledger: a row per closed run (one run, its runtime, its
tokens and cost) and per LLM helper call, written in the transaction that closes the run or
records the call, with the task, goal, board and profile it counts against. The same
transaction checks the budgets of those four scopes: at 80% of a limit one ``budget_warning``
event per scope and window, at 100% one ``budget_exhausted``.

The dispatcher's claim (:func:`gate_in`, called by ``dispatching.claim_batch`` and the review run
opener) refuses a task when one of its scopes cannot afford one more run: a limit reached, or the
remaining budget, less the expected cost of the runs in flight, below the expected cost of one
run (the profile's configured ``expected_cost``, else the median of its recent runs). A refused
task is blocked with kind ``budget`` and a reason naming the limit; :func:`release_in` unblocks
such tasks as soon as the gate lets them through again (a limit raised or cleared, a new window).
Running workers in an exhausted scope are told to stop by their heartbeat answer
(:func:`stop_reason_in`) and stopped by the dispatcher after a grace period (:func:`stop_run`).
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
from dataclasses import dataclass
from typing import Any

from ..domain import model, states
from ..domain.errors import InvalidInput, NotFound
from ..store.engine import Database, Row, Tx, in_list
from . import hooks
from .common import board_settings, ready_or_todo

SCOPES: tuple[str, ...] = ("task", "goal", "board", "profile", "supervision")
#: the windows a budget may have (``""``: no window, everything ever spent counts)
PERS: tuple[str, ...] = ("", "day", "month")
METRICS: tuple[str, ...] = ("runs", "runtime", "tokens", "cost")
LIMIT_OF: dict[str, str] = {"runs": "max_runs", "runtime": "max_runtime", "tokens": "max_tokens", "cost": "max_cost"}
#: the ledger column a scope is found by
_SCOPE_COL: dict[str, str] = {"task": "task_id", "goal": "goal_id", "board": "board", "profile": "profile",
                               "supervision": "board"}
#: ``tasks.purpose`` of the supervisor's tasks (``kernel.supervision.SUPERVISION``)
SUPERVISION = "supervision"
#: how many recent runs of a profile its expected cost of one run is the median of
EXPECTED_RUNS = 20
WARN_AT = 0.8


# -- values ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """The limits of one budget (None: no limit on that), its window and the expected cost of one
    run (profiles). Build it with :meth:`build` to check the values."""

    max_runs: int | None = None
    max_runtime: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    #: ``day``, ``month``, ``""`` (no window); None: not given (a new budget has none, a changed one keeps its own)
    per: str | None = None
    expected_cost: float | None = None

    @classmethod
    def build(cls, *, max_runs: Any = None, max_runtime: Any = None, max_tokens: Any = None,
              max_cost: Any = None, per: str | None = None, expected_cost: Any = None) -> Limits:
        def num(name: str, value: Any, cast: type) -> Any:
            if value is None:
                return None
            try:
                out = cast(value)
            except (TypeError, ValueError):
                raise InvalidInput(f"{name} must be a number, got {value!r}") from None
            if out < 0:
                raise InvalidInput(f"{name} must be 0 or more, got {value!r}")
            return out
        if per is not None:
            per = per.strip().lower()
            if per in ("none", "total"):
                per = ""
        if per is not None and per not in PERS:
            raise InvalidInput(f"invalid window {per!r}: use day or month (or leave it out for no window)")
        runtime = model.duration(max_runtime) if isinstance(max_runtime, str) else max_runtime
        return cls(num("max_runs", max_runs, int), num("max_runtime", runtime, int),
                   num("max_tokens", max_tokens, int), num("max_cost", max_cost, float), per,
                   num("expected_cost", expected_cost, float))


def window(per: str, now: float) -> tuple[str, float]:
    """The current window of a budget: its key and its start (epoch seconds, UTC)."""
    if not per:
        return "all", 0.0
    d = dt.datetime.fromtimestamp(now, dt.UTC)
    if per == "day":
        start = dt.datetime(d.year, d.month, d.day, tzinfo=dt.UTC)
        return start.strftime("%Y-%m-%d"), start.timestamp()
    start = dt.datetime(d.year, d.month, 1, tzinfo=dt.UTC)
    return start.strftime("%Y-%m"), start.timestamp()


def amount(metric: str, value: float) -> str:
    """A spend or a limit as people read it."""
    if metric == "cost":  # cents, and down to a hundredth of a cent when it says more
        text = f"{value:,.4f}"
        while text.endswith("0") and len(text.split(".")[1]) > 2:
            text = text[:-1]
        return "$" + text
    if metric == "tokens":
        return f"{int(value):,} tokens"
    if metric == "runs":
        return f"{int(value)} run" + ("" if int(value) == 1 else "s")
    secs = int(round(value))
    if secs >= 3600:
        return f"{secs // 3600}h {secs % 3600 // 60}m"
    if secs >= 60:
        return f"{secs // 60}m {secs % 60}s"
    return f"{secs}s"


def scope_name(b: Row) -> str:
    per = {"day": " (per day)", "month": " (per month)"}.get(b.get("per") or "", "")
    if b["scope"] == "supervision":
        return f"the supervision budget of board {b['ref']}{per}"
    return f"the {b['scope']} {b['ref']} budget{per}"


def own_scope(tx: Tx, board: str) -> bool:
    """Whether the board's supervision runs count against its own ``supervision`` budget (the
    board setting ``supervision_budget``, default on) rather than the board's."""
    return board_settings(tx, board).get("supervision_budget") is not False


def _supervised(tx: Tx, task_id: str | None, board: str | None, purpose: str | None = None,
                known: bool = False) -> bool:
    """Whether a run of ``task_id`` counts against its board's supervision budget, not the
    board's (``purpose``: the task's, when the caller has it; ``known``: it does)."""
    if not task_id or not board:
        return False
    if not known:
        purpose = tx.scalar("SELECT purpose FROM tasks WHERE id = :t", {"t": task_id})
    return purpose == SUPERVISION and own_scope(tx, board)


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


# -- writing limits ------------------------------------------------------------------------------


def _scope_board(tx: Tx, scope: str, ref: str) -> str | None:
    """The board of a scope (None for a profile); NotFound when it does not exist."""
    if scope == "supervision":
        if tx.one("SELECT slug FROM boards WHERE slug = :r", {"r": ref}) is None:
            raise NotFound(f"no board {ref!r}")
        return ref
    if scope == "task":
        row = tx.one("SELECT board FROM tasks WHERE id = :r", {"r": ref})
        if row is None:
            raise NotFound(f"no task {ref}")
        return str(row["board"])
    if scope == "goal":
        row = tx.one("SELECT board FROM goals WHERE id = :r", {"r": ref})
        if row is None:
            raise NotFound(f"no goal {ref}")
        return str(row["board"])
    if scope == "board":
        if tx.one("SELECT slug FROM boards WHERE slug = :r", {"r": ref}) is None:
            raise NotFound(f"no board {ref!r}")
        return ref
    if scope == "profile":
        if tx.one("SELECT name FROM profiles WHERE name = :r", {"r": ref}) is None:
            raise NotFound(f"no profile {ref!r}; list them with `agentboard profiles list`")
        return None
    raise InvalidInput(f"invalid budget scope {scope!r}: use one of {', '.join(SCOPES)}")


def _set(tx: Tx, scope: str, ref: str, limits: Limits, actor: str | None) -> Row:
    board = _scope_board(tx, scope, ref)
    if limits.per and scope in ("task", "goal"):
        raise InvalidInput(f"a {scope} budget has no window: --per is for --board and --profile budgets")
    now = time.time()
    old = tx.one("SELECT * FROM budgets WHERE scope = :s AND ref = :r", {"s": scope, "r": ref})
    per = limits.per if limits.per is not None else (old["per"] if old is not None else "")
    values = {"runs": limits.max_runs, "rt": limits.max_runtime, "tok": limits.max_tokens, "cost": limits.max_cost,
              "exp": limits.expected_cost, "per": per, "now": now, "s": scope, "r": ref, "b": board}
    if old is None:
        if all(v is None for v in (limits.max_runs, limits.max_runtime, limits.max_tokens, limits.max_cost,
                                   limits.expected_cost)):
            raise InvalidInput("give at least one limit: --max-runs, --max-runtime, --max-tokens, --max-cost "
                               "(or --expected-cost)")
        tx.execute(
            "INSERT INTO budgets (scope, ref, board, per, max_runs, max_runtime, max_tokens, max_cost, expected_cost, "
            "created_at, updated_at) VALUES (:s, :r, :b, :per, :runs, :rt, :tok, :cost, :exp, :now, :now)", values)
    else:  # a limit not given keeps its value
        for key, col in (("runs", "max_runs"), ("rt", "max_runtime"), ("tok", "max_tokens"), ("cost", "max_cost"),
                         ("exp", "expected_cost")):
            if values[key] is None:
                values[key] = old[col]
        tx.execute(
            "UPDATE budgets SET per = :per, max_runs = :runs, max_runtime = :rt, max_tokens = :tok, max_cost = :cost, "
            "expected_cost = :exp, updated_at = :now, board = :b WHERE scope = :s AND ref = :r", values)
    b = tx.one("SELECT * FROM budgets WHERE scope = :s AND ref = :r", {"s": scope, "r": ref})
    assert b is not None
    _rebuild_totals(tx, scope, ref, per, now)
    out = _budget_out(tx, b, now)
    # a limit raised above the spend can warn and run out again in this window
    tx.execute("UPDATE budgets SET warned_window = CASE WHEN :w = 1 THEN warned_window ELSE NULL END, "
               "exhausted_window = CASE WHEN :x = 1 THEN exhausted_window ELSE NULL END WHERE id = :id",
               {"w": 1 if out["ratio"] >= WARN_AT else 0, "x": 1 if out["exhausted"] else 0, "id": b["id"]})
    tx.event(board or "default", ref if scope == "task" else None, "budget_changed",
             {"scope": scope, "ref": ref, "action": "set", "per": per or None,
              **{k: b[k] for k in ("max_runs", "max_runtime", "max_tokens", "max_cost", "expected_cost")}},
             actor=actor, at=now)
    _check_in(tx, [b], board or "default", ref if scope == "task" else None, None, now)
    out["released"] = release_in(tx, None if board is None else [board], actor=actor)
    return out


def set_budget(db: Database, scope: str, ref: str, limits: Limits, *, actor: str | None = None) -> Row:
    """Set (or change) the limits of a scope's budget; tasks it blocked that it now lets through
    are released in the same transaction. Returns the budget with its spend."""
    return db.write(_set, scope, ref, limits, actor)


def _clear(tx: Tx, scope: str, ref: str, actor: str | None) -> Row:
    if scope not in SCOPES:
        raise InvalidInput(f"invalid budget scope {scope!r}: use one of {', '.join(SCOPES)}")
    old = tx.one("SELECT * FROM budgets WHERE scope = :s AND ref = :r", {"s": scope, "r": ref})
    if old is None:
        raise NotFound(f"no budget on {scope} {ref}; see them with `agentboard budget show`")
    tx.execute("DELETE FROM budgets WHERE id = :id", {"id": old["id"]})
    tx.execute("DELETE FROM budget_totals WHERE scope = :s AND ref = :r", {"s": scope, "r": ref})
    board = old.get("board")
    tx.event(board or "default", ref if scope == "task" else None, "budget_changed",
             {"scope": scope, "ref": ref, "action": "cleared"}, actor=actor)
    released = release_in(tx, None if board is None else [board], actor=actor)
    return {"scope": scope, "ref": ref, "cleared": True, "released": released}


def clear_budget(db: Database, scope: str, ref: str, *, actor: str | None = None) -> Row:
    """Remove a scope's budget; the tasks it blocked are released in the same transaction."""
    return db.write(_clear, scope, ref, actor)


def show(db: Database, *, scope: str | None = None, ref: str | None = None, board: str | None = None) -> list[Row]:
    """Budgets with what they spent in their current window: one scope, a board's (its own and
    those of its tasks and goals, plus every profile's), or all."""
    def _r(tx: Tx) -> list[Row]:
        now = time.time()
        if scope is not None:
            if scope not in SCOPES:
                raise InvalidInput(f"invalid budget scope {scope!r}: use one of {', '.join(SCOPES)}")
            rows = tx.all("SELECT * FROM budgets WHERE scope = :s AND ref = :r", {"s": scope, "r": ref})
        elif board is not None:
            rows = tx.all("SELECT * FROM budgets WHERE board = :b OR scope = 'profile' ORDER BY scope, ref",
                          {"b": board})
        else:
            rows = tx.all("SELECT * FROM budgets ORDER BY scope, ref")
        return [_budget_out(tx, b, now) for b in rows]
    return db.read(_r)


def for_task(db: Database, task_id: str) -> list[Row]:
    """The budgets a task counts against, with their spend (the drawer's budget lines)."""
    def _r(tx: Tx) -> list[Row]:
        now = time.time()
        return [_budget_out(tx, b, now) for b in _for_task(tx, task_id)]
    return db.read(_r)


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
    "AND r.status = 'closed' AND NOT EXISTS (SELECT 1 FROM budget_usage u WHERE u.run_id = :r2 AND u.source = 'run') "
    "RETURNING board, task_id, goal_id, profile, at, runs, runtime, tokens, cost_usd"
)


#: PostgreSQL: the ledger row and, in the same statement, whether any budget covers its scopes
_RUN_USAGE_PG = (
    "WITH ins AS (" + _RUN_USAGE + ") SELECT ins.*, EXISTS (SELECT 1 FROM budgets b WHERE "
    "(b.scope = 'task' AND b.ref = ins.task_id) OR (b.scope = 'goal' AND b.ref = ins.goal_id) OR "
    "(b.scope IN ('board', 'supervision') AND b.ref = ins.board) OR (b.scope = 'profile' AND b.ref = ins.profile)) "
    "AS budgeted FROM ins"
)


def account_run_in(tx: Tx, run_id: int | None, *, actor: str | None = None, budgeted: bool | None = None) -> None:
    """Count a run that was just closed against its scopes, and check their budgets.
    ``budgeted=False``: the caller knows no budget covers it; the ledger row is written unread."""
    if run_id is None:
        return
    now = time.time()
    params = {"now": now, "now2": now, "now3": now, "r": run_id, "r2": run_id}
    if budgeted is False:
        tx.execute(_RUN_USAGE, params)
        # the ledger row is written once per run (the statement's guard): so are the rollups
        hooks.run_closed(tx, run_id)
        return
    if tx.db.dialect == "postgresql":  # one round trip: the ledger row and whether a budget applies
        row = tx.one(_RUN_USAGE_PG, params)
    else:
        row = tx.one(_RUN_USAGE, params)
    if row is not None:
        hooks.run_closed(tx, run_id)
    if row is None or row.get("budgeted") is False:
        return
    account_row_in(tx, row, run_id, now, actor=actor)


def account_row_in(tx: Tx, row: Row, run_id: int, now: float, *, actor: str | None = None) -> None:
    """Add a closed run's ledger row (``board``, ``task_id``, ``goal_id``, ``profile``, ``at``
    and the spend) to the totals of the budgets it counts against, and check them."""
    budgets = _matching(tx, row["task_id"], row["goal_id"], row["board"], row["profile"])
    if budgets:
        _add_totals(tx, budgets, float(row["at"]), int(row["runs"]), float(row["runtime"]), int(row["tokens"]),
                    float(row["cost_usd"]))
        _check_in(tx, budgets, row["board"], row["task_id"], run_id, now, actor=actor)


def run_updated_in(tx: Tx, run_id: int, *, tokens: int = 0, cost_usd: float = 0.0, exited: bool = False) -> None:
    """Facts learned after a run closed: the usage its agent printed (added to the run's row of
    the ledger) and its worker's exit (its usage is no longer to come). Checks the budgets."""
    tx.execute("UPDATE budget_usage SET tokens = tokens + :dt, cost_usd = cost_usd + :dc, "
               "pending = CASE WHEN :ex = 1 THEN 0 ELSE pending END WHERE run_id = :r AND source = 'run'",
               {"dt": int(tokens), "dc": float(cost_usd), "ex": 1 if exited else 0, "r": run_id})
    if tx.rowcount != 1 or not (tokens or cost_usd):
        return
    row = tx.one("SELECT board, task_id, goal_id, profile, at FROM budget_usage WHERE run_id = :r AND source = 'run'",
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


# -- the gate ------------------------------------------------------------------------------------


def _pending_rows(tx: Tx, now: float) -> list[Row]:
    """Closed runs whose usage is still to come (their worker's exit not processed): few, found
    through a partial index."""
    return tx.all("SELECT task_id, goal_id, board, profile FROM budget_usage WHERE pending = 1 AND at > :since",
                  {"since": now - PENDING_FOR})


def _pending(rows: list[Row], scope: str, ref: str) -> int:
    col = _SCOPE_COL[scope]
    return sum(1 for r in rows if r.get(col) == ref)


def _in_flight(tx: Tx, scope: str, ref: str) -> int:
    """Runs of a scope under way (tasks running)."""
    if scope == "task":
        return 0
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
    return int(tx.scalar(sql, {"r": ref}) or 0)


def expected_in(tx: Tx, profile: str | None) -> tuple[dict[str, float], str]:
    """The expected spend of one run of ``profile`` per metric, and where it comes from: the
    configured ``expected_cost`` of the profile's budget, else the median of its recent runs."""
    out = {"runs": 1.0, "runtime": 0.0, "tokens": 0.0, "cost": 0.0}
    if not profile:
        return out, "no profile"
    rows = tx.all("SELECT runtime, tokens, cost_usd FROM budget_usage WHERE profile = :p AND source = 'run' "
                  f"ORDER BY at DESC LIMIT {EXPECTED_RUNS}", {"p": profile})
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
                        purpose=task.get("purpose"), known="purpose" in task, facts=task)
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


def gate_batch_in(tx: Tx, rows: list[Row], *, actor: str | None = "dispatcher") -> list[Row]:
    """The rows (ready tasks about to be claimed) the budgets let through; the others are
    blocked with kind ``budget``."""
    if not rows or tx.scalar("SELECT 1 FROM budgets LIMIT 1") is None:
        return rows
    ok: list[Row] = []
    for r in rows:
        why = gate_in(tx, r, also=ok)
        if why is None:
            ok.append(r)
        else:
            block_in(tx, r, why, actor=actor)
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
            if b["scope"] == "supervision":
                which = " AND purpose = 'supervision'"
            elif b["scope"] == "board" and own_scope(tx, b["ref"]):
                which = " AND COALESCE(purpose, '') <> 'supervision'"
            limit = float(b[LIMIT_OF[metric]])
            reason = (f"{scope_name(b)} is spent: {metric} {amount(metric, spent[metric])} of "
                      f"{amount(metric, limit)}; stopped")
            for r in tx.all(f"SELECT id, board, current_run_id, worker_pid FROM tasks WHERE {col} = :r "
                            f"AND status = 'running'{which}", {"r": b["ref"]}):
                out.setdefault(r["id"], {**r, "reason": reason})
        return list(out.values())
    return db.read(_r)


def _stop_run(tx: Tx, board: str, task_id: str, run_id: int, reason: str) -> bool:
    task = tx.one("SELECT * FROM tasks WHERE id = :t AND board = :b", {"t": task_id, "b": board})
    if task is None or task["status"] != states.RUNNING or task["current_run_id"] != run_id:
        return False
    now = time.time()
    tx.execute("UPDATE task_runs SET status = 'closed', outcome = 'blocked', ended_at = :now, error = :e "
               "WHERE id = :r AND status = 'open'", {"now": now, "e": reason, "r": run_id})
    account_run_in(tx, run_id, actor="dispatcher")
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


__all__ = [
    "LIMIT_OF", "METRICS", "PERS", "SCOPES", "Limits", "account_run_in", "account_usage_in", "amount", "block_in",
    "clear_budget", "expected_in", "for_task", "own_scope", "rebuild_board_in", "spending", "gate_batch_in", "gate_in", "record_llm_usage", "release",
    "release_in", "review_gate", "running_over_budget", "set_budget", "show", "spend_in", "stop_reason_in", "stop_run",
    "usage_numbers", "window",
]
