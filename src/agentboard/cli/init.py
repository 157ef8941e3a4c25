"""`init`: create the home and the database explicitly and say where everything is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from . import common
from .common import handle_errors, json_option


def _worker_user(home: Path, name: str) -> dict[str, Any]:
    """Create the worker user if missing, close the home (0700) to it, record it in config.toml
    and make the folder of its scratch workspaces."""
    from agentboard.dispatch import isolation, workspaces

    created = isolation.ensure_worker_user(name)
    isolation.close_home(home, name)
    isolation.record_worker_user(home / "config.toml", name)
    root = workspaces.isolated_root(home)
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o711)
    return {"worker_user": name, "worker_user_created": created, "worker_workspaces": str(root),
            "home_mode": "0700"}


@click.command("init")
@click.option("--worker-user", default=None, metavar="NAME",
              help="(as root) create this system user for `isolation = user` workers and close the home to it")
@json_option
@handle_errors
def init(worker_user: str | None, as_json: bool) -> None:
    """Create the home folder and the database (any first command does this too)."""
    from agentboard.config import redact
    from agentboard.kernel import boards

    s = common.settings()
    existed = s.is_sqlite and s.db_path.exists()
    db = common.db()
    created = not existed if s.is_sqlite else None
    worker = _worker_user(s.home, worker_user) if worker_user else None
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
    if worker is not None:
        info.update(worker)
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
        *([("worker user", f"{worker['worker_user']} ({'created' if worker['worker_user_created'] else 'exists'})"),
           ("worker workspaces", worker["worker_workspaces"])] if worker is not None else []),
    ])
    click.echo('next: agentboard create "my first task" --assignee <profile>')
