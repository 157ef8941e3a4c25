"""Request bodies. Unknown fields are refused (422) so a typo never passes silently."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)

from ..domain import model, states, task_fields
from ..domain.errors import InvalidInput


def _one_of(values: tuple[str, ...], what: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in values:
            raise ValueError(f"invalid {what} {value!r}: use one of {', '.join(values)}")
        return value
    return check


def _enum(values: tuple[str, ...]) -> dict[str, JsonValue]:
    return {"type": "string", "enum": list(values)}


#: a task status: one of the domain's (``states.STATUSES``), an enum in the OpenAPI document
Status: TypeAlias = Annotated[str, AfterValidator(_one_of(states.STATUSES, "status")),
                              WithJsonSchema(_enum(states.STATUSES))]
#: a review's verdict (``states.VERDICTS``)
Verdict: TypeAlias = Annotated[str, AfterValidator(_one_of(states.VERDICTS, "verdict")),
                               WithJsonSchema(_enum(states.VERDICTS))]


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False


def _domain(rule: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A domain rule (raising ``InvalidInput``) as a pydantic validator (raising ``ValueError``)."""
    def check(value: Any) -> Any:
        if value is None:
            return value
        try:
            return rule(value)
        except InvalidInput as exc:
            raise ValueError(exc.message) from None
    return check


#: a board's display name: one line, nothing invisible (the rule of a task's title)
BoardName: TypeAlias = Annotated[str, AfterValidator(_domain(lambda v: model.visible(v, "board name")))]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def _text_is_storable(cls, value: Any, info: ValidationInfo) -> Any:
        """Every text (in lists and objects too) without a NUL character, which PostgreSQL
        cannot store (the kernel refuses it as well; this answers before any work), naming the
        field; a block ``reason`` without terminal controls (``model.plain``)."""
        if _has_nul(value):
            raise ValueError(f"{info.field_name} contains a NUL character (U+0000); remove it")
        if info.field_name == "reason" and isinstance(value, str):
            _domain(lambda v: model.plain(v, "reason"))(value)
        return value


class BoardCreate(Body):
    slug: str = Field(max_length=200)
    name: BoardName | None = Field(default=None, max_length=200)
    description: str = Field(default="", max_length=10_000)
    icon: str | None = Field(default=None, max_length=64)
    color: str | None = Field(default=None, max_length=64)
    workdir: str | None = Field(default=None, max_length=4096)
    #: create ``workdir`` when it does not exist (a missing one is refused otherwise)
    create: bool = False
    settings: dict[str, Any] | None = None


class BoardPatch(Body):
    name: BoardName | None = Field(default=None, max_length=200)
    description: str | None = Field(default=None, max_length=10_000)
    icon: str | None = Field(default=None, max_length=64)
    color: str | None = Field(default=None, max_length=64)
    settings: dict[str, Any] | None = None
    archived: bool | None = None


def _task_field(name: str) -> Any:
    """A new-task field's default, help and documented limits (from
    :mod:`agentboard.domain.task_fields`). The limits are checked by ``task_fields.checked`` in
    the kernel — a 400 with the same message on every surface — not by pydantic here."""
    f = task_fields.BY_NAME[name]
    extra: dict[str, JsonValue] = dict(f.json_limits())
    if name == "title":
        return Field(description=f.describe(), json_schema_extra=extra)
    if f.kind == "list":
        return Field(default_factory=list, description=f.describe(), json_schema_extra=extra)
    return Field(default=False if f.kind == "flag" else None, description=f.describe(), json_schema_extra=extra)


class TaskCreate(Body):
    """A new task: one field per entry of ``task_fields.FIELDS`` (a test keeps them equal)."""

    title: str = _task_field("title")
    body: str | None = _task_field("body")
    assignee: str | None = _task_field("assignee")
    parents: list[str] = _task_field("parents")
    tenant: str | None = _task_field("tenant")
    goal: str | None = _task_field("goal")
    priority: int | None = _task_field("priority")
    triage: bool = _task_field("triage")
    workspace: str | None = _task_field("workspace")
    branch: str | None = _task_field("branch")
    idempotency_key: str | None = _task_field("idempotency_key")
    max_runtime: str | int | None = _task_field("max_runtime")
    max_retries: int | None = _task_field("max_retries")
    skills: list[str] = _task_field("skills")
    review: bool = _task_field("review")
    verify: list[str] = _task_field("verify")
    not_before: float | str | None = _task_field("not_before")
    model: str | None = _task_field("model")
    race: list[str] = _task_field("race")
    race_until: str | None = _task_field("race_until")

    def new_task_fields(self) -> dict[str, Any]:
        """The new-task fields given, checked by ``task_fields.checked`` (before the host-access
        check reads them, so an over-long value is refused alike here and on every surface);
        the title apart, for ``tasks.create``."""
        given = {k: v for k, v in self.model_dump().items() if v is not None}
        return {k: v for k, v in task_fields.checked(given).items() if k != "title"}


