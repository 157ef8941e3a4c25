"""`profiles list|add|show|set|describe|rm`: the named agents the dispatcher can start."""

from __future__ import annotations

from typing import Any

import click

from . import common
from .common import handle_errors, json_option


def _parse_env(pairs: tuple[str, ...]) -> dict[str, str]:
    from agentboard.domain.errors import InvalidInput
    from agentboard.domain.settings_schema import env_name

    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidInput(f"invalid --env {pair!r}: use NAME=VALUE")
        out[env_name(key.strip())] = value
    return out


def _warn_root(p: dict[str, Any]) -> None:
    """Warnings on stderr when this host's dispatcher could not start the profile's agent (its
    program or script missing, or given by a relative path; Claude Code as root)."""
    from agentboard.dispatch.profile_check import root_problem

    for warning in p.get("warnings") or ():
        click.echo(f"warning: {warning}", err=True)
    problem = root_problem(p, common.db().settings)
    if problem:
        click.echo(f"warning: {problem}", err=True)


def _print(p: dict[str, Any]) -> None:
    from .output import fields, when

    fields([
        ("name", p["name"]), ("adapter", p.get("adapter")), ("command", p.get("command")),
        ("description", p.get("description")), ("max concurrency", p.get("max_concurrency")),
        ("env", ", ".join(f"{k}={v}" for k, v in (p.get("env") or {}).items()) or None),
        ("skills", p.get("skills")), ("model", p.get("model")),
        ("enabled", p.get("enabled")), ("orchestrator", p.get("orchestrator")),
        ("isolation", p.get("isolation")), ("permission", p.get("permission")),
        ("updated", when(p.get("updated_at"))),
    ])


@common.group("profiles")
def profiles() -> None:
    """Profiles: named agents (how to start them, what they are good at, limits)."""


@profiles.command("list")
@json_option
@handle_errors
def list_(as_json: bool) -> None:
    """Every profile."""
    from agentboard.kernel import profiles as kp

    rows = kp.list_profiles(common.db())
    if as_json:
        common.emit_json(rows)
        return
    from .output import clip, table

    table(["name", "adapter", "enabled", "max", "command", "description"],
          [(p["name"], p["adapter"], p["enabled"], p.get("max_concurrency"), clip(p["command"], 40),
            clip(p.get("description"), 50)) for p in rows],
          status_column=None, empty="no profiles yet; add one with `agentboard profiles add NAME --command CMD`")


@profiles.command("add")
@click.argument("name")
@click.option("--command", "command", default=None, metavar="CMD",
              help="how to start the agent (an agent CLI's adapter: default its executable on PATH)")
@click.option("--adapter", default="command", metavar="A",
              help="command (default), claude, codex, gemini or opencode")
@click.option("--description", default="", metavar="D", help="what it is good at (used for routing)")
@click.option("--max-concurrency", default=None, type=int, metavar="N")
@click.option("--env", "env", multiple=True, metavar="K=V", help="environment for its workers (repeatable)")
@click.option("--skill", "skills", multiple=True, metavar="S")
@click.option("--model", "model_name", default=None, metavar="M")
@click.option("--orchestrator", is_flag=True, help="offer it the orchestrator tools")
@click.option("--disabled", is_flag=True, help="add it switched off")
@click.option("--isolation", default="none", metavar="I",
              help="none (default), user (as the worker user) or sandbox (under bubblewrap)")
@click.option("--permission", default="edit", metavar="P",
              help="agent CLIs: edit (default: edit files, run commands), full (no checks) or read")
@json_option
@handle_errors
def add(name: str, command: str | None, adapter: str, description: str, max_concurrency: int | None,
        env: tuple[str, ...], skills: tuple[str, ...], model_name: str | None, orchestrator: bool,
        disabled: bool, isolation: str, permission: str, as_json: bool) -> None:
    """Add a profile."""
    from agentboard.kernel import profiles as kp

    p = kp.add(common.db(), name, command=command, adapter=adapter, description=description,
               max_concurrency=max_concurrency, env=_parse_env(env), skills=list(skills),
               model_name=model_name, enabled=not disabled, orchestrator=orchestrator,
               isolation=isolation, permission=permission, actor=common.actor())
    _warn_root(p)
    common.emit(p, as_json, f"profile {p['name']} added ({p['adapter']}: {p['command']})")


@profiles.command("show")
@click.argument("name")
@json_option
@handle_errors
def show(name: str, as_json: bool) -> None:
    """One profile."""
    from agentboard.kernel import profiles as kp

    p = kp.get(common.db(), name)
    if as_json:
        common.emit_json(p)
    else:
        _print(p)


@profiles.command("set")
@click.argument("name")
@click.option("--command", "command", default=None, metavar="CMD")
@click.option("--adapter", default=None, metavar="A")
@click.option("--description", default=None, metavar="D")
@click.option("--max-concurrency", default=None, type=int, metavar="N")
@click.option("--env", "env", multiple=True, metavar="K=V", help="set a variable; K= removes it")
@click.option("--skill", "skills", multiple=True, metavar="S", help="replace the skills")
@click.option("--model", "model_name", default=None, metavar="M")
@click.option("--orchestrator/--no-orchestrator", default=None)
@click.option("--enabled/--disabled", default=None)
@click.option("--isolation", default=None, metavar="I",
              help="none, user (as the worker user) or sandbox (under bubblewrap)")
