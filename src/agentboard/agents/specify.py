"""Specify: an LLM rewrites a triage one-liner into a title and a body with Goal, Approach,
Acceptance criteria and Out of scope, and the task is released.

The prompt and the reading of the reply live here; the write is :func:`kernel.fanout.specify`.
With no LLM configured nothing is asked and :class:`Unavailable` says why; a reply that cannot
be used leaves the task in triage with a comment quoting it (:func:`kernel.fanout.record_failure`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import Settings
from ..domain import states
from ..domain.errors import Conflict, InvalidInput, Unavailable
from ..kernel import fanout, queries
from ..kernel.rows import TaskDetail
from ..store.engine import Database, Row
from . import llm

USE = "specifier"
#: the actor the board's events name for the helpers
ACTOR = {"specifier": "specifier", "decomposer": "decomposer"}

SYSTEM = (
    "You are a careful engineering lead. You turn rough task ideas into clear, self-contained "
    "task specifications an autonomous coding agent can carry out. You answer with one JSON "
    "object and nothing else."
)

SPEC_SHAPE = (
    '{"title": "an imperative title of at most 100 characters", '
    '"goal": "what must be true when the task is done, and why", '
    '"approach": "how to go about it, in a few sentences or bullet points", '
    '"acceptance_criteria": ["a checkable statement", "..."], '
    '"out_of_scope": ["what the task must not do", "..."]}'
)


@dataclass
class Outcome:
    """What a specify or decompose call did: ``ok`` with the task (and its new children), or a
    failure whose ``reason`` says what came back (the task is left in triage)."""

    ok: bool
    task_id: str
    reason: str | None = None
    task: Row | None = None
    children: list[Row] = field(default_factory=list)
    fanout: bool | None = None
    model: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok, "task_id": self.task_id}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.task is not None:
            out["task"] = self.task
        if self.fanout is not None:
            out["fanout"] = self.fanout
        if self.children:
            out["children"] = self.children
        if self.model:
            out["model"] = self.model
        return out


def require(settings: Settings, use: str) -> None:
    """Raise :class:`Unavailable` (``unavailable: <reason>``) unless an LLM serves ``use``; no
    request is made."""
    ok, why = llm.availability(settings, use)
    if not ok:
        raise Unavailable(why if why.startswith("unavailable") else f"unavailable: {why}")


def triage_task(db: Database, board: str, task_id: str, verb: str) -> TaskDetail:
    """The task, which must be in triage (``InvalidInput`` otherwise: nothing is asked)."""
    task = queries.task_detail(db, board, task_id, events=0)
    if task["status"] != states.TRIAGE:
        raise InvalidInput(f"task {task_id} is {task['status']}; only a triage task can be {verb}")
    return task


def describe_task(task: Mapping[str, Any]) -> str:
    """The idea as the prompt shows it: title, body, tenant and the people's comments."""
    parts = [f"Title: {task['title']}"]
    if task.get("body"):
        parts.append(f"Description:\n{task['body']}")
    if task.get("tenant"):
        parts.append(f"Tenant: {task['tenant']}")
    goal = task.get("goal")
    if goal:
        parts.append(f"It serves the goal: {goal['title']}")
    notes = [c for c in task.get("comments") or [] if c.get("author") not in ACTOR.values()]
    if notes:
        parts.append("Comments:\n" + "\n".join(f"- {c['author']}: {c['body'][:500]}" for c in notes[-5:]))
    return "\n\n".join(parts)


def prompt(task: Mapping[str, Any]) -> str:
    return (
        "Rewrite this task idea into a full task specification.\n\n"
        f"{describe_task(task)}\n\n"
        f"Answer with exactly one JSON object of this shape:\n{SPEC_SHAPE}\n"
        "Keep what the idea says; do not invent requirements it does not imply."
    )


