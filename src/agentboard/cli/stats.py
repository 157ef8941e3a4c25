"""Board statistics: `stats` and `assignees`."""

from __future__ import annotations

import click

from . import common
from .common import board_option, handle_errors, json_option


@click.command("stats")
@board_option
@json_option
@handle_errors
def stats(board: str | None, as_json: bool) -> None:
    """Task counts per status, assignee and goal; runs, tokens and cost so far."""
    from agentboard.kernel import queries

    slug = common.existing_board(board)
    data = queries.stats(common.db(), slug)
    if as_json:
        common.emit_json(data)
        return
    from .output import fields, table

    fields([("board", slug), ("tasks", data["total"]), ("runs", data["runs"]),
            ("tokens", f"{data['input_tokens']} in / {data['output_tokens']} out"),
            ("cost", f"${data['cost_usd']:.4f}")])
    click.echo("")
    table(["status", "tasks"], [(s, n) for s, n in data["by_status"].items()], title="By status")
    if data["by_assignee"]:
        click.echo("")
        table(["assignee", "counts"],
              [(a, ", ".join(f"{s} {n}" for s, n in sorted(c.items()))) for a, c in sorted(data["by_assignee"].items())],
              title="By assignee", status_column=None)
    if data["by_goal"]:
        click.echo("")
        table(["goal", "counts"],
              [(g, ", ".join(f"{s} {n}" for s, n in sorted(c.items()))) for g, c in sorted(data["by_goal"].items())],
              title="By goal", status_column=None)
    if data["outcomes"]:
        click.echo("")
        table(["outcome", "runs"], sorted(data["outcomes"].items()), title="Run outcomes", status_column=None)


@click.command("assignees")
@board_option
@json_option
@handle_errors
def assignees(board: str | None, as_json: bool) -> None:
    """Profiles and assignees with their task counts on this board."""
    from agentboard.kernel import queries

    slug = common.existing_board(board)
    rows = queries.assignees(common.db(), slug)
    if as_json:
        common.emit_json(rows)
        return
    from .output import table

    table(["name", "profile", "enabled", "total", "by status"],
          [(r["name"], r["profile"], r["enabled"] if r["profile"] else "-", r["total"],
            ", ".join(f"{s} {n}" for s, n in sorted(r["counts"].items()))) for r in rows],
          status_column=None, empty="no profiles and no assigned tasks yet")
