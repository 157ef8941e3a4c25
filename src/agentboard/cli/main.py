"""Entry point. Command modules load lazily so ``agentboard --version`` and worker verbs start fast.

To add a command: write it in its own module under ``agentboard/cli/`` as a click command or
group, and add one line to ``COMMANDS`` below (name → "module:attribute").
"""

from __future__ import annotations

import sys
from typing import Any

COMMANDS: dict[str, str] = {
    # name: "agentboard.cli.<module>:<attribute>"
    "dispatch": "agentboard.cli.dispatch:dispatch",
    "dispatcher": "agentboard.cli.dispatch:dispatcher",
    "demo": "agentboard.cli.dispatch:demo",
    "log": "agentboard.cli.dispatch:log_",
    "gc": "agentboard.cli.dispatch:gc",
    "init": "agentboard.cli.init:init",
    "create": "agentboard.cli.tasks:create",
    "list": "agentboard.cli.tasks:list_",
    "show": "agentboard.cli.tasks:show",
    "context": "agentboard.cli.tasks:context",
    "diff": "agentboard.cli.diff:diff",
    "edit": "agentboard.cli.tasks:edit",
    "assign": "agentboard.cli.tasks:assign",
    "link": "agentboard.cli.tasks:link",
    "unlink": "agentboard.cli.tasks:unlink",
    "comment": "agentboard.cli.tasks:comment",
    "claim": "agentboard.cli.worker:claim",
    "heartbeat": "agentboard.cli.worker:heartbeat",
    "complete": "agentboard.cli.worker:complete",
    "block": "agentboard.cli.worker:block",
    "unblock": "agentboard.cli.status:unblock",
    "archive": "agentboard.cli.purge:archive",
    "restore": "agentboard.cli.backup:restore",
    "reclaim": "agentboard.cli.status:reclaim",
    "reopen": "agentboard.cli.status:reopen",
    "release": "agentboard.cli.status:release",
    "specify": "agentboard.cli.llm_verbs:specify",
    "decompose": "agentboard.cli.llm_verbs:decompose",
    "review": "agentboard.cli.status:review",
    "attach": "agentboard.cli.attachments:attach",
    "attachments": "agentboard.cli.attachments:attachments",
    "runs": "agentboard.cli.runs:runs",
    "attempts": "agentboard.cli.races:attempts",
    "pick": "agentboard.cli.races:pick",
    "tail": "agentboard.cli.events:tail",
    "watch": "agentboard.cli.events:watch",
    "stats": "agentboard.cli.stats:stats",
    "assignees": "agentboard.cli.stats:assignees",
    "boards": "agentboard.cli.boards:boards",
    "profiles": "agentboard.cli.profiles:profiles",
    "goals": "agentboard.cli.goals:goals",
    "serve": "agentboard.cli.serve:serve",
    "tokens": "agentboard.cli.tokens:tokens",
    "mcp": "agentboard.cli.mcp:mcp",
    "wiki": "agentboard.cli.wiki:wiki",
    "llm": "agentboard.cli.llm:llm",
    "notify": "agentboard.cli.notify:notify",
    "export": "agentboard.cli.transfer:export",
    "import": "agentboard.cli.transfer:import_",
    "migrate-to": "agentboard.cli.transfer:migrate_to",
    "backup": "agentboard.cli.backup:backup",
    "attach-rm": "agentboard.cli.purge:attach_rm",
    "template": "agentboard.cli.templates:template",
    "schedule": "agentboard.cli.schedules:schedule",
    "supervisor": "agentboard.cli.supervisor:supervisor",
    "budget": "agentboard.cli.budget:budget",
    "diagnostics": "agentboard.cli.diagnostics:diagnostics",
    "promote": "agentboard.cli.diagnostics:promote",
    "unguard": "agentboard.cli.diagnostics:unguard",
    "service": "agentboard.cli.service:service",
    "chat": "agentboard.cli.chat:chat",
}


def _version() -> str:
    from agentboard import __version__

    return __version__


def build() -> Any:
    import click

    from .common import HELP_OPTIONS, Group

    class LazyGroup(Group):
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

    @click.group(cls=LazyGroup, context_settings=HELP_OPTIONS)
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
    import click

    try:
        rv = cli.main(args=args, prog_name="agentboard", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `agentboard` or `agentboard boards`: its help
        click.echo(exc.ctx.get_help(), color=exc.ctx.color)
        return
    except click.UsageError as exc:  # one line, like every other error
        where = exc.ctx.command_path if exc.ctx is not None else "agentboard"
        click.echo(f"error: {exc.format_message().rstrip('.')} (see {where} --help)", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        sys.exit(1)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    if isinstance(rv, int) and not isinstance(rv, bool) and rv:
        sys.exit(rv)


if __name__ == "__main__":  # pragma: no cover
    main()
