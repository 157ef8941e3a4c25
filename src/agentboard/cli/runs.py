"""`runs ID`: a task's attempt history, one row per run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from . import common
from .common import handle_errors, json_option, task_board_option


@click.command("runs")
@click.argument("task_id", required=False, metavar="[ID]")
@task_board_option
@json_option
@handle_errors
def runs(task_id: str | None, board: str | None, as_json: bool) -> None:
    """Attempt history of a task, one row per run (oldest first)."""
    from agentboard.kernel import queries

    tid = common.worker_task(task_id)
    api = common.remote()
    rows: Sequence[Mapping[str, Any]]
    if api is not None:
        rows = api.runs(tid, board=board)
    else:
        rows = queries.runs(common.db(), common.task_board(tid, board), tid)
    if as_json:
        common.emit_json(rows)
        return
    from .output import age, clip, duration, table

    def took(r: Mapping[str, Any]) -> str:
        if r.get("ended_at") and r.get("started_at"):
            return duration(r["ended_at"] - r["started_at"])
        return "running" if r.get("status") == "open" else "-"

    # what the runs spent, where the agent reported it (an agent CLI's tokens and cost)
    spent = any(r.get(k) is not None for r in rows for k in ("input_tokens", "output_tokens", "cost_usd"))

    def usage(r: Mapping[str, Any]) -> tuple[str, ...]:
        if not spent:
            return ()
        i, o, c = r.get("input_tokens"), r.get("output_tokens"), r.get("cost_usd")
        tokens = "-" if i is None and o is None else f"{i or 0:,} / {o or 0:,}"
        return (tokens, "-" if c is None else f"${float(c):.4f}")

    table(
        ["run", "attempt", "profile", "status", "outcome", "started", "took", "host",
         *(("tokens in / out", "cost") if spent else ()), "summary / error"],
        [(r["id"], r.get("attempt"), r.get("profile"), r.get("status"), r.get("outcome"),
          age(r.get("started_at")) + " ago", took(r), r.get("worker_host"), *usage(r),
          clip(r.get("summary") or r.get("error"), 60) + (" [synthetic]" if r.get("synthetic") else ""))
         for r in rows],
        status_column=None, empty=f"{tid} has no runs yet",
    )
