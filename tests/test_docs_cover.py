"""The reference docs name everything there is: every CLI command and subcommand in docs/cli.md,
every setting of a home in docs/settings.md."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from agentboard.cli.main import build
from agentboard.config import Settings

ROOT = Path(__file__).resolve().parent.parent


def _commands(group: click.Group, ctx: click.Context, prefix: tuple[str, ...] = ()) -> list[str]:
    out: list[str] = []
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        path = (*prefix, name)
        out.append(" ".join(path))
        if isinstance(sub, click.Group):
            out.extend(_commands(sub, ctx, path))
    return out


def test_every_cli_command_and_subcommand_is_in_the_cli_reference() -> None:
    cli = build()
    commands = _commands(cli, click.Context(cli))
    doc = (ROOT / "docs" / "cli.md").read_text()
    missing = [c for c in commands if f"agentboard {c}" not in doc and f"`{c}" not in doc]
    assert len(commands) > 100
    assert missing == [], f"not in docs/cli.md: {missing}"


def test_every_setting_is_in_the_settings_reference() -> None:
    not_settings = {"home", "extra"}
    names = [f.name for f in dataclasses.fields(Settings) if f.name not in not_settings]
    doc = (ROOT / "docs" / "settings.md").read_text()
    missing = [n for n in names if f"| `{n}` |" not in doc]
    assert len(names) > 50
    assert missing == [], f"not in docs/settings.md: {missing}"
