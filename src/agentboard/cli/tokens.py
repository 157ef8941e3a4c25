"""`tokens create|list|revoke`: API tokens for people and scripts (stored only as hashes)."""

from __future__ import annotations

import time

import click

from . import common
from .common import handle_errors, json_option


@common.group("tokens")
def tokens() -> None:
    """API tokens: admin (everything), member (read and write tasks), viewer (read-only)."""


@tokens.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(["admin", "member", "viewer"]), default="member",
              show_default=True, help="what the token may do")
@click.option("--board", "boards", multiple=True, metavar="SLUG",
              help="limit the token to this board (repeatable; default: every board)")
@json_option
@handle_errors
def create(name: str, role: str, boards: tuple[str, ...], as_json: bool) -> None:
    """Create a token and print it once (only its hash is stored)."""
    from agentboard.kernel import tokens as kt

    out = kt.create(common.db(), name, role=role, boards=list(boards))
    if as_json:
        common.emit_json(out)
        return
    scope = ", ".join(out["boards"]) or "every board"
    click.echo(out["token"])
    click.echo(f"token {out['name']!r}: {out['role']} on {scope}. It is shown only now; keep it safe.",
               err=True)


@tokens.command("list")
@click.option("--all", "include_revoked", is_flag=True, help="include revoked tokens")
@json_option
@handle_errors
def list_(include_revoked: bool, as_json: bool) -> None:
    """Tokens (never their values): name, role, boards, when created and last used."""
    from agentboard.kernel import tokens as kt

    rows = kt.list_tokens(common.db(), include_revoked=include_revoked)
    if as_json:
        common.emit_json(rows)
        return
    from .output import table

    def when(ts: float | None) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"

    table(["id", "name", "role", "boards", "created", "last used", "revoked"],
          [(r["id"], r["name"], r["role"], ", ".join(r["boards"]) or "*", when(r["created_at"]),
            when(r["last_used_at"]), when(r["revoked_at"])) for r in rows],
          status_column=None)


@tokens.command("revoke")
@click.argument("name")
@json_option
@handle_errors
def revoke(name: str, as_json: bool) -> None:
    """Revoke the token NAME (or id): it stops working at once."""
    from agentboard.kernel import tokens as kt

    rows = kt.revoke(common.db(), name)
    if as_json:
        common.emit_json(rows)
        return
    for r in rows:
        click.echo(f"revoked token {r['name']!r} (id {r['id']})")
