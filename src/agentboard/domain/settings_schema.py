"""The one schema of a board's settings and of a profile's fields.

The CLI, the REST API, the Python client and ``config.toml`` loading all check values here, so
a value one surface refuses is refused by every other one, with the same one-line message
(:class:`~agentboard.domain.errors.InvalidInput`: exit 2, HTTP 400). The dispatcher reads stored
board settings through :func:`board_settings` too: a board whose stored settings an older
version let through is skipped (and reported), never allowed to break a pass.

Board settings: the known keys are typed (``max_parallel`` and ``failure_limit`` positive
integers, ``default_assignee`` a profile name, ``auto_decompose`` true or false); ``null``
clears a key; a board's target directory is not a setting (it is set when the board is created,
through the target-directory check); other keys are kept as given.

Profile fields: ``command`` non-empty, ``adapter`` one of the adapters, ``max_concurrency`` a
positive integer, ``env`` names that are valid environment variable names (``A=B`` is not),
``skills`` a list of strings, ``enabled`` / ``orchestrator`` true or false.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from . import model
from .errors import InvalidInput

ADAPTERS = ("command", "claude", "codex")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

#: board settings keys that are not settings: what to use instead
NOT_SETTINGS = {
    "workdir": "a board's target directory is set when the board is created (`boards create --workdir`)",
    "default_workdir": "a board's target directory is set when the board is created (`boards create --workdir`)",
}

#: what each known key holds, for the one-line message of a refused value
_EXPECTED = {
    "max_parallel": "a positive integer",
    "failure_limit": "a positive integer",
    "default_assignee": "a profile name (1-64 letters, digits, '.', '-' or '_')",
    "auto_decompose": "true or false",
    "command": "a non-empty command",
    "adapter": "one of " + ", ".join(ADAPTERS),
    "description": "text of at most 16 KiB",
    "max_concurrency": "a positive integer",
    "env": "an object mapping environment variable names (letters, digits and '_', not starting with a digit) to strings",
    "skills": "a list of strings",
    "model": "a model name of at most 200 characters",
    "enabled": "true or false",
    "orchestrator": "true or false",
}

ProfileLike = Annotated[str, StringConstraints(strip_whitespace=True, pattern=model.PROFILE_RE.pattern)]
EnvName = Annotated[str, StringConstraints(pattern=ENV_NAME_RE.pattern)]


class BoardSettings(BaseModel):
    """A board's own settings; unknown keys are kept as given."""

    model_config = ConfigDict(extra="allow", strict=True)

    max_parallel: Annotated[int, Field(ge=1, le=100_000)] | None = None
    failure_limit: Annotated[int, Field(ge=1, le=100_000)] | None = None
    default_assignee: ProfileLike | None = None
    auto_decompose: bool | None = None


class ProfileFields(BaseModel):
    """The fields of a profile that add and update take (all optional: an update names some)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    command: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=10_000)] | None = None
    adapter: Literal["command", "claude", "codex"] | None = None
    description: Annotated[str, StringConstraints(max_length=16 * 1024)] | None = None
    max_concurrency: Annotated[int, Field(ge=1, le=10_000)] | None = None
    env: dict[EnvName, str] | None = None
    skills: list[str] | None = None
    model: Annotated[str, StringConstraints(max_length=200)] | None = None
    enabled: bool | None = None
    orchestrator: bool | None = None

    @field_validator("skills")
    @classmethod
    def _skills(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else [s.strip() for s in value if s.strip()]


PROFILE_FIELDS = frozenset(ProfileFields.model_fields)


def _message(what: str, exc: ValidationError, given: dict[str, Any]) -> str:
    err = exc.errors()[0]
    loc = [str(x) for x in err.get("loc", ())]
    key = loc[0] if loc else ""
    if err.get("type") == "extra_forbidden":
        return f"unknown {what} field {key!r}"
    shown = given.get(key, err.get("input"))
    if key == "env" and len(loc) > 1:
        return (f"invalid {what} env name {loc[1].split('[')[0]!r}: use letters, digits and '_', "
                "not starting with a digit (no '=')")
    expected = _EXPECTED.get(key, err.get("msg", "a valid value"))
    return f"invalid {what} {key}={shown!r}: must be {expected}"


def board_settings(value: object) -> dict[str, Any]:
    """Checked board settings (the keys given, known ones typed). :class:`InvalidInput` with a
    one-line message naming the key otherwise."""
    if not isinstance(value, dict):
        raise InvalidInput("board settings must be a JSON object")
    for key in value:
        if not isinstance(key, str):
            raise InvalidInput("board settings keys must be strings")
        if key in NOT_SETTINGS:
            raise InvalidInput(f"{key} is not a board setting: {NOT_SETTINGS[key]}")
    try:
        checked = BoardSettings.model_validate(value)
    except ValidationError as exc:
        raise InvalidInput(_message("board setting", exc, value)) from None
    return checked.model_dump(exclude_unset=True)


def profile_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Checked profile fields (those given and not None): :class:`InvalidInput` naming the field
    otherwise."""
    given = {k: v for k, v in fields.items() if v is not None}
    try:
        checked = ProfileFields.model_validate(given)
    except ValidationError as exc:
        raise InvalidInput(_message("profile", exc, given)) from None
    return checked.model_dump(exclude_unset=True)


def env_name(name: str) -> str:
    """A valid environment variable name, else :class:`InvalidInput`."""
    if not ENV_NAME_RE.match(name):
        raise InvalidInput(f"invalid profile env name {name!r}: use letters, digits and '_', "
                           "not starting with a digit (no '=')")
    return name


def global_settings(values: dict[str, Any]) -> dict[str, Any]:
    """The installation-wide values that are also board settings (``max_parallel``,
    ``failure_limit``, ``default_assignee`` from ``config.toml`` or the environment), checked like
    a board's."""
    known = {k: v for k, v in values.items() if k in BoardSettings.model_fields and v is not None}
    try:
        BoardSettings.model_validate(known)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err.get("loc", ("",))[0])
        raise InvalidInput(
            f"invalid setting {key}={known.get(key)!r}: must be {_EXPECTED.get(key, 'a valid value')}") from None
    return known


__all__ = [
    "ADAPTERS", "BoardSettings", "PROFILE_FIELDS", "ProfileFields", "board_settings", "env_name",
    "global_settings", "profile_fields",
]
