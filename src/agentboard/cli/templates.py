"""`template list|show|run`: task-graph templates (TOML) instantiated in one transaction."""

from __future__ import annotations

import click

from . import common
from .common import board_option, handle_errors, json_option


@common.group("template")
def template() -> None:
    """Task-graph templates: HOME/templates/NAME.toml or the board target's .agentboard/templates/."""


@template.command("list")
@board_option
@json_option
@handle_errors
def list_(board: str | None, as_json: bool) -> None:
    """The templates the board can use."""
    from agentboard.kernel import templates

    slug = common.existing_board(board)
    rows = templates.list_templates(common.home(), templates.board_target(common.db(), slug))
    if as_json:
        common.emit_json(rows)
        return
    from .output import table

    table(["name", "tasks", "placeholders", "description"],
          [(r["name"], r.get("tasks", "-"), ", ".join(r.get("placeholders", [])),
            r.get("error") and f"error: {r['error']}" or r.get("description", "")) for r in rows],
          status_column=None,
          empty=f"no templates; put NAME.toml in {common.home() / 'templates'} (see docs/operations.md)")


@template.command("show")
@click.argument("name")
@board_option
@json_option
@handle_errors
def show(name: str, board: str | None, as_json: bool) -> None:
    """A template's tasks, their links and placeholders."""
    from agentboard.kernel import templates

    slug = common.existing_board(board)
    t = templates.find(common.home(), templates.board_target(common.db(), slug), name)
    if as_json:
        common.emit_json(t.as_dict())
        return
    click.echo(f"{t.name}  ({t.path})")
    if t.description:
        click.echo(t.description)
    if t.placeholders:
        click.echo("placeholders: " + ", ".join(
            f"{p}={t.vars[p]!r}" if p in t.vars else p for p in t.placeholders))
    for item in t.tasks:
        after = f"  after {', '.join(item.get('parents') or [])}" if item.get("parents") else ""
        who = f"  @{item['assignee']}" if item.get("assignee") else ""
        click.echo(f"- [{item['key']}] {item['title']}{who}{after}")


@template.command("run")
@click.argument("name")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="a placeholder's value (repeatable)")
@board_option
@json_option
@handle_errors
def run(name: str, sets: tuple[str, ...], board: str | None, as_json: bool) -> None:
    """Create the template's tasks (linked as it says) in one transaction."""
    from agentboard.kernel import templates

    slug = common.existing_board(board)
    out = templates.run(common.db(), slug, name, templates.parse_sets(sets), home=common.home(),
                        actor=common.actor())
    if as_json:
        common.emit_json(out)
        return
    from .output import status

    for t in out["tasks"]:
        click.echo(f"{t['id']}  {status(t['status'])}  {t['title']}")