class TaskPatch(Body):
    status: Status | None = None
    expected_status: Status | None = Field(
        default=None, description="the status the caller saw the task in (the dashboard sends it with every move "
        "it asked the person to confirm): a task in another status by then is a 409 naming it, and nothing changes")
    assignee: str | None = Field(default=None, max_length=200)
    priority: int | None = _task_field("priority")  # checked by the route: POST's 400 and message
    title: str | None = Field(default=None, max_length=2000)
    body: str | None = None
    result: str | None = Field(default=None, max_length=10_000)
    tenant: str | None = Field(default=None, max_length=200)
    goal_id: str | None = Field(default=None, max_length=64)
    verify: list[str] | None = Field(default=None, max_length=100)
    reason: str | None = Field(default=None, max_length=10_000)
    model: str | None = Field(default=None, max_length=200,
                              description="the task's own model; null or \"\" clears it (the profile's model)")
    max_runtime: str | int | None = Field(
        default=None, description="how long one attempt may run (`90m`, `2h`, seconds); null or \"\" clears it")
    max_retries: int | None = Field(default=None, description="failures before the task gives up (0-1000)")
    branch: str | None = Field(default=None, max_length=200,
                               description="the branch its worktree is made on, before the task has started "
                                           "(create's limits); \"\" gives it the default ab/<id> again")


BulkAction = Literal["status", "archive", "restore", "assign", "priority", "block", "unblock", "reclaim"]


class BulkRequest(Body):
    ids: list[str] = Field(min_length=1, max_length=1000)
    action: BulkAction
    status: Status | None = None
    assignee: str | None = Field(default=None, max_length=200)
    priority: int | None = _task_field("priority")  # checked by the route, as PATCH's
    reason: str | None = Field(default=None, max_length=10_000)
    expected_statuses: dict[str, Status] | None = Field(
        default=None, max_length=1000,
        description="`status` and `archive`: the status the caller saw each task in, by id; a task in another "
        "status by then fails (409, naming it) and is left as it was")


class CommentCreate(Body):
    body: str
    mentions: bool = True


class ReviewRequest(Body):
    verdict: Verdict
    text: str = ""
    score: int | None = Field(default=None, ge=0, le=100)
    findings: list[Any] | None = None


class ReasonBody(Body):
    reason: str | None = Field(default=None, max_length=10_000)


class LinkCreate(Body):
    parent_id: str = Field(max_length=64)
    child_id: str = Field(max_length=64)


class GoalCreate(Body):
    title: str = Field(max_length=2000)
    body: str = ""
    acceptance: list[str] = Field(default_factory=list, max_length=100)
    priority: int = Field(default=0, ge=-1_000_000, le=1_000_000)
    verify: list[str] = Field(default_factory=list, max_length=50,
                              description="commands that check the acceptance once all its tasks are done")


class GoalPatch(Body):
    title: str | None = Field(default=None, max_length=2000)
    body: str | None = None
    acceptance: list[str] | None = Field(default=None, max_length=100)
    priority: int | None = Field(default=None, ge=-1_000_000, le=1_000_000)
    verify: list[str] | None = Field(default=None, max_length=50,
                                     description="the commands that check the acceptance ([] for none)")
    status: Literal["cancelled"] | None = None


class ProfileCreate(Body):
    name: str = Field(max_length=200)
    command: str | None = Field(default=None, max_length=10_000,
                                description="how to start the agent; an agent CLI's adapter defaults to its executable")
    adapter: str = Field(default="command", max_length=32)
    description: str = ""
    max_concurrency: int | None = Field(default=None, ge=1, le=10_000)
    env: dict[str, str] | None = None
    skills: list[str] | None = Field(default=None, max_length=100)
    model: str | None = Field(default=None, max_length=200)
    enabled: bool = True
    orchestrator: bool = False
    isolation: str = Field(default="none", max_length=16, description="none, user or sandbox")
    permission: str = Field(default="edit", max_length=16, description="claude/codex agents: edit, full or read")


class ProfilePatch(Body):
    command: str | None = Field(default=None, max_length=10_000)
    adapter: str | None = Field(default=None, max_length=32)
    description: str | None = None
    max_concurrency: int | None = Field(default=None, ge=1, le=10_000)
    env: dict[str, str] | None = None
    skills: list[str] | None = Field(default=None, max_length=100)
    model: str | None = Field(default=None, max_length=200)
    enabled: bool | None = None
    orchestrator: bool | None = None
    isolation: str | None = Field(default=None, max_length=16, description="none, user or sandbox")
    permission: str | None = Field(default=None, max_length=16, description="claude/codex agents: edit, full or read")


class WikiCreate(Body):
    slug: str = Field(max_length=128)
    title: str = Field(max_length=2000)
    body: str = ""
    publish: bool = False


class WikiPatch(Body):
    action: Literal["publish", "discard"] = "publish"


class TokenCreate(Body):
    name: str = Field(max_length=64)
    role: Literal["admin", "member", "viewer"] = "member"
    boards: list[str] = Field(default_factory=list, max_length=100)