@click.option("--permission", default=None, metavar="P", help="claude/codex agents: edit, full or read")
@json_option
@handle_errors
def set_(name: str, command: str | None, adapter: str | None, description: str | None,
         max_concurrency: int | None, env: tuple[str, ...], skills: tuple[str, ...],
         model_name: str | None, orchestrator: bool | None, enabled: bool | None, isolation: str | None,
         permission: str | None, as_json: bool) -> None:
    """Change a profile's fields."""
    from agentboard.domain.errors import InvalidInput
    from agentboard.kernel import profiles as kp

    db = common.db()
    fields: dict[str, Any] = {"command": command, "adapter": adapter, "description": description,
                              "max_concurrency": max_concurrency, "model_name": model_name,
                              "orchestrator": orchestrator, "enabled": enabled, "isolation": isolation,
                              "permission": permission}
    if env:
        merged = dict(kp.get(db, name)["env"])
        for key, value in _parse_env(env).items():
            if value == "":
                merged.pop(key, None)
            else:
                merged[key] = value
        fields["env"] = merged
    if skills:
        fields["skills"] = list(skills)
    if all(v is None for v in fields.values()):
        raise InvalidInput("nothing to change: give at least one option (see agentboard profiles set --help)")
    p = kp.update(db, name, actor=common.actor(), **fields)
    _warn_root(p)
    common.emit(p, as_json, f"profile {p['name']} updated")


@profiles.command("describe")
@click.argument("name")
@click.option("--text", default=None, metavar="T", help="what the agent is good at")
@click.option("--auto", is_flag=True,
              help="let the LLM draft it from the profile's command and its recent runs")
@click.option("--dry-run", is_flag=True, help="with --auto: print the draft, store nothing")
@json_option
@handle_errors
def describe(name: str, text: str | None, auto: bool, dry_run: bool, as_json: bool) -> None:
    """Set the description used to route work to the profile (--text, or --auto to draft it with
    the LLM)."""
    from agentboard.domain.errors import InvalidInput
    from agentboard.kernel import profiles as kp

    if auto == (text is not None):
        raise InvalidInput("give either --text T or --auto (see agentboard profiles describe --help)")
    if dry_run and not auto:
        raise InvalidInput("--dry-run goes with --auto")
    db = common.db()
    if text is not None:
        p = kp.update(db, name, description=text, actor=common.actor())
        common.emit(p, as_json, f"profile {p['name']} described")
        return
    from agentboard.agents import describe as agent_describe

    drafted, answer = agent_describe.draft(db, common.settings(), name)
    if not drafted:
        from agentboard.domain.errors import Unavailable

        raise Unavailable("unavailable: the LLM answered an empty description")
    if dry_run:
        p = kp.get(db, name)
    else:
        p = kp.update(db, name, description=drafted, actor=common.actor())
    if as_json:
        common.emit_json({**p, "description": drafted, "stored": not dry_run, "model": answer.model,
                          "usage": answer.usage})
        return
    click.echo(drafted)
    note = "draft only, nothing stored" if dry_run else f"stored as the description of {p['name']}"
    click.echo(f"({note}; {answer.backend} {answer.model or ''})".replace(" )", ")"), err=True)


@profiles.command("rm")
@click.argument("name")
@json_option
@handle_errors
def rm(name: str, as_json: bool) -> None:
    """Remove a profile (refused while it has running tasks); warns of the unfinished tasks still
    assigned to it, which then wait."""
    from agentboard.kernel import profiles as kp

    p = kp.remove(common.db(), name, actor=common.actor())
    common.emit(p, as_json, f"profile {p['name']} removed")
    for warning in p.get("warnings") or ():
        click.echo(f"warning: {warning}", err=True)


@profiles.command("check")
@click.argument("name", required=False)
@click.option("--no-run", is_flag=True, help="do not start the agent CLI to check its flags")
@click.option("--turn", is_flag=True,
              help="also take one tiny real turn (\"reply with OK\"): login, model, latency, usage (spends tokens)")
@json_option
@handle_errors
def check(name: str | None, no_run: bool, turn: bool, as_json: bool) -> None:
    """Would a profile's agent start? Its executable and version, the command line it would run
    (prompt elided), whether the CLI accepts those flags (started with no credentials and no
    network), MCP wiring and credentials — each with its fix; --turn asks its real model for
    one reply. Exit 1 when a check fails."""
    from agentboard.dispatch import profile_check
    from agentboard.kernel import profiles as kp

    db = common.db()
    rows = [kp.get(db, name)] if name else kp.list_profiles(db)
    reports = [r.to_dict() for r in profile_check.check_profiles(rows, db.settings, run=not no_run, turn=turn)]
    if as_json:
        common.emit_json(reports[0] if name else reports)
    else:
        for i, rep in enumerate(reports):
            if i:
                click.echo("")
            click.echo(f"{rep['profile']} ({rep['adapter']}): {'ok' if rep['ok'] else 'NOT READY'}")
            for item in rep["checks"]:
                mark = "ok  " if item["ok"] and not item["warn"] else ("warn" if item["ok"] else "FAIL")
                click.echo(f"  {mark} {item['name']}: {item['detail']}")
                if item["fix"] and (not item["ok"] or item["warn"]):
                    click.echo(f"       fix: {item['fix']}")
        if not reports:
            click.echo("no profiles: add one with `agentboard profiles add NAME --adapter claude`")
    if not all(r["ok"] for r in reports):
        raise SystemExit(1)
