"""A budget's limits: set, clear and read them."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from ...domain import model
from ...domain.errors import InvalidInput, NotFound
from ...store.engine import Database, Row, Tx
from .gate import release_in
from .ledger import _budget_out, _check_in, _for_task, _rebuild_totals
from .scopes import PERS, SCOPES, WARN_AT

# -- values ------------------------------------------------------------------------------------

#: the largest whole-number limit (runs, seconds, tokens): a database integer holds it
LIMIT_MAX = 2**62


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
                if isinstance(value, bool):
                    raise TypeError
                out = cast(value)
            except (TypeError, ValueError, OverflowError):
                raise InvalidInput(f"{name} must be a number, got {value!r}") from None
            if not math.isfinite(out):
                raise InvalidInput(f"{name} must be a finite number (leave it out for no limit), got {value!r}")
            if out < 0:
                raise InvalidInput(f"{name} must be 0 or more, got {value!r}")
            if cast is int and out > LIMIT_MAX:
                raise InvalidInput(f"{name} is {out}; the largest limit is {LIMIT_MAX} (leave it out for no limit)")
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
    if limits.expected_cost is not None and scope != "profile":
        raise InvalidInput(f"--expected-cost is what one run of a profile costs, which the gate of every budget "
                           f"uses: give it on that profile's budget (--profile NAME), not on a {scope} budget")
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
