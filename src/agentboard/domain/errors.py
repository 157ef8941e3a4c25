"""The few error types every surface maps to exit codes, HTTP statuses and tool errors."""

from __future__ import annotations


def one_line(text: object) -> str:
    """``text`` (an error, a driver's message) with its line breaks and runs of spaces made single
    spaces: what a CLI error, a log line or an API message shows."""
    return " ".join(str(text).split())


class AgentboardError(Exception):
    """Base class. ``code`` is a stable machine-readable name."""

    code = "error"
    exit_code = 1
    http_status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(AgentboardError):
    code = "invalid_input"
    exit_code = 2
    http_status = 400


class NotFound(AgentboardError):
    code = "not_found"
    exit_code = 3
    http_status = 404


class Conflict(AgentboardError):
    code = "conflict"
    exit_code = 4
    http_status = 409


class InvalidTransition(Conflict):
    code = "invalid_transition"


class StaleRun(Conflict):
    code = "stale_run"


class Unauthorized(AgentboardError):
    code = "unauthorized"
    exit_code = 5
    http_status = 401


class Forbidden(AgentboardError):
    code = "forbidden"
    exit_code = 5
    http_status = 403


class TooMany(AgentboardError):
    """A bound on how much one caller may write was reached (a worker run's comments or
    proposals): nothing was written."""

    code = "too_many"
    exit_code = 4
    http_status = 429


class TooLarge(InvalidInput):
    code = "too_large"
    http_status = 413


class Unavailable(AgentboardError):
    """The database (or another service the verb needs) cannot be reached. ``retry_after``: the
    verb never reached the database, so running it again in that many seconds is safe (the API
    answers it as a ``Retry-After`` header); None where it may have (a connection lost mid-way)."""

    code = "unavailable"
    exit_code = 6
    http_status = 503

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
