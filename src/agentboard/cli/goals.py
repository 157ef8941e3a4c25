"""`goals create|list|show|edit|cancel`: named outcomes that group tasks."""

from __future__ import annotations

import click

from agentboard.domain import states

from . import common
from .common import board_option, goal_board_option, handle_errors, json_option


@common.group("goals")
def goals() -> None:
    """Goals: named outcomes; when all its tasks are done a goal is verified, then done."""


@goals.command("create")
@click.argument("title")
@click.option("--body", default=None)
@click.option("--body-file", default=None, metavar="F", help="read the body from a file ('-' = stdin)")
@click.option("--acceptance", "acceptance", multiple=True, metavar="A", help="an acceptance criterion (repeatable)")
@click.option("--priority", default="0", metavar="N")
@click.option("--verify", "verify", multiple=True, metavar="CMD",
              help="a command that checks the acceptance once all tasks are done (repeatable; check:NAME "
                   "for a named check); run in the board's target")
@board_option
@json_option
@handle_errors
def create(title: str, body: str | None, body_file: str | None, acceptance: tuple[str, ...],
           priority: str, verify: tuple[str, ...], board: str | None, as_json: bool) -> None:
    """Create a goal."""
    from agentboard.domain import model
    from agentboard.kernel import goals as kg

    slug = common.resolve_board(board)
    text = common.read_text(body, body_file) or ""
    g = kg.create(common.db(), slug, title, body=text, acceptance=list(acceptance), priority=model.priority(priority),
                  verify=list(verify), actor=common.actor())
    common.emit(g, as_json, f"{g['id']}  {g['title']}")


@goals.command("list")
@click.option("--status", default=None, type=click.Choice(states.GOAL_STATUSES))
@board_option
@json_option
@handle_errors
def list_(status: str | None, board: str | None, as_json: bool) -> None:
    """Goals with progress (done/total), blocked tasks, runs and cost."""
    from agentboard.kernel import goals as kg

    slug = common.existing_board(board)
    rows = kg.list_goals(common.db(), slug, status=status)
    if as_json:
        common.emit_json(rows)
        return
    from .output import clip, table

    table(["id", "status", "pri", "done", "blocked", "runs", "cost", "title"],
          [(g["id"], g["status"], g["priority"], f"{g['done']}/{g['total']}", len(g["blocked"]) or "-",
            g["runs"], f"${g['cost_usd']:.2f}", clip(g["title"], 60)) for g in rows],
          status_column=None, empty=f"no goals on board {slug!r}")


@goals.command("show")
@click.argument("goal_id", metavar="G")
@goal_board_option
@json_option
@handle_errors
def show(goal_id: str, board: str | None, as_json: bool) -> None:
    """A goal with its acceptance criteria and tasks."""
    from agentboard.kernel import goals as kg

    slug = common.goal_board(goal_id, board)
    g = kg.show(common.db(), slug, goal_id)
    if as_json:
        common.emit_json(g)
        return
    from .output import clip, fields, heading, table

    fields([("id", g["id"]), ("title", g["title"]), ("status", g["status"]), ("priority", g["priority"]),
            ("progress", f"{g['done']}/{g['total']} done"), ("runs", g["runs"]),
            ("cost", f"${g['cost_usd']:.4f}")])
    if g["status"] == "verifying":  # its verify commands, the supervisor or a person decides
        click.echo(f"waits for a verdict: {kg.verdict_hint(goal_id)}")
    if g.get("body"):
        click.echo("")
        click.echo(g["body"].rstrip())
    if g.get("acceptance"):
        click.echo("")
        heading("Acceptance")
        for a in g["acceptance"]:
            click.echo(f"- {a}")
    if g.get("tasks"):
        click.echo("")
        table(["id", "status", "assignee", "title", "blocked because"],
              [(t["id"], t["status"], t["assignee"], clip(t["title"], 50), clip(t.get("block_reason"), 40))
               for t in g["tasks"]], title="Tasks")


@goals.command("edit")
@click.argument("goal_id", metavar="G")
@click.option("--title", default=None)
@click.option("--body", default=None)
@click.option("--body-file", default=None, metavar="F", help="read the body from a file ('-' = stdin)")
@click.option("--acceptance", "acceptance", multiple=True, metavar="A",
              help="an acceptance criterion (repeatable; replaces the list)")
@click.option("--no-acceptance", is_flag=True, help="clear the acceptance criteria")
@click.option("--priority", default=None, metavar="N")
@click.option("--verify", "verify", multiple=True, metavar="CMD", help="a check command (repeatable; replaces the list)")
@click.option("--no-verify", is_flag=True, help="clear the check commands")
@goal_board_option
@json_option
@handle_errors
def edit(goal_id: str, title: str | None, body: str | None, body_file: str | None, acceptance: tuple[str, ...],
         no_acceptance: bool, priority: str | None, verify: tuple[str, ...], no_verify: bool, board: str | None,
         as_json: bool) -> None:
    """Change a goal's title, body, acceptance criteria, priority or check commands."""
    from agentboard.domain import model
    from agentboard.domain.errors import InvalidInput
    from agentboard.kernel import goals as kg

    if (acceptance and no_acceptance) or (verify and no_verify):
        raise InvalidInput("give --acceptance or --no-acceptance (and --verify or --no-verify), not both")
    fields = {"title": title, "body": common.read_text(body, body_file) if (body or body_file) else None,
              "acceptance": [] if no_acceptance else list(acceptance) or None,
              "priority": model.priority(priority) if priority is not None else None,
              "verify": [] if no_verify else list(verify) or None}
    if all(v is None for v in fields.values()):
        raise InvalidInput("nothing to change: give --title, --body, --acceptance, --priority or --verify")
    slug = common.goal_board(goal_id, board)
    g = kg.update(common.db(), slug, goal_id, actor=common.actor(), **fields)
    common.emit(g, as_json, f"{g['id']}: edited")


@goals.command("cancel")
@click.argument("goal_id", metavar="G")
@goal_board_option
@json_option
@handle_errors
def cancel(goal_id: str, board: str | None, as_json: bool) -> None:
    """Cancel an active goal (its tasks stay as they are)."""
    from agentboard.kernel import goals as kg

    slug = common.goal_board(goal_id, board)
    g = kg.cancel(common.db(), slug, goal_id, actor=common.actor())
    common.emit(g, as_json, f"{g['id']}: cancelled")
