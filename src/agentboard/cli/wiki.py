"""``agentboard wiki``: the board's knowledge pages (published ones are handed to workers). Titles
and bodies are printed through ``output.printable``: a worker's draft cannot act on the terminal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from .common import (
    actor,
    board_option,
    db,
    emit_json,
    existing_board,
    group,
    handle_errors,
    json_option,
    read_text,
)


def _line(p: Mapping[str, Any]) -> str:
    from .output import printable

    src = f"  (from {p['source_task_id']})" if p.get("source_task_id") else ""
    return printable(f"{p['slug']:<32} {p['status']:<9} {p['title']}{src}")


@group("wiki")
def wiki() -> None:
    """Wiki pages: list, show, add, publish, discard."""


@wiki.command("list")
@click.option("--status", type=click.Choice(["published", "draft"]), default=None, help="only pages with this status")
@board_option
@json_option
@handle_errors
def list_(status: str | None, board: str | None, as_json: bool) -> None:
    """List the board's wiki pages."""
    from agentboard.kernel import wiki as kwiki

    pages = kwiki.list_pages(db(), existing_board(board), status=status)
    if as_json:
        emit_json([{k: v for k, v in p.items() if k != "body"} for p in pages])
        return
    if not pages:
        click.echo("No wiki pages.")
    for p in pages:
        click.echo(_line(p))


@wiki.command("show")
@click.argument("slug")
@board_option
@json_option
@handle_errors
def show(slug: str, board: str | None, as_json: bool) -> None:
    """Print one page."""
    from agentboard.kernel import wiki as kwiki

    page = kwiki.get(db(), existing_board(board), slug)
    if as_json:
        emit_json(page)
        return
    from .output import printable

    # a draft is a worker's text: what would act on the terminal is shown escaped
    click.echo(printable(f"# {page['title']}\n\n[{page['slug']} · {page['status']}]\n"))
    click.echo(printable(page["body"].rstrip()))


@wiki.command("add")
@click.argument("slug")
@click.option("--title", required=True, help="the page title")
@click.option("--file", "path", default=None, metavar="F", help="markdown file with the body (- for stdin)")
@click.option("--body", default=None, help="the body as text (instead of --file)")
@click.option("--publish", is_flag=True, help="publish at once (default: draft)")
@click.option("--replace", is_flag=True, help="overwrite an existing page with this slug")
@board_option
@json_option
@handle_errors
def add(slug: str, title: str, path: str | None, body: str | None, publish: bool, replace: bool,
        board: str | None, as_json: bool) -> None:
    """Add a page (a draft unless --publish)."""
    from agentboard.domain.errors import InvalidInput
    from agentboard.kernel import wiki as kwiki

    text = read_text(body, path, "--body") if path is None else read_text(None, path, "--file")
    if text is None:
        raise InvalidInput("give the page body with --file F (or --body TEXT)")
    page = kwiki.add(db(), existing_board(board), slug, title=title, body=text, publish=publish,
                     replace=replace, actor=actor())
    if as_json:
        emit_json(page)
    else:
        click.echo(f"{page['slug']}: {page['status']}")


@wiki.command("publish")
@click.argument("slug")
@board_option
@json_option
@handle_errors
def publish(slug: str, board: str | None, as_json: bool) -> None:
    """Publish a draft page (workers start seeing it)."""
    from agentboard.kernel import wiki as kwiki

    page = kwiki.publish(db(), existing_board(board), slug, actor=actor())
    emit_json(page) if as_json else click.echo(f"{page['slug']}: published")


@wiki.command("discard")
@click.argument("slug")
@board_option
@json_option
@handle_errors
def discard(slug: str, board: str | None, as_json: bool) -> None:
    """Remove a page (typically a draft proposed by a worker)."""
    from agentboard.kernel import wiki as kwiki

    page = kwiki.discard(db(), existing_board(board), slug, actor=actor())
    emit_json({"slug": page["slug"], "discarded": True}) if as_json else click.echo(f"{page['slug']}: discarded")
