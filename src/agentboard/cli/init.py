"""`init`: create the home and the database explicitly and say where everything is."""

from __future__ import annotations

import re

import click

from . import common
from .common import handle_errors, json_option


def _redact(url: str) -> str:
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


@click.command("init")
@json_option
@handle_errors
def init(as_json: bool) -> None:
    """Create the home folder and the database (any first command does this too)."""
    from agentboard.kernel import boards

    s = common.settings()
    existed = s.is_sqlite and s.db_path.exists()
    db = common.db()
    info = {
        "home": str(s.home),
        "database": _redact(s.url),
        "created": not existed if s.is_sqlite else None,
        "config": str(s.home / "config.toml"),
        "config_exists": (s.home / "config.toml").exists(),
        "boards_dir": str(s.home / "boards"),
        "board": common.resolve_board(None),
        "boards": [b["slug"] for b in boards.list_boards(db)],
    }
    if as_json:
        common.emit_json(info)
        return
    from .output import fields

    click.echo("agentboard home " + ("created" if info["created"] else "ready"))
    fields([
        ("home", info["home"]),
        ("database", info["database"]),
        ("config", info["config"] + ("" if info["config_exists"] else " (not present; defaults apply)")),
        ("board files", info["boards_dir"]),
        ("current board", info["board"]),
        ("boards", ", ".join(info["boards"])),
    ])
    click.echo('next: agentboard create "my first task" --assignee <profile>')
