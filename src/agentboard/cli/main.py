"""Entry point. Command modules load lazily so ``agentboard --version`` and worker verbs start fast.

To add a command: write it in its own module under ``agentboard/cli/`` as a click command or
group, and add one line to ``COMMANDS`` below (name → "module:attribute").
"""

from __future__ import annotations

import sys
from typing import Any

COMMANDS: dict[str, str] = {
    # name: "agentboard.cli.<module>:<attribute>"
}


def _version() -> str:
    from agentboard import __version__

    return __version__


def build() -> Any:
    import click

    class LazyGroup(click.Group):
        def list_commands(self, ctx: click.Context) -> list[str]:
            return sorted(COMMANDS)

        def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
            target = COMMANDS.get(name)
            if target is None:
                return None
            import importlib

            mod, _, attr = target.partition(":")
            return getattr(importlib.import_module(mod), attr)  # type: ignore[no-any-return]

        def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
            name = args[0] if args else ""
            if name and name not in COMMANDS and not name.startswith("-"):
                from difflib import get_close_matches

                near = get_close_matches(name, list(COMMANDS), n=1)
                hint = f"; did you mean '{near[0]}'?" if near else "; see agentboard --help"
                click.echo(f"error: unknown command '{name}'{hint}", err=True)
                ctx.exit(2)
            return super().resolve_command(ctx, args)

    @click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(_version(), "--version", "-V", prog_name="agentboard")
    def cli() -> None:
        """agentboard: a durable task board for AI agents and people."""

    return cli


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args in (["--version"], ["-V"]):
        print(f"agentboard {_version()}")
        return
    cli = build()
    cli.main(args=args, prog_name="agentboard")


if __name__ == "__main__":  # pragma: no cover
    main()
