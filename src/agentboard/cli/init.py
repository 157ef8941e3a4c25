"""`init`: create the home and the database explicitly and say where everything is."""

from __future__ import annotations

import click

from . import common
from .common import handle_errors, json_option


@click.command("init")
@json_option
@handle_errors
def init(as_json: bool) -> None:
    """Create the home folder and the database (any first command does this too)."""
    from agentboard.config import redact
    from agentboard.kernel import boards

    s = common.settings()
    existed = s.is_sqlite and s.db_path.exists()
    db = common.db()
    created = not existed if s.is_sqlite else None
    config, config_exists = str(s.home / "config.toml"), (s.home / "config.toml").exists()
    current = common.resolve_board(None)
    slugs = [str(b["slug"]) for b in boards.list_boards(db)]
    info = {
        "home": str(s.home),
        "database": redact(s.url),
        "created": created,
        "config": config,
        "config_exists": config_exists,
        "boards_dir": str(s.home / "boards"),
        "board": current,
        "boards": slugs,
    }
    if as_json:
        common.emit_json(info)
        return
    from .output import fields

    click.echo("agentboard home " + ("created" if created else "ready"))
    fields([
        ("home", info["home"]),
        ("database", info["database"]),
        ("config", config + ("" if config_exists else " (not present; defaults apply)")),
        ("board files", info["boards_dir"]),
        ("current board", current),
        ("boards", ", ".join(slugs)),
    ])
    click.echo('next: agentboard create "my first task" --assignee <profile>')
