"""The LLM reviewer: one LLM call over a task's review context, answered with the verdict schema
of ``protocol.review`` (``.board/review-verdict.json``'s).

Prose and code fences around the JSON are tolerated (``llm.parse_json``); an answer that is not a
valid verdict is an :class:`~agentboard.domain.errors.InvalidInput` quoting what came back, never
a verdict made up from it.
"""

from __future__ import annotations

import json
from typing import Any

from ..config import Settings
from ..domain.errors import InvalidInput
from ..protocol import review
from . import llm

USE = "reviewer"

SYSTEM = (
    "You are a careful reviewer of work done by a software agent on a task board. You read the task, "
    "its acceptance criteria, the worker's summary, the verification output and the diff, and judge "
    "whether the work does what the task asks. You never approve work you cannot see."
)

ANSWER = """
---

Answer with exactly one JSON object and nothing else:

{"verdict": "approved" | "changes_requested" | "rejected", "score": <integer 0-100>,
 "summary": "<why; for changes_requested what must change>",
 "findings": [{"file": "<path>", "severity": "critical" | "major" | "minor" | "info", "message": "<text>"}]}

`approved` finishes the task; `changes_requested` sends it back to its worker with your summary;
`rejected` means the task cannot be done this way and a person must look. `findings` may be empty.
"""


def prompt(context_md: str) -> str:
    """The prompt of the LLM reviewer over a review context."""
    return context_md.rstrip("\n") + "\n" + ANSWER


def parse(text: str) -> dict[str, Any]:
    """The verdict in an LLM's answer, validated; :class:`InvalidInput` saying what came back
    otherwise."""
    data = llm.parse_json(text)
    errs = review.validate_verdict(data)
    if errs:
        raise InvalidInput("the LLM reviewer's answer is not a valid verdict (" + "; ".join(errs[:5])
                           + f"): {json.dumps(data)[:200]}")
    return data  # type: ignore[no-any-return]


def ask(settings: Settings, context_md: str) -> tuple[dict[str, Any], llm.Answer]:
    """One LLM call over ``context_md``: the validated verdict and the answer (its model and usage).
    Raises ``Unavailable`` (no LLM, unreachable, timed out) or ``InvalidInput`` (no valid verdict)."""
    answer = llm.ask(settings, USE, prompt(context_md), system=SYSTEM)
    return parse(answer.text), answer


__all__ = ["ANSWER", "SYSTEM", "USE", "ask", "parse", "prompt"]
