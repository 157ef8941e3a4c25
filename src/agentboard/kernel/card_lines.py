"""What the board view's cards show beyond their task's row: a running card's clock (its current
run's start, ``run_started_at``) and, for a done card whose task has no one-line ``result``, the
first line of its last run's summary (``summary_line``): what the worker said it did."""

from __future__ import annotations

from typing import Any

from ..domain import states
from ..store.engine import Row, Tx, in_list

#: the most of a summary's first line a done card shows
SUMMARY_LINE_MAX = 200


def run_starts(tx: Tx, cards: list[Row]) -> None:
    """Give each running card its current run's start (``run_started_at``: its clock counts the
    current attempt; the task's ``started_at`` is the first attempt's)."""
    running = {c["current_run_id"]: c for c in cards if c["status"] == states.RUNNING and c["current_run_id"]}
    params: dict[str, Any] = {}
    for r in tx.all(f"SELECT id, started_at FROM task_runs WHERE id IN {in_list('run', list(running), params)}",
                    params) if running else ():
        running[r["id"]]["run_started_at"] = r["started_at"]


def summary_lines(tx: Tx, cards: list[Row]) -> None:
    """Give each done card without a one-line result the first line of its last run's summary
    (``summary_line``): what the worker said it did, which the card shows instead."""
    cards = [c for c in cards if c["status"] == states.DONE and not c.get("result")]
    if not cards:
        return
    by_id = {c["id"]: c for c in cards}
    ids = list(by_id)
    last: dict[str, str] = {}
    for start in range(0, len(ids), 400):
        params: dict[str, Any] = {}
        for r in tx.all(f"SELECT task_id, summary FROM task_runs WHERE task_id IN {in_list('t', ids[start:start + 400], params)} "
                        "AND summary IS NOT NULL AND summary <> '' ORDER BY id", params):
            last[r["task_id"]] = r["summary"]
    for tid, summary in last.items():
        line = next((ln.strip() for ln in summary.splitlines() if ln.strip()), "")
        if line:
            by_id[tid]["summary_line"] = line[:SUMMARY_LINE_MAX]
