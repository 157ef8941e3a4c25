"""The one schema of a board's settings and of a profile's fields.

The CLI, the REST API, the Python client and ``config.toml`` loading all check values here, so
a value one surface refuses is refused by every other one, with the same one-line message
(:class:`~agentboard.domain.errors.InvalidInput`: exit 2, HTTP 400). The dispatcher reads stored
board settings through :func:`board_settings` too: a board whose stored settings an older
version let through is skipped (and reported), never allowed to break a pass.

Board settings: the known keys are typed (``max_parallel`` and ``failure_limit`` positive
integers, ``default_assignee`` a profile name, ``auto_decompose`` true or false, ``reviewer``
who reviews a task entering review: ``profile:NAME``, ``llm``, ``heuristic`` or ``off``); ``null``
clears a key; a board's target directory is not a setting (it is set when the board is created,
through the target-directory check); other keys are kept as given.

Profile fields: ``command`` non-empty, ``adapter`` one of the adapters, ``max_concurrency`` a
positive integer, ``env`` names that are valid environment variable names (``A=B`` is not),
``skills`` a list of strings, ``enabled`` / ``orchestrator`` true or false.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import model
from .errors import InvalidInput
from .settings_fields import (  # the fields and their limits, defined once there
    ADAPTERS as ADAPTERS,
)
from .settings_fields import (
    BOARD_KEYS as BOARD_KEYS,
)
from .settings_fields import (
    BRANCH_RE as BRANCH_RE,
)
from .settings_fields import (
    COMMAND_MAX as COMMAND_MAX,
)
from .settings_fields import (
    COUNT_MAX as COUNT_MAX,
)
from .settings_fields import (
    DESCRIPTION_MAX as DESCRIPTION_MAX,
)
from .settings_fields import (
    ENV_NAME_RE as ENV_NAME_RE,
)
from .settings_fields import (
    INTEGRATE as INTEGRATE,
)
from .settings_fields import (
    ISOLATION as ISOLATION,
)
from .settings_fields import (
    MAX_CONCURRENCY_MAX as MAX_CONCURRENCY_MAX,
)
from .settings_fields import (
    MODEL_MAX as MODEL_MAX,
)
from .settings_fields import (
    PERMISSION as PERMISSION,
)
from .settings_fields import (
    PROFILE_FIELDS as PROFILE_FIELDS,
)
from .settings_fields import (
    REVIEWER_RE as REVIEWER_RE,
)
from .settings_fields import (
    SUPERVISOR_KEYS as SUPERVISOR_KEYS,
)

if TYPE_CHECKING:
    from pydantic import ValidationError

#: board settings keys that are not settings: what to use instead
NOT_SETTINGS = {
    "workdir": "a board's target directory is set when the board is created (`boards create --workdir`)",
    "default_workdir": "a board's target directory is set when the board is created (`boards create --workdir`)",
}

#: what each known key holds, for the one-line message of a refused value
_EXPECTED = {
    "max_parallel": f"a whole number from 1 to {COUNT_MAX}",
    "failure_limit": f"a whole number from 1 to {COUNT_MAX}",
    "rework_limit": f"a whole number from 1 to {COUNT_MAX}",
    "default_assignee": "a profile name (1-64 letters, digits, '.', '-' or '_')",
    "auto_decompose": "true or false",
    "reviewer": "profile:NAME, llm, heuristic or off",
    "supervisor": "a profile name (1-64 letters, digits, '.', '-' or '_')",
    "replan_after": "a positive integer",
    "block_loop_limit": "a positive integer",
    "stuck_after": "a positive number of seconds",
    "escalate_to": "the name of a person (1-64 letters, digits, '.', '-', '_' or '@')",
    "reviewer_agent": "auto, on, off, llm, heuristic or profile:NAME",
    "supervision_budget": "true (supervision runs count against the board's supervision budget) or false "
                          "(against the board's budget)",
    "base": "a git branch name of the board's target repository",
    "integrate": "one of none, merge, squash, rebase, pr",
    "review_before_integrate": "true or false",
    "env_setup": "the path of the project's virtualenv (absolute, or relative to the target directory)",
    "command": "a non-empty command",
    "description": "text of at most 16 KiB",
    "max_concurrency": f"a positive integer of at most {MAX_CONCURRENCY_MAX}",
    "env": "an object mapping environment variable names (letters, digits and '_', not starting with a digit) to strings",
    "skills": "a list of strings",
    "model": "a model name of at most 200 characters",
    "enabled": "true or false",
    "orchestrator": "true or false",
}


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
    if key == "adapter":
        return f"unknown adapter {shown!r}: use one of {', '.join(ADAPTERS)}"
    if key == "isolation":
        return f"unknown isolation {shown!r}: use one of {', '.join(ISOLATION)}"
    if key == "permission":
        return f"unknown permission {shown!r}: use one of {', '.join(PERMISSION)}"
    expected = _EXPECTED.get(key, err.get("msg", "a valid value"))
    return f"invalid {what} {key}={shown!r}: must be {expected}"


def board_settings(value: object) -> dict[str, Any]:
    """Checked board settings (the keys given, known ones typed). :class:`InvalidInput` with a
    one-line message naming the key otherwise."""
    if not isinstance(value, dict):
        raise InvalidInput("board settings must be a JSON object")
    from pydantic import ValidationError

    from .settings_models import BoardSettings

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
    from pydantic import ValidationError

    from .settings_models import ProfileFields

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


#: what the installation-wide values that are also board settings must be (``config.py``)
GLOBAL_EXPECTED = {k: _EXPECTED[k] for k in ("max_parallel", "failure_limit", "default_assignee", "reviewer_agent")}


def global_settings(values: dict[str, Any]) -> dict[str, Any]:
    """The installation-wide values that are also board settings (``max_parallel``,
    ``failure_limit``, ``default_assignee``, ``reviewer_agent`` — the board's ``reviewer``, where
    ``auto`` picks the default and ``on`` means ``llm`` —), checked with the rules of a board's
    (without loading pydantic: every command reads them)."""
    known = {k: v for k, v in values.items() if (k in BOARD_KEYS or k == "reviewer_agent") and v is not None}
    for key, value in known.items():
        if key in ("max_parallel", "failure_limit"):
            ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= COUNT_MAX
        elif key == "default_assignee":
            ok = isinstance(value, str) and bool(model.PROFILE_RE.match(value.strip()))
        elif key in ("reviewer", "reviewer_agent"):
            ok = isinstance(value, str) and (value in ("auto", "on") or bool(REVIEWER_RE.match(value)))
        else:
            ok = isinstance(value, bool)
        if not ok:
            raise InvalidInput(f"invalid setting {key}={value!r}: must be {_EXPECTED[key]}")
    return known


__all__ = ["ADAPTERS", "BOARD_KEYS", "SUPERVISOR_KEYS", "ISOLATION", "PROFILE_FIELDS", "REVIEWER_RE", "board_settings", "env_name", "global_settings",
           "profile_fields"]
