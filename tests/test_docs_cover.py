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


def _sections(doc: str) -> dict[str, str]:
    out: dict[str, str] = {}
    parts = doc.split("\n## ")
    for part in parts[1:]:
        heading, _, body = part.partition("\n")
        out[heading.strip()] = body
    return out


def test_every_module_is_in_its_packages_section_of_the_architecture() -> None:
    pkg_root = ROOT / "src" / "agentboard"
    sections = _sections((ROOT / "docs" / "ARCHITECTURE.md").read_text())
    missing: list[str] = []
    for pkg in sorted(p for p in pkg_root.iterdir() if (p / "__init__.py").exists()):
        heading = next((h for h in sections if h.startswith(f"{pkg.name}/")), None)
        if heading is None:
            missing.append(f"{pkg.name}/ (no section)")
            continue
        for mod in sorted(pkg.rglob("*.py")):
            rel = mod.relative_to(pkg)
            if mod.name == "__init__.py" or rel.parts[0] == "migrations":
                continue
            if f"`{mod.name}`" not in sections[heading]:
                missing.append(f"{pkg.name}/{rel}")
    for mod in sorted(pkg_root.glob("*.py")):
        if mod.name not in ("__init__.py", "__main__.py") and mod.name not in sections:
            missing.append(mod.name)
    assert missing == [], f"modules not in docs/ARCHITECTURE.md: {missing}"


def test_the_cli_reference_offers_llm_check_only_the_uses_it_takes() -> None:
    import re

    from agentboard.config import LLM_USES

    doc = (ROOT / "docs" / "cli.md").read_text()
    offered = re.findall(r"agentboard llm check \[--use ([a-z|]+)\]", doc)
    assert offered and all(set(o.split("|")) == set(LLM_USES) for o in offered), offered
