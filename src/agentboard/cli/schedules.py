"""`schedule add|list|rm|fire`: recurring tasks on a cron expression (UTC)."""

from __future__ import annotations

import click

from . import common
from .common import board_option, handle_errors, json_option


@common.group("schedule")
def schedule() -> None:
    """Recurring tasks: a template or a task to clone, fired by the dispatcher on a cron (UTC)."""


@schedule.command("add")
@click.argument("cron", metavar="CRON")
@click.option("--template", default=None, metavar="NAME", help="instantiate this template each time")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="a placeholder's value (repeatable)")
@click.option("--clone", default=None, metavar="TASK", help="create a copy of this task each time")
@click.option("--missed", type=click.Choice(["skip", "once"]), default="skip", show_default=True,
              help="occurrences missed while no dispatcher ran: skip them, or fire once for them")
@board_option
@json_option
@handle_errors
def add(cron: str, template: str | None, sets: tuple[str, ...], clone: str | None, missed: str,
        board: str | None, as_json: bool) -> None:
    """Fire CRON (minute hour day month weekday, UTC; e.g. "0 9 * * 1-5") with a template or a clone."""
    from agentboard.domain.timespec import iso
    from agentboard.kernel import schedules, templates

    slug = common.existing_board(board)
    out = schedules.add(common.db(), slug, cron, template=template, values=templates.parse_sets(sets),
                        clone=clone, missed=missed, actor=common.actor(), home=common.home())
    what = f"template {template}" if template else f"a copy of {clone}"
    common.emit(out, as_json, f"schedule {out['id']}: {what} at \"{out['cron']}\" (UTC); next {iso(out['next_at'])}")


@schedule.command("list")
@board_option
@json_option
@handle_errors
def list_(board: str | None, as_json: bool) -> None:
    """The board's schedules and when each fires next."""
    from agentboard.domain.timespec import iso
    from agentboard.kernel import schedules

    rows = schedules.list_schedules(common.db(), common.existing_board(board))
    if as_json:
        common.emit_json(rows)
        return
    from .output import table

    table(["id", "cron", "fires", "missed", "next (UTC)", "last fired"],
          [(r["id"], r["cron"], f"template {r['template']}" if r["template"] else f"clone {r['clone_task_id']}",
            r["missed"], iso(r["next_at"]), iso(r["last_fired_at"]) if r["last_fired_at"] else "-") for r in rows],
          status_column=None, empty="no schedules (agentboard schedule add \"0 9 * * 1-5\" --template NAME)")


@schedule.command("rm")
@click.argument("schedule_id", type=int, metavar="ID")
@board_option
@json_option
@handle_errors
def rm(schedule_id: int, board: str | None, as_json: bool) -> None:
    """Remove a schedule (the tasks it created stay)."""
    from agentboard.kernel import schedules

    out = schedules.remove(common.db(), common.existing_board(board), schedule_id, actor=common.actor())
    common.emit(out, as_json, f"schedule {schedule_id} removed")


@schedule.command("fire")
@board_option
@json_option
@handle_errors
def fire(board: str | None, as_json: bool) -> None:
    """Fire the due schedules now (what every dispatcher pass does), and promote tasks whose
    --not-before time has come."""
    from agentboard.kernel import schedules

    s = common.settings()
    fired, promoted, _next = schedules.tick(common.db(), [common.existing_board(board)], host=s.host_id,
                                            grace=s.schedule_grace, home=s.home)
    if as_json:
        common.emit_json({"fired": fired, "promoted": promoted})
        return
    for f in fired:
        click.echo(f"schedule {f['schedule']}: " + (f"created {', '.join(f['tasks'])}" if f["tasks"] else
                                                     f.get("error") or f"skipped {f['skipped']} missed"))
    if promoted:
        click.echo(f"promoted {', '.join(promoted)}")
    if not fired and not promoted:
        click.echo("nothing due")
