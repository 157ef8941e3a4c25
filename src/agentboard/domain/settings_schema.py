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

import re
from typing import TYPE_CHECKING, Any

from . import model
from .errors import InvalidInput

if TYPE_CHECKING:
    from pydantic import ValidationError

ADAPTERS = ("command", "claude", "codex", "gemini", "opencode")
#: how a profile's workers are isolated from the host (``dispatch/isolation.py``)
ISOLATION = ("none", "user", "sandbox")
#: what an agent CLI (``claude``, ``codex``, ``gemini``, ``opencode``) may do without asking (``dispatch/adapters.py``)
PERMISSION = ("edit", "full", "read")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
#: the largest ``max_parallel`` / ``failure_limit``
COUNT_MAX = 100_000
MAX_CONCURRENCY_MAX = 10_000
COMMAND_MAX = 10_000
DESCRIPTION_MAX = 16 * 1024
MODEL_MAX = 200
#: the board settings whose values are typed (the others are kept as given)
BOARD_KEYS = ("max_parallel", "failure_limit", "default_assignee", "auto_decompose", "reviewer", "base", "integrate",
              "review_before_integrate", "env_setup")
#: what approval does with a worktree task's branch (``dispatch/integrate.py``)
INTEGRATE = ("none", "merge", "squash", "rebase", "pr")
#: a git branch name as a board's ``base`` (no spaces, no leading '-'; '..' is refused apart)
BRANCH_RE = re.compile(r"^[A-Za-z0-9._/@+][A-Za-z0-9._/@+-]{0,199}$")
#: the supervisor's board settings (typed like the keys above; see docs/supervisor.md)
SUPERVISOR_KEYS = ("supervisor", "replan_after", "block_loop_limit", "stuck_after", "escalate_to")
#: a ``reviewer`` setting: a profile (``profile:NAME``), one LLM call, the test heuristic, or none
REVIEWER_RE = re.compile(r"^(llm|off|heuristic|profile:[A-Za-z0-9][A-Za-z0-9_.-]{0,63})$")
#: the fields a profile's add and update take
PROFILE_FIELDS = frozenset(("command", "adapter", "isolation", "permission", "description", "max_concurrency", "env", "skills",
                            "model", "enabled", "orchestrator"))

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
    "reviewer": "profile:NAME, llm, heuristic or off",
    "supervisor": "a profile name (1-64 letters, digits, '.', '-' or '_')",
    "replan_after": "a positive integer",
    "block_loop_limit": "a positive integer",
    "stuck_after": "a positive number of seconds",
    "escalate_to": "the name of a person (1-64 letters, digits, '.', '-', '_' or '@')",
    "base": "a git branch name of the board's target repository",
    "integrate": "one of none, merge, squash, rebase, pr",
    "review_before_integrate": "true or false",
    "env_setup": "the path of the project's virtualenv (absolute, or relative to the target directory)",
    "command": "a non-empty command",
    "description": "text of at most 16 KiB",
    "max_concurrency": "a positive integer",
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


def global_settings(values: dict[str, Any]) -> dict[str, Any]:
    """The installation-wide values that are also board settings (``max_parallel``,
    ``failure_limit``, ``default_assignee``, ``reviewer`` — ``reviewer_agent`` in ``config.toml``
    or the environment, where ``auto`` picks the default and ``on`` means ``llm`` —), checked
    with the rules of a board's (without loading pydantic: every command reads them)."""
    known = {k: v for k, v in values.items() if k in BOARD_KEYS and v is not None}
    for key, value in known.items():
        if key in ("max_parallel", "failure_limit"):
            ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= COUNT_MAX
        elif key == "default_assignee":
            ok = isinstance(value, str) and bool(model.PROFILE_RE.match(value.strip()))
        elif key == "reviewer":
            ok = isinstance(value, str) and (value in ("auto", "on") or bool(REVIEWER_RE.match(value)))
        else:
            ok = isinstance(value, bool)
        if not ok:
            raise InvalidInput(f"invalid setting {key}={value!r}: must be {_EXPECTED[key]}")
    return known


__all__ = ["ADAPTERS", "BOARD_KEYS", "SUPERVISOR_KEYS", "ISOLATION", "PROFILE_FIELDS", "REVIEWER_RE", "board_settings", "env_name", "global_settings",
           "profile_fields"]
