"""The pydantic models behind :mod:`agentboard.domain.settings_schema` (imported on first use,
so a command that validates nothing never loads pydantic)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from .model import PROFILE_RE
from .settings_fields import (
    ADAPTERS,
    BOARD_KEYS,
    BRANCH_RE,
    COMMAND_MAX,
    COUNT_MAX,
    DESCRIPTION_MAX,
    ENV_NAME_RE,
    INTEGRATE,
    ISOLATION,
    MAX_CONCURRENCY_MAX,
    MODEL_MAX,
    PERMISSION,
    PROFILE_FIELDS,
    REVIEWER_RE,
    SUPERVISOR_KEYS,
)

ProfileLike = Annotated[str, StringConstraints(strip_whitespace=True, pattern=PROFILE_RE.pattern)]
EnvName = Annotated[str, StringConstraints(pattern=ENV_NAME_RE.pattern)]


class BoardSettings(BaseModel):
    """A board's own settings; unknown keys are kept as given."""

    model_config = ConfigDict(extra="allow", strict=True)

    max_parallel: Annotated[int, Field(ge=1, le=COUNT_MAX)] | None = None
    failure_limit: Annotated[int, Field(ge=1, le=COUNT_MAX)] | None = None
    rework_limit: Annotated[int, Field(ge=1, le=COUNT_MAX)] | None = None
    default_assignee: ProfileLike | None = None
    auto_decompose: bool | None = None
    reviewer: Annotated[str, StringConstraints(pattern=REVIEWER_RE.pattern)] | None = None
    base: Annotated[str, StringConstraints(pattern=BRANCH_RE.pattern)] | None = None
    integrate: Literal["none", "merge", "squash", "rebase", "pr"] | None = None
    #: only tasks approved in review are integrated; a task without review keeps its branch
    review_before_integrate: bool | None = None
    env_setup: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = None
    supervisor: ProfileLike | None = None
    replan_after: Annotated[int, Field(ge=1, le=COUNT_MAX)] | None = None
    block_loop_limit: Annotated[int, Field(ge=1, le=COUNT_MAX)] | None = None
    stuck_after: Annotated[int, Field(ge=1, le=10**9)] | None = None
    escalate_to: Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")] | None = None
    supervision_budget: bool | None = None

    @field_validator("base")
    @classmethod
    def _base(cls, value: str | None) -> str | None:
        if value is not None and (".." in value or value.endswith((".lock", "/")) or value.startswith("/")):
            raise ValueError("not a branch name")
        return value


class ProfileFields(BaseModel):
    """The fields of a profile that add and update take (all optional: an update names some)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    command: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=COMMAND_MAX)] | None = None
    adapter: Literal["command", "claude", "codex", "gemini", "opencode"] | None = None
    isolation: Literal["none", "user", "sandbox"] | None = None
    permission: Literal["edit", "full", "read"] | None = None
    description: Annotated[str, StringConstraints(max_length=DESCRIPTION_MAX)] | None = None
    max_concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY_MAX)] | None = None
    env: dict[EnvName, str] | None = None
    skills: list[str] | None = None
    model: Annotated[str, StringConstraints(max_length=MODEL_MAX)] | None = None
    enabled: bool | None = None
    orchestrator: bool | None = None

    @field_validator("skills")
    @classmethod
    def _skills(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else [s.strip() for s in value if s.strip()]


def _annotation(model: type[BaseModel], name: str) -> object:
    return model.model_fields[name].annotation


# the lists the schema module names without loading pydantic
assert frozenset(ProfileFields.model_fields) == PROFILE_FIELDS
assert _annotation(ProfileFields, "adapter") == Literal[ADAPTERS] | None
assert _annotation(ProfileFields, "isolation") == Literal[ISOLATION] | None
assert _annotation(ProfileFields, "permission") == Literal[PERMISSION] | None
assert tuple(BoardSettings.model_fields) == BOARD_KEYS + SUPERVISOR_KEYS
assert _annotation(BoardSettings, "integrate") == Literal[INTEGRATE] | None

__all__ = ["BoardSettings", "ProfileFields"]
