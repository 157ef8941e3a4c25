"""Drafting a profile's description (what the agent is good at, used to route work to it) from
its command and what its recent runs did."""

from __future__ import annotations

from typing import Any

from ..config import Settings
from ..domain.settings_schema import DESCRIPTION_MAX
from ..store.engine import Database
from . import llm

SYSTEM = ("You write the one-paragraph description of an AI agent profile on a task board. "
          "Other agents read it to decide which tasks to route to this profile.")

#: how many recent runs the prompt shows
RECENT_RUNS = 15


def prompt(profile: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    """The question put to the LLM: the profile's command and settings, its recent runs."""
    lines = [
        f"Profile name: {profile['name']}",
        f"Adapter: {profile.get('adapter') or 'command'}",
        f"Command: {profile.get('command') or ''}",
    ]
    if profile.get("model"):
        lines.append(f"Model: {profile['model']}")
    if profile.get("skills"):
        lines.append("Skills: " + ", ".join(map(str, profile["skills"])))
    if profile.get("description"):
        lines.append(f"Current description: {profile['description']}")
    if runs:
        lines.append("")
        lines.append("Its most recent runs (task title, outcome: summary):")
        for r in runs:
            summary = " ".join(str(r.get("summary") or "(no summary)").split())[:300]
            lines.append(f"- {r.get('title')} ({r.get('outcome') or 'ended'}): {summary}")
    else:
        lines.append("")
        lines.append("It has no finished runs yet.")
    lines.append("")
    lines.append("Write its description: what kinds of tasks it is good at and what it should not "
                 "be given, in at most three sentences of plain text (no heading, no quotes, no "
                 "markdown). Say only what the command and the runs support.")
    return "\n".join(lines)


def draft(db: Database, settings: Settings, name: str) -> tuple[str, llm.Answer]:
    """A description for profile ``name`` drafted by the ``describer`` LLM; raises
    :class:`agentboard.domain.errors.Unavailable` when no LLM can answer."""
    from ..kernel import profiles

    profile = profiles.get(db, name)
    runs = profiles.recent_runs(db, name, limit=RECENT_RUNS)
    answer = llm.ask(settings, "describer", prompt(profile, runs), system=SYSTEM)
    return clean(answer.text), answer


def clean(text: str) -> str:
    """The reply as a description: surrounding quotes and fences gone, whitespace collapsed,
    cut to the longest description a profile may have."""
    body = text.strip().strip("`").strip()
    if len(body) >= 2 and body[0] == body[-1] and body[0] in "\"'":
        body = body[1:-1].strip()
    body = " ".join(body.split())
    return body[:DESCRIPTION_MAX]
