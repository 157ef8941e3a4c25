"""What a transition sets off elsewhere in the kernel, inside the transition's own transaction.

The verbs (``tasks``, ``runs``, ``flow``, ``budgets``) say *that* something happened — a task
was blocked or given up on, review or verification sent it back, a run failed, telemetry came
in, a goal's tasks are all done, a budget blocked a task — and the modules that act on it
subscribe here with :func:`on`. The verbs never import those modules, so the modules may use
the verbs freely (the supervisor creates and blocks tasks through ``kernel/tasks/``).

Subscribers are imported on the first fire (:data:`SUBSCRIBERS`), so a command that never
changes a task does not load them. Every handler runs in the caller's transaction: what it
writes commits or rolls back with the transition.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..store.engine import Row, Tx

#: the modules that subscribe (imported before the first fire)
SUBSCRIBERS = ("agentboard.kernel.supervision", "agentboard.kernel.insights")
#: the points a module may subscribe to
POINTS = ("blocked", "gave_up", "sent_back", "failed", "telemetry", "goal_verifying", "budget_blocked",
          "budget_releasing", "run_closed", "task_done", "task_undone", "reviewed", "run_usage")

Handler = Callable[..., Any]
_handlers: dict[str, list[Handler]] = {p: [] for p in POINTS}
_loaded = False
_load_lock = threading.Lock()


def on(point: str) -> Callable[[Handler], Handler]:
    """Subscribe the decorated function to ``point`` (one of :data:`POINTS`)."""
    if point not in _handlers:
        raise ValueError(f"unknown hook point {point!r}: one of {', '.join(POINTS)}")

    def register(fn: Handler) -> Handler:
        if fn not in _handlers[point]:
            _handlers[point].append(fn)
        return fn

    return register


def _of(point: str) -> Sequence[Handler]:
    global _loaded
    if not _loaded:
        with _load_lock:
            if not _loaded:
                for name in SUBSCRIBERS:
                    importlib.import_module(name)
                _loaded = True
    return _handlers[point]


#: the attribute :func:`mirrored` sets on a handler
_MIRRORED = "_agentboard_mirrored_in"


def mirrored(where: str) -> Callable[[Handler], Handler]:
    """Mark a handler whose writes a server-side statement also makes (``where`` names it): a
    verb that runs that statement instead of firing the point stays exact only while every
    handler of the point is so marked (:func:`all_mirrored`)."""

    def mark(fn: Handler) -> Handler:
        setattr(fn, _MIRRORED, where)
        return fn

    return mark


def all_mirrored(where: str, *points: str) -> bool:
    """Whether every handler of each of ``points`` is marked :func:`mirrored` by ``where``."""
    return all(getattr(fn, _MIRRORED, None) == where for p in points for fn in _of(p))


def blocked(tx: Tx, board: str, task: Row, kind: str, reason: str, actor: str | None) -> Row:
    """A task was blocked (any kind). Returns the task as the handlers left it (a block loop
    sends it to triage)."""
    for fn in _of("blocked"):
        task = fn(tx, board, task, kind, reason, actor)
    return task


def gave_up(tx: Tx, board: str, task: Row, actor: str | None) -> Row:
    """The circuit breaker gave up on a task (it is blocked). Returns the task as it now is."""
    for fn in _of("gave_up"):
        task = fn(tx, board, task, actor)
    return task


def sent_back(tx: Tx, board: str, task: Row, actor: str | None) -> None:
    """Review or verification sent a task back."""
    for fn in _of("sent_back"):
        fn(tx, board, task, actor)


def failed(tx: Tx, board: str, task: Row, outcome: str, failures: int, actor: str | None) -> None:
    """A run crashed, went stale or timed out (``failures`` in a row)."""
    for fn in _of("failed"):
        fn(tx, board, task, outcome, failures, actor)


def telemetry(tx: Tx, board: str, task_id: str | None, kind: str, actor: str | None) -> None:
    """A worker's telemetry event of ``kind`` was recorded."""
    for fn in _of("telemetry"):
        fn(tx, board, task_id, kind, actor)


def goal_verifying(tx: Tx, board: str, goal_id: str, actor: str | None) -> None:
    """All of a goal's tasks are done: the goal is now ``verifying``."""
    for fn in _of("goal_verifying"):
        fn(tx, board, goal_id, actor)


def budget_blocked(tx: Tx, board: str, task_id: str, actor: str | None) -> None:
    """A budget blocked a task (not counted as the task's own block)."""
    for fn in _of("budget_blocked"):
        fn(tx, board, task_id, actor)


def budget_releasing(tx: Tx, board: str, task: Row, actor: str | None) -> bool:
    """A task a budget blocked is about to be released (the budget allows a run again): False
    when a handler retired it instead (it must not run)."""
    return all(fn(tx, board, task, actor) is not False for fn in _of("budget_releasing"))


def run_closed(tx: Tx, run_id: int, *, done: bool = False) -> None:
    """A worker's or reviewer's run was closed (once per run; not a person's synthetic run).
    ``done``: its close made its task done, and ``task_done`` is not fired for it."""
    for fn in _of("run_closed"):
        fn(tx, run_id, done=done)


def task_done(tx: Tx, board: str, task_id: str) -> None:
    """A task reached done (its ``completed_at`` is set)."""
    for fn in _of("task_done"):
        fn(tx, board, task_id)


def task_undone(tx: Tx, board: str, task_id: str) -> None:
    """A task that was done (``completed_at`` set: done, or archived after it) is about to leave
    done — reopened, or restored from the archive. Fired before the task's row changes."""
    for fn in _of("task_undone"):
        fn(tx, board, task_id)


def reviewed(tx: Tx, board: str, task_id: str, verdict: str) -> None:
    """A review verdict on a task was recorded (the task's newest ``reviews`` row)."""
    for fn in _of("reviewed"):
        fn(tx, board, task_id, verdict)


def run_usage(tx: Tx, run_id: int, input_tokens: int, output_tokens: int, cost_usd: float) -> None:
    """Usage of a closed run learned after it closed (the differences)."""
    for fn in _of("run_usage"):
        fn(tx, run_id, input_tokens, output_tokens, cost_usd)


__all__ = ["POINTS", "SUBSCRIBERS", "all_mirrored", "blocked", "budget_blocked", "failed", "gave_up", "goal_verifying", "mirrored", "on",
           "reviewed", "run_closed", "run_usage", "sent_back", "task_done", "task_undone", "telemetry"]
