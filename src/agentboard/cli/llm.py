"""`llm check`: is the board's LLM reachable, which one is it, how fast does it answer."""

from __future__ import annotations

from typing import Any

import click

from . import common
from .common import handle_errors, json_option

#: the tiny prompt `llm check` sends
CHECK_PROMPT = "Reply with the single word OK."


@common.group("llm")
def llm() -> None:
    """The LLM the board asks (an OpenAI-compatible endpoint or an agent CLI command)."""


@llm.command("check")
@click.option("--use", "use", default="specifier", show_default=True, metavar="USE",
              help="check the LLM of this use (specifier, decomposer, reviewer, describer)")
@click.option("--timeout", default=None, type=float, metavar="S", help="seconds to wait (default: llm_timeout)")
@json_option
@handle_errors
def check(use: str, timeout: float | None, as_json: bool) -> None:
    """Send one tiny prompt and print the backend, model, latency and usage, or why it failed
    (exit 6)."""
    from agentboard.agents import llm as agent_llm
    from agentboard.domain.errors import InvalidInput, Unavailable

    if use not in agent_llm.USES:
        raise InvalidInput(f"unknown LLM use {use!r}: use one of {', '.join(agent_llm.USES)}")
    settings = common.settings()
    ok, where = agent_llm.availability(settings, use)
    if not ok:
        raise Unavailable(f"unavailable: {where}")
    answer = agent_llm.ask(settings, use, CHECK_PROMPT, timeout=timeout)
    out: dict[str, Any] = {"ok": True, "use": use, "backend": answer.backend, "via": where,
                           "model": answer.model, "latency_s": round(answer.latency_s, 3),
                           "usage": answer.usage, "answer": answer.text}
    if as_json:
        common.emit_json(out)
        return
    from .output import clip, fields

    usage = answer.usage or {}
    fields([
        ("use", use), ("backend", where), ("model", answer.model or "(not reported)"),
        ("latency", f"{answer.latency_s * 1000:.0f} ms"),
        ("usage", ", ".join(f"{k} {_num(v)}" for k, v in usage.items()) or "(not reported)"),
        ("answer", clip(answer.text.strip(), 80)),
    ])


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) and not value.is_integer() else str(int(value))