def _items(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [line.strip().lstrip("-*• ").strip() for line in value.splitlines() if line.strip()]
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    raise InvalidInput(f"expected a list of strings, got {type(value).__name__}")


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(f"- {v}" for v in _items(value))
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text")
    return value.strip()


def spec_of(data: Any) -> tuple[str, str]:
    """The title and the markdown body of a specification object; raises :class:`InvalidInput`
    naming what is missing."""
    if not isinstance(data, dict):
        raise InvalidInput(f"the LLM answered a JSON {type(data).__name__}, not an object")
    title = _text(data.get("title"), "title")
    if not title:
        raise InvalidInput("the LLM's answer has no title")
    if isinstance(data.get("body"), str) and data["body"].strip() and not data.get("goal"):
        return title, data["body"].strip()
    goal = _text(data.get("goal"), "goal")
    criteria = _items(data.get("acceptance_criteria", data.get("acceptance")))
    if not goal or not criteria:
        raise InvalidInput("the LLM's answer lacks a goal or acceptance criteria")
    approach = _text(data.get("approach"), "approach")
    out_of_scope = _items(data.get("out_of_scope"))
    body = [f"## Goal\n\n{goal}"]
    if approach:
        body.append(f"## Approach\n\n{approach}")
    body.append("## Acceptance criteria\n\n" + "\n".join(f"- [ ] {c}" for c in criteria))
    body.append("## Out of scope\n\n" + ("\n".join(f"- {c}" for c in out_of_scope) or "- nothing named"))
    return title, "\n\n".join(body)


def spent_for_llm(db: Database, task_id: str) -> str | None:
    """Why an LLM call for ``task_id`` is not made (a budget covering it has spent its tokens or
    its cost: the call would spend more), or None. Runs and runtime limits are a worker's."""
    from ..kernel import budgets

    for b in budgets.for_task(db, task_id):
        for metric in ("tokens", "cost"):
            line = b["lines"][metric]
            if line["limit"] is not None and line["spent"] >= line["limit"]:
                return (f"the {b['scope']} {b['ref']} budget is spent ({line['text']}): the LLM is not asked; raise "
                        f"it with `agentboard budget set --{b['scope']} {b['ref']} --max-{metric} ...`")
    return None


def ask(db: Database, board: str, task_id: str, settings: Settings, use: str, text: str) -> llm.Answer:
    """One LLM call for ``task_id`` (refused, nothing asked, when a budget covering it is
    spent: :func:`spent_for_llm`); its usage recorded on the task."""
    why = spent_for_llm(db, task_id)
    if why:
        raise Conflict(why)
    answer = llm.ask(settings, use, text, system=SYSTEM)
    llm.record_usage(db, board, task_id, use, answer)
    return answer


def failed(db: Database, board: str, task_id: str, use: str, error: str, reply: str | None) -> Outcome:
    """Leave the failure on the task (a comment quoting the reply, the back-off event)."""
    fanout.record_failure(db, board, task_id, use=use, error=error, reply=reply, actor=ACTOR.get(use, use))
    return Outcome(ok=False, task_id=task_id, reason=f"{use} failed: {error}")


def apply_spec(db: Database, board: str, task_id: str, data: Any, answer: llm.Answer, use: str,
               actor: str | None) -> Outcome:
    """Write the specification ``data`` the LLM answered, or record why it cannot be used."""
    try:
        title, body = spec_of(data)
    except InvalidInput as exc:
        return failed(db, board, task_id, use, exc.message, answer.text)
    task = fanout.specify(db, board, task_id, title=title, body=body, actor=actor or ACTOR[use],
                          llm_model=answer.model)
    return Outcome(ok=True, task_id=task_id, task=task, fanout=False, model=answer.model)


def specify(db: Database, board: str, task_id: str, *, settings: Settings, actor: str | None = None) -> Outcome:
    """Specify triage task ``task_id`` with the LLM and release it.

    Raises :class:`Unavailable` when no LLM serves specify (nothing is asked) or the backend
    cannot answer; a reply that is not a usable specification is an ``ok: False`` outcome and
    a comment on the task, which stays in triage."""
    task = triage_task(db, board, task_id, "specified")
    require(settings, USE)
    answer = ask(db, board, task_id, settings, USE, prompt(task))
    try:
        data = llm.parse_json(answer.text)
    except InvalidInput as exc:
        return failed(db, board, task_id, USE, exc.message, answer.text)
    return apply_spec(db, board, task_id, data, answer, USE, actor)


__all__ = ["Outcome", "prompt", "require", "spec_of", "specify"]
