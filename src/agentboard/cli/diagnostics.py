"""What is wrong and how to fix it: `diagnostics`; and the overrides it suggests: `promote`, `unguard`."""

from __future__ import annotations

from typing import Any

import click

from . import common
from .common import handle_errors, json_option, task_board_option


@click.command("diagnostics")
@click.option("--board", "board", default=None, help="only this board (default: every board)")
@click.option("--task", "task_id", default=None, metavar="ID", help="only what concerns this task")
@json_option
@handle_errors
def diagnostics(board: str | None, task_id: str | None, as_json: bool) -> None:
    """Ready tasks nothing can run, guarded and orphaned tasks, breaker trips, spent budgets, the
    target directories and the database — each with the command that fixes it."""
    from agentboard.domain.errors import Unavailable
    from agentboard.kernel import boards as kboards
    from agentboard.kernel import diagnostics as kdiag

    try:
        db = common.db()
    except Unavailable as exc:  # the database that does not answer is what diagnostics reports
        _show(kdiag.unreachable_found(exc.message), task_id, as_json)
        raise SystemExit(exc.exit_code) from None
    if task_id:
        slugs = [common.task_board(task_id, board)]
    elif board:
        slugs = [common.existing_board(board)]
    else:
        slugs = [b["slug"] for b in kboards.list_boards(db)]
    _show(kdiag.diagnose(db, slugs, task_id=task_id, host=common.settings().host_id), task_id, as_json)


def _show(found: list[dict[str, Any]], task_id: str | None, as_json: bool) -> None:
    if as_json:
        common.emit_json(found)
        return
    if not found:
        click.echo("nothing wrong found")
        return
    for f in found:
        click.echo(f"{f['severity']}: [{f['kind']}] {_where(f, task_id)}: {f['message']}")
        if f["fix"]:
            click.echo(f"  fix: {f['fix']}")


def _where(f: dict[str, Any], task_id: str | None) -> str:
    """What a finding is about: a task's id, or ``goal G``, ``board B``, ``profile P`` (in a task's
    view: ``its goal G`` and so on), or ``database``."""
    concerns, subject = f.get("concerns"), f.get("subject")
    if concerns is None:
        return "database"
    if concerns == "task":
        return str(subject)
    return ("its " if task_id else "") + f"{concerns} {subject}"


@click.command("promote")
@click.argument("task_id", metavar="ID")
@click.option("--force", is_flag=True, help="also when parents are not done (recorded as an override)")
@task_board_option
@json_option
@handle_errors
def promote(task_id: str, force: bool, board: str | None, as_json: bool) -> None:
    """Move a todo task to ready; --force starts it although its parents are not done."""
    from agentboard.kernel import overrides

    out = overrides.promote(common.db(), common.task_board(task_id, board), task_id, force=force,
                            actor=common.actor())
    common.emit(out, as_json, f"{task_id}: ready" + (" (over unfinished parents)" if out.get("parents_override")
                                                     else ""))


@click.command("unguard")
@click.argument("task_id", metavar="ID")
@task_board_option
@json_option
@handle_errors
def unguard(task_id: str, board: str | None, as_json: bool) -> None:
    """Lift the respawn guard holding a task back, so the dispatcher starts it again."""
    from agentboard.kernel import overrides

    out = overrides.unguard(common.db(), common.task_board(task_id, board), task_id, actor=common.actor())
    common.emit(out, as_json, f"{task_id}: unguarded ({out['status']})")
