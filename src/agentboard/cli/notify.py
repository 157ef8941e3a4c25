"""`notify add|list|remove|test|resume`: notifications to chat, e-mail and web hooks (Apprise URLs)."""

from __future__ import annotations

import time

import click

from . import common
from .common import board_option, handle_errors, json_option

_SCOPE_HELP = "follow this task (and the tasks below it)"


@common.group("notify")
def notify() -> None:
    """Notifications: send a task's, goal's, board's or profile's events to an Apprise URL.

    Targets are Apprise URLs (json://host/path, slack://…, discord://…, ntfy://topic,
    mailto://…); `serve` and `dispatcher` deliver them."""


def _state(row: dict) -> str:  # type: ignore[type-arg]
    if row["parked"]:
        return "parked"
    if row["failures"]:
        return f"retrying ({row['failures']} failed)"
    return "ok"


@notify.command("add")
@click.argument("target", metavar="URL")
@click.option("--task", "task_id", default=None, metavar="ID", help=_SCOPE_HELP)
@click.option("--goal", "goal_id", default=None, metavar="ID", help="follow the tasks of this goal")
@click.option("--profile", default=None, metavar="NAME", help="follow the tasks assigned to this profile")
@click.option("--kind", "kinds", multiple=True, metavar="KIND",
              help="an event kind to deliver (repeatable or comma-separated; default: completed, "
                   "blocked, gave_up, crashed, timed_out, review_requested, budget_warning, "
                   "budget_exhausted, goal_completed)")
@board_option
@json_option
@handle_errors
def add(target: str, task_id: str | None, goal_id: str | None, profile: str | None,
        kinds: tuple[str, ...], board: str | None, as_json: bool) -> None:
    """Deliver events of a task, a goal, a profile's tasks or (with none of those) the whole
    board to URL, from now on. The URL is checked by Apprise and never shown back in full."""
    from agentboard.domain.errors import InvalidInput
    from agentboard.notify import subscriptions

    given = [(s, v) for s, v in (("task", task_id), ("goal", goal_id), ("profile", profile)) if v]
    if len(given) > 1:
        raise InvalidInput("give one of --task, --goal, --profile (or none for the whole board)")
    scope, subject = given[0] if given else ("board", "")
    slug = common.task_board(task_id, board) if task_id else common.resolve_board(board)
    row = subscriptions.add(common.db(), slug, scope, subject or slug, target, kinds=list(kinds),
                            actor=common.actor())
    what = "board " + slug if scope == "board" else f"{scope} {row['subject']}"
    common.emit(row, as_json, f"subscription {row['id']}: {row['target']} follows {what}")
    click.echo("note: messages go out only while `agentboard serve` or `agentboard dispatcher` runs "
               "(the notifier runs inside them); check the target now with `agentboard notify test "
               f"{row['id']}`", err=True)


@notify.command("list")
@click.option("--task", "task_id", default=None, metavar="ID",
              help="the subscriptions that follow this task (its own, inherited, goal, profile, board)")
@click.option("--all-boards", is_flag=True, help="every board")
@board_option
@json_option
@handle_errors
def list_(task_id: str | None, all_boards: bool, board: str | None, as_json: bool) -> None:
    """Subscriptions: what they follow, the target (masked), delivered events, state and last error."""
    from agentboard.kernel import notifications as kn

    if task_id:
        slug: str | None = common.task_board(task_id, board)
    else:
        slug = None if all_boards else common.existing_board(board)
    rows = kn.list_subscriptions(common.db(), slug, task_id=task_id)
    if as_json:
        common.emit_json(rows)
        return
    from .output import clip, table

    def when(ts: float | None) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"

    table(["id", "board", "follows", "target", "kinds", "delivered", "last sent", "state", "last error"],
          [(r["id"], r["board"], f"{r['scope']} {r['subject']}", clip(r["target"], 48),
            "default" if r["default_kinds"] else ",".join(r["kinds"]), r["delivered"], when(r["last_sent_at"]),
            _state(r), clip(r["last_error"] or "-", 60)) for r in rows],
          status_column=None, empty="no subscriptions; add one with `agentboard notify add URL`")


@notify.command("remove")
@click.argument("sub_id", type=int, metavar="ID")
@json_option
@handle_errors
def remove(sub_id: int, as_json: bool) -> None:
    """Remove subscription ID: nothing more is sent to its target."""
    from agentboard.kernel import notifications as kn

    row = kn.remove(common.db(), None, sub_id, actor=common.actor())
    common.emit(row, as_json, f"removed subscription {row['id']} ({row['target']})")


@notify.command("resume")
@click.argument("sub_id", type=int, metavar="ID")
@json_option
@handle_errors
def resume(sub_id: int, as_json: bool) -> None:
    """Deliver again to a parked subscription, from where it stopped (nothing it missed is lost)."""
    from agentboard.kernel import notifications as kn

    row = kn.resume(common.db(), None, sub_id, actor=common.actor())
    common.emit(row, as_json, f"subscription {row['id']} ({row['target']}) resumed")


@notify.command("test")
@click.argument("what", metavar="ID|URL")
@json_option
@handle_errors
def test(what: str, as_json: bool) -> None:
    """Send a test message to subscription ID or to an Apprise URL (a parked subscription that
    receives it is resumed). Exits 1 when the target refuses it."""
    import sys

    from agentboard.notify import subscriptions

    if what.isdigit():
        out = subscriptions.test(common.db(), None, sub_id=int(what))
    else:
        out = subscriptions.test(common.db(), None, target=what)
    if as_json:
        common.emit_json(out)
    elif out["ok"]:
        click.echo(f"sent a test message to {out['target']}" + ("; subscription resumed" if out.get("resumed") else ""))
    else:
        click.echo(f"error: {out['target']} refused the test message: {out['error']}", err=True)
    if not out["ok"]:
        sys.exit(1)
