"""Board statistics: `stats` and `assignees`."""

from __future__ import annotations

import click

from . import common
from .common import board_option, handle_errors, json_option


@click.command("stats")
@board_option
@click.option("--by", "by", type=click.Choice(["profile", "model", "board"]), default=None,
              help="insights per profile, per model, or the board's days (docs/insights.md)")
@click.option("--since", default=None, metavar="DAYS",
              help="with --by: only the last days, e.g. 7d, 2w, 30d (whole UTC days; default: all time)")
@click.option("--rebuild", is_flag=True,
              help="recompute the board's insights from its runs, tasks and reviews first (after a restore)")
@json_option
@handle_errors
def stats(board: str | None, by: str | None, since: str | None, rebuild: bool, as_json: bool) -> None:
    """Task counts per status, assignee and goal; runs, tokens and cost so far. With --by:
    insights per profile or model (tasks done, success rates, races, durations, cost per done
    task, failures) or per board day (throughput, cycle time, work in progress, spend). With
    --rebuild: the board's insights recomputed from what it recorded, then shown."""
    from agentboard.kernel import queries

    slug = common.existing_board(board)
    if by is None and since is not None:
        from agentboard.domain.errors import InvalidInput

        raise InvalidInput("--since goes with --by: e.g. `agentboard stats --by profile --since 7d`")
    if rebuild:
        from agentboard.kernel import insights

        insights.rebuild(common.db(), slug)
        if by is None:
            common.emit({"board": slug, "rebuilt": True}, as_json,
                        f"rebuilt the insights of board {slug} from its runs, tasks and reviews")
            return
    if by is not None:
        _insights(slug, by, since, as_json)
        return
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


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _secs(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 90:
        return f"{value:.0f}s"
    if value < 5400:
        return f"{value / 60:.0f}m"
    if value < 172800:
        return f"{value / 3600:.1f}h"
    return f"{value / 86400:.1f}d"


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


#: how the empty key reads (as in ``GET /api/insights``' ``label``): per profile, nobody's (tasks
#: a person closed without a run); per model, no model (runs of profiles that name none)
EMPTY_KEY = {"profile": "(by hand)", "model": "(no model)"}


def _insights(slug: str, by: str, since: str | None, as_json: bool) -> None:
    from agentboard.kernel import insights

    data = insights.read(common.db(), slug, insights.Query.build(by, since))
    for group in data["groups"]:
        group["label"] = group["key"] or EMPTY_KEY[by]
    if as_json:
        common.emit_json(data)
        return
    from .output import fields, table

    window = f"{data['first_day']} – {data['last_day']}" if data["first_day"] else f"all time to {data['last_day']}"
    if by == "board":
        tl = data["timeline"]
        fields([("board", slug), ("window", window), ("tasks done", tl["tasks_done"]), ("runs", tl["runs"]),
                ("cost", _money(tl["cost_usd"])),
                ("cycle time", f"p50 {_secs(tl['cycle_time_p50_s'])}, p90 {_secs(tl['cycle_time_p90_s'])}")])
        click.echo("")
        table(["day", "done", "started", "in progress", "runs", "cost"],
              [(d["day"], d["tasks_done"], d["started"], d["work_in_progress"], d["runs"], _money(d["cost_usd"]))
               for d in tl["days"]], title="Per day", status_column=None)
        return
    fields([("board", slug), ("by", by), ("window", window)])
    click.echo("")
    table([by, "runs", "done", "1st ok", "verified", "approved", "races won", "p50", "p90", "tokens/done",
           "cost/done", "failures"],
          [(g["label"], g["runs"], g["tasks_done"], _pct(g["first_attempt_success_rate"]),
            _pct(g["verification_pass_rate"]), _pct(g["review_approval_rate"]),
            f"{g['races_won']}/{g['races_entered']}", _secs(g["duration_p50_s"]), _secs(g["duration_p90_s"]),
            "-" if g["tokens_per_done_task"] is None else f"{g['tokens_per_done_task']:.0f}",
            _money(g["cost_per_done_task"]),
            ", ".join(f"{k} {n}" for k, n in sorted(g["failures"].items())) or "-")
           for g in data["groups"]],
          status_column=None, empty="no runs yet" + (" in this window" if data["first_day"] else ""))


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
