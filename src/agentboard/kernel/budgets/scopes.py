"""What a budget counts: its scopes, metrics and windows, and how its amounts read."""

from __future__ import annotations

import datetime as dt

from ...store.engine import Row, Tx
from ..common import board_settings

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
