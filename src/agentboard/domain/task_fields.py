"""The fields of a new task, their types, limits and help, defined once.

Every road that creates a task reads this table: the CLI's ``create`` options
(``cli/tasks.py``), the REST body (``api/models.TaskCreate``), the MCP create tool, a template's
``[[task]]`` keys (``kernel/templates.py``), the kernel's ``tasks.create`` and the Python API's
``Board.create`` (their keyword arguments are :class:`NewTaskFields`). :func:`checked` is the
one check of the values: a limit changes here, and every surface refuses the same value with the
same one-line message (``InvalidInput``: CLI exit 2, HTTP 400, an MCP ``invalid_input`` error).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from . import model
from .errors import InvalidInput
from .races import MAX_ATTEMPTS, until_of

#: how a field's value is given: one line of text, a long text (limit in bytes), an integer, a
#: yes/no flag, a list of texts, a duration (``30m``), a point in time (``2h`` from now, ISO-8601)
Kind = Literal["text", "long", "int", "flag", "list", "duration", "time"]


@dataclass(frozen=True)
class TaskField:
    """One field of a new task."""

    name: str
    kind: Kind
    help: str
    metavar: str | None = None
    #: characters of a text (after stripping), or of each item of a list
    max_chars: int | None = None
    #: bytes of a long text (UTF-8)
    max_bytes: int | None = None
    #: items of a list
    max_items: int | None = None
    #: the smallest and largest integer
    minimum: int | None = None
    maximum: int | None = None
    #: the CLI option (a list's is singular and repeatable: ``--parent``); None: the CLI spells
    #: the field itself (the title is an argument)
    option: str | None = ""
    #: a template's ``[[task]]`` table may set it
    template: bool = True
    #: the value's own rule after the limits (model.title, model.branch_name, ...)
    rule: Callable[[Any], Any] | None = None

    @property
    def cli_option(self) -> str | None:
        if self.option is None:
            return None
        return self.option or "--" + self.name.replace("_", "-")

    def limits(self) -> str:
        """The limits in words (for help texts and tool descriptions)."""
        out = []
        if self.max_chars is not None:
            out.append(f"at most {self.max_chars} characters" + (" each" if self.kind == "list" else ""))
        if self.max_bytes is not None:
            out.append(f"at most {self.max_bytes} bytes")
        if self.max_items is not None:
            out.append(f"at most {self.max_items} items")
        if self.minimum is not None and self.maximum is not None:
            out.append(f"{self.minimum} to {self.maximum}")
        return ", ".join(out)

    def describe(self) -> str:
        """The help text with its limits."""
        limits = self.limits()
        return f"{self.help} ({limits})" if limits else self.help

    def json_limits(self) -> dict[str, int]:
        """The limits as JSON Schema keywords (the OpenAPI document of the REST body)."""
        out: dict[str, int] = {}
        if self.kind == "list":
            if self.max_items is not None:
                out["maxItems"] = self.max_items
        elif self.max_chars is not None:
            out["maxLength"] = self.max_chars
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        return out


def _assignee(value: str) -> str | None:
    return model.profile_name(value) if value.strip() else None


def _workspace(value: str) -> str | None:
    model.workspace(value)  # refuses a bad one; the kernel places it
    return value or None


def _optional(value: str) -> str | None:
    return value.strip() or None


#: the longest ``max_runtime``: a year
MAX_RUNTIME = 366 * 86400


def _max_runtime(value: str | int | float) -> int | None:
    seconds = model.duration(value)
    if seconds is not None and seconds > MAX_RUNTIME:
        raise InvalidInput(f"max_runtime is {seconds} seconds; the limit is {MAX_RUNTIME // 86400}d "
                           f"({MAX_RUNTIME} seconds)")
    return seconds


def _not_before(value: float | str) -> float | None:
    from .timespec import point_in_time

    if value == "":
        return None
    return point_in_time(value, time.time(), past=False)


FIELDS: tuple[TaskField, ...] = (
    TaskField("title", "text", "a short one-line title", max_chars=model.TITLE_MAX, option=None, rule=model.title),
    TaskField("body", "long", "markdown description", max_bytes=model.BODY_MAX, metavar="TEXT", rule=model.body),
    TaskField("assignee", "text", "the profile that does it", metavar="PROFILE", max_chars=64, rule=_assignee),
    TaskField("parents", "list", "a task this one waits for (repeatable)", metavar="ID", max_items=200,
              max_chars=64, option="--parent"),
    TaskField("tenant", "text", "who the work is for (a label to filter by)", max_chars=200, rule=_optional),
    TaskField("goal", "text", "the goal it serves (g_…)", metavar="G", max_chars=64, template=False, rule=_optional),
    TaskField("priority", "int", "higher runs first", metavar="N", minimum=-1_000_000, maximum=1_000_000,
              rule=model.priority),
    TaskField("triage", "flag", "park it in triage (never dispatched until released)"),
    TaskField("workspace", "text", "scratch | worktree | worktree:<path> | dir:<absolute path> | "
              "path:<name of a board's named path>", metavar="KIND", max_chars=4096, rule=_workspace),
    TaskField("branch", "text", "the git branch of a worktree task", metavar="NAME", max_chars=model.BRANCH_MAX,
              rule=model.branch_name),
    TaskField("idempotency_key", "text", "a second create with the same key returns the first task",
              metavar="KEY", max_chars=255, template=False, rule=_optional),
    TaskField("max_runtime", "duration", "stop a run after this long (30s, 30m, 2h, 1d or seconds)",
              metavar="DUR", rule=_max_runtime),
    TaskField("max_retries", "int", "how many failed runs before it blocks", metavar="N", minimum=1, maximum=1000),
    TaskField("skills", "list", "a skill the worker is given (repeatable)", metavar="S", max_items=100,
              max_chars=200, option="--skill"),
    TaskField("review", "flag", "require a review before done"),
    TaskField("verify", "list", "a shell command that must pass (repeatable)", metavar="CMD", max_items=100,
              max_chars=10_000),
    TaskField("not_before", "time", "wait in todo until then (ISO-8601 in UTC, epoch seconds, or 30m / 2h / 1d "
              "from now)", metavar="TIME", template=False, rule=_not_before),
    TaskField("model", "text", "the model the agent CLI runs this task with (over the profile's)", metavar="M",
              max_chars=model.MODEL_NAME_MAX, rule=model.model_name),
    TaskField("race", "list", "a race: one attempt per profile, P1,P2[:MODEL],… (a profile may repeat; :MODEL "
              "overrides its model)", metavar="P1,P2[:MODEL]", max_items=MAX_ATTEMPTS, max_chars=2000),
    TaskField("race_until", "text", "when a race ends: all (every attempt finished, then review) or first-pass "
              "(the first attempt that passes wins)", metavar="all|first-pass", max_chars=16, rule=until_of),
)
BY_NAME: dict[str, TaskField] = {f.name: f for f in FIELDS}
NAMES: tuple[str, ...] = tuple(BY_NAME)
#: the keys a template's ``[[task]]`` table may set (``key`` names it; ``parents`` may name keys)
TEMPLATE_NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS if f.template)


class NewTaskFields(TypedDict, total=False):
    """The keyword arguments of ``tasks.create`` and ``Board.create`` beyond the title (a test
    keeps these keys equal to :data:`FIELDS`)."""

    body: str | None
    assignee: str | None
    parents: Iterable[str]
    tenant: str | None
    goal: str | None
    priority: int
    triage: bool
    workspace: str | None
    branch: str | None
    idempotency_key: str | None
    max_runtime: str | int | None
    max_retries: int | None
    skills: Iterable[str]
    review: bool
    verify: Iterable[str]
    not_before: float | str | None
    model: str | None
    race: Iterable[str] | None
    race_until: str | None


def _refuse(name: str, what: str) -> InvalidInput:
    return InvalidInput(f"{name} {what}")


def _int(f: TaskField, value: Any) -> int:
    try:
        if isinstance(value, bool | float):
            raise ValueError(value)
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"invalid {f.name} {str(value)[:40]!r}: give an integer") from None
    if (f.minimum is not None and number < f.minimum) or (f.maximum is not None and number > f.maximum):
        raise _refuse(f.name, f"is {number}; give {f.minimum} to {f.maximum}")
    return number


def _text(f: TaskField, value: Any) -> str:
    if not isinstance(value, str):
        raise _refuse(f.name, f"must be text, not {type(value).__name__}")
    if f.max_chars is not None and len(value.strip()) > f.max_chars:
        raise _refuse(f.name, f"is {len(value.strip())} characters; the limit is {f.max_chars}")
    return value


def _list(f: TaskField, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise _refuse(f.name, "must be a list of texts")
    items = [v for v in value if v is not None and (not isinstance(v, str) or v.strip())]
    if f.max_items is not None and len(items) > f.max_items:
        raise _refuse(f.name, f"has {len(items)} items; the limit is {f.max_items}")
    for item in items:
        if not isinstance(item, str):
            raise _refuse(f.name, f"must be a list of texts, not one holding {type(item).__name__}")
        if f.max_chars is not None and len(item) > f.max_chars:
            raise _refuse(f.name, f"has an item of {len(item)} characters; the limit is {f.max_chars}")
    return tuple(items)


def check(name: str, value: Any) -> Any:
    """One field's value checked and normalized (``InvalidInput`` saying why not). ``None``
    stays ``None`` (the field is not given), except for the title, which is required."""
    f = BY_NAME.get(name)
    if f is None:
        raise InvalidInput(f"unknown task field {name!r}: use {', '.join(NAMES)}")
    if value is None and name != "title":
        return None
    if f.kind == "flag":
        if not isinstance(value, (bool, int)):  # noqa: UP038 - the tuple is the faster check
            raise _refuse(name, f"must be true or false, not {str(value)[:40]!r}")
        return bool(value)
    if f.kind == "int":
        value = _int(f, value)
    elif f.kind == "list":
        return _list(f, value)
    elif f.kind in ("text", "long") or (f.kind == "duration" and isinstance(value, str)) or (
            f.kind == "time" and isinstance(value, str)):
        value = _text(f, "" if value is None else value)
    if f.max_bytes is not None and len(value) * 4 > f.max_bytes and len(value.encode("utf-8")) > f.max_bytes:
        raise _refuse(name, f"is {len(value.encode('utf-8'))} bytes; the limit is {f.max_bytes} bytes")
    return f.rule(value) if f.rule is not None else value


def checked(values: Mapping[str, Any]) -> dict[str, Any]:
    """Every given field checked (:func:`check`); fields not given are left out. Unknown names
    are refused."""
    unknown = [k for k in values if k not in BY_NAME]
    if unknown:
        raise InvalidInput(f"unknown task field(s) {', '.join(sorted(unknown))}: use {', '.join(NAMES)}")
    return {k: None if v is None and k != "title" else check(k, v) for k, v in values.items()}


__all__ = ["BY_NAME", "FIELDS", "NAMES", "TEMPLATE_NAMES", "NewTaskFields", "TaskField", "check", "checked"]
