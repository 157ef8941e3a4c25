"""`chat link|unlink|links|status`: who may act on the board from Slack, Discord and Telegram."""

from __future__ import annotations

import time

import click

from . import common
from .common import handle_errors, json_option

PLATFORMS = ["slack", "discord", "telegram"]


@common.group("chat")
def chat() -> None:
    """The board from chat: linked chat users and the platforms' status (docs/chat.md)."""


@chat.command("link")
@click.argument("platform", type=click.Choice(PLATFORMS))
@click.argument("user_id")
@click.option("--role", type=click.Choice(["admin", "member", "viewer"]), default="member", show_default=True,
              help="what the chat user may do (as an API token of that role)")
@click.option("--board", default=None, metavar="SLUG", help="limit them to this board (default: every board)")
@json_option
@handle_errors
def link(platform: str, user_id: str, role: str, board: str | None, as_json: bool) -> None:
    """Let the chat user USER_ID of PLATFORM use /kanban with ROLE (linking again replaces it)."""
    from agentboard.kernel import chat_links

    out = chat_links.link(common.db(), platform, user_id, role=role, board=board, actor=common.actor())
    common.emit(out, as_json, f"{platform} user {out['user_id']}: {out['role']} on "
                              f"{out['board'] or 'every board'}")


@chat.command("unlink")
@click.argument("platform", type=click.Choice(PLATFORMS))
@click.argument("user_id")
@json_option
@handle_errors
def unlink(platform: str, user_id: str, as_json: bool) -> None:
    """The chat user may no longer act on the board."""
    from agentboard.kernel import chat_links

    out = chat_links.unlink(common.db(), platform, user_id)
    common.emit(out, as_json, f"{platform} user {out['user_id']} unlinked")


@chat.command("links")
@click.option("--platform", type=click.Choice(PLATFORMS), default=None, help="only this platform")
@json_option
@handle_errors
def links(platform: str | None, as_json: bool) -> None:
    """The linked chat users: platform, user id, role, board."""
    from agentboard.kernel import chat_links

    rows = chat_links.links(common.db(), platform)
    if as_json:
        common.emit_json(rows)
        return
    from .output import table

    table(["platform", "user", "role", "board", "linked"],
          [(r["platform"], r["user_id"], r["role"], r["board"] or "*",
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r["created_at"]))) for r in rows],
          status_column=None)


@chat.command("status")
@json_option
@handle_errors
def status(as_json: bool) -> None:
    """Which platforms are on, and whether their bot tokens work (each tried against its API).
    Exit 1 when a platform's credentials fail."""
    from agentboard.chat.status import check

    rows = check(common.settings())
    if as_json:
        common.emit_json([r.to_dict() for r in rows])
    else:
        from .output import table

        table(["platform", "on", "credentials", "detail"],
              [(r.platform, "on" if r.on else f"off (set {r.verifier})", r.credentials, r.detail) for r in rows],
              status_column=None)
    if any(r.credentials == "failed" for r in rows):
        raise SystemExit(1)
