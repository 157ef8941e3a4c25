"""Decompose: an LLM reads a triage idea and the roster (profile names and descriptions) and
either fans it out into 2–6 linked tasks or says ``fanout: false`` and specifies it.

The prompt and the reading of the reply live here; the graph is written in one transaction by
:func:`kernel.fanout.decompose` (the root waits for every new task, so its assignee judges
completion). A reply that cannot be used leaves the task in triage with a comment quoting it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import Settings
from ..domain.errors import InvalidInput
from ..kernel import fanout, profiles
from ..store.engine import Database, Row
from . import llm
from .specify import (
    ACTOR,
    SPEC_SHAPE,
    Outcome,
    apply_spec,
    ask,
    describe_task,
    failed,
    require,
    triage_task,
)

USE = "decomposer"

SHAPE = (
    '{"fanout": true, "tasks": [{"title": "...", "body": "what to do and how to tell it is done", '
    '"assignee": "a profile name from the roster", "parents": [indexes of tasks in this list that '
    'must be done first]}, ...]}'
)


def roster(db: Database) -> list[Row]:
    """The enabled profiles an LLM may assign work to: name and description."""
    return [{"name": p["name"], "description": p.get("description") or ""}
            for p in profiles.list_profiles(db) if p.get("enabled", True)]


def prompt(task: Mapping[str, Any], people: list[Row]) -> str:
    team = "\n".join(f"- {p['name']}: {p['description'] or '(no description)'}" for p in people) or "- (none)"
    return (
        "Decide whether this task idea should be split into several tasks for different agents.\n\n"
        f"{describe_task(task)}\n\n"
        f"The agents (profiles) available:\n{team}\n\n"
        f"If it is worth splitting, answer with {fanout.MIN_CHILDREN}-{fanout.MAX_CHILDREN} tasks, "
        "each assigned to the best-suited profile, with parents given by index (a task starts only "
        f"once its parents are done):\n{SHAPE}\n"
        "If it is one coherent piece of work, answer instead with fanout false and its "
        f"specification:\n{{\"fanout\": false, \"spec\": {SPEC_SHAPE}}}\n"
        "Answer with exactly one JSON object."
    )


def _parents(value: Any, i: int) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int | str):
        value = [value]
    if not isinstance(value, list):
        raise InvalidInput(f"task {i}: parents must be a list of indexes")
    out = []
    for p in value:
        try:
            out.append(int(p))
        except (TypeError, ValueError):
            raise InvalidInput(f"task {i}: parent {p!r} is not an index") from None
    return tuple(out)


def children_of(data: Any) -> list[fanout.Child]:
    """The tasks of a fan-out answer, checked; raises :class:`InvalidInput` saying what is wrong."""
    items = data.get("tasks", data.get("children")) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise InvalidInput("the LLM's fan-out has no list of tasks")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidInput(f"task {i} of the fan-out is not an object")
        title = item.get("title")
        if not isinstance(title, str) or not title.strip():
            raise InvalidInput(f"task {i} of the fan-out has no title")
        body = item.get("body", item.get("description")) or ""
        assignee = item.get("assignee")
        out.append(fanout.Child(title=title, body=str(body),
                                assignee=str(assignee) if isinstance(assignee, str) else None,
                                parents=_parents(item.get("parents"), i)))
    return fanout.check_children(out)


def decompose(db: Database, board: str, task_id: str, *, settings: Settings, actor: str | None = None) -> Outcome:
    """Decompose triage task ``task_id`` with the LLM: a fan-out of linked tasks, or (when the
    LLM says ``fanout: false``) its specification.

    Raises :class:`Unavailable` when no LLM serves decompose (nothing is asked) or the backend
    cannot answer; an unusable reply is an ``ok: False`` outcome and a comment on the task, which
    stays in triage."""
    task = triage_task(db, board, task_id, "decomposed")
    require(settings, USE)
    answer = ask(db, board, task_id, settings, USE, prompt(task, roster(db)))
    try:
        data = llm.parse_json(answer.text)
        if isinstance(data, dict) and data.get("fanout") is False:
            spec: dict[str, Any] = data["spec"] if isinstance(data.get("spec"), dict) else data
            if not spec.get("title"):  # no specification with it: ask for one
                from .specify import specify

                return specify(db, board, task_id, settings=settings, actor=actor)
            return apply_spec(db, board, task_id, spec, answer, USE, actor)
        children = children_of(data)
    except InvalidInput as exc:
        return failed(db, board, task_id, USE, exc.message, answer.text)
    root = fanout.decompose(db, board, task_id, children, actor=actor or ACTOR[USE], llm_model=answer.model)
    made = root.pop("children")
    return Outcome(ok=True, task_id=task_id, task=root, children=made, fanout=True, model=answer.model)


__all__ = ["children_of", "decompose", "prompt", "roster"]
