"""The supervisor's side of the kernel: wakes, replan proposals, the block loop, goals that
verify, and the writes of the supervisor's tools.

A board names its supervisor profile in its settings (``supervisor = NAME``). Its handlers of
the kernel's hooks (``kernel/hooks.py``: :func:`on_blocked`, :func:`on_gave_up`,
:func:`on_sent_back`, :func:`on_failed`, :func:`on_telemetry`, :func:`on_goal_verifying`,
:func:`on_budget_blocked`) run inside the transaction of the change that fires them and enqueue a
**wake**: one pending row per ``(board, reason, subject)`` (a partial unique
index coalesces the rest), never for a change the supervisor itself made (actor
``supervisor:<profile>``) and never about the supervisor's own tasks.

The dispatcher (``dispatch/supervising.py``) takes due wakes with :func:`take_due`: a cheap
check in code (:func:`moot_reason`) closes the ones with nothing left to judge as ``moot``; the
others become one **supervision task** per subject (``tasks.purpose = 'supervision'``, assigned
to the supervisor profile, its body the context: wake ids, subjects, the failure history), which
the dispatcher starts like any task, under the same caps. The supervisor marks its wakes handled
(:func:`handle`); a wake it leaves open expires (:func:`reconcile`), re-fires once, then is
escalated to a person.

The code lives in four modules: ``waking`` (wakes enqueued by the hooks, replan proposals),
``sweep`` (taking due wakes, expiry, the sweep), ``tools`` (the supervisor's writes) and ``reads``
(enabling it, its status and log); ``kernel.supervision.X`` names them all.
"""

from __future__ import annotations

from .reads import log, overview, panel, set_budget_scope, set_supervisor, status, wake_out, wakes
from .sweep import (
    due_work,
    moot_reason,
    reconcile,
    sweep_candidates,
    sweep_enqueue,
    take_due,
    withdraw_moot_replans,
)
from .tools import discard_proposal, escalate, goal_verdict, handle, release_proposal
from .waking import (
    ACTOR_PREFIX,
    HISTORY_KINDS,
    REASONS,
    REPEATED_OUTCOMES,
    REPLAN_ACTOR,
    SUPERVISION,
    TAKE_LIMIT,
    WAKE_STATUSES,
    enqueue,
    failure_history,
    is_supervisor_actor,
    on_blocked,
    on_budget_blocked,
    on_failed,
    on_gave_up,
    on_goal_verifying,
    on_sent_back,
    on_telemetry,
    propose_replan,
    supervisor_actor,
    supervisor_of,
)

__all__ = [
    "ACTOR_PREFIX", "REASONS", "REPLAN_ACTOR", "SUPERVISION", "WAKE_STATUSES", "discard_proposal", "due_work", "enqueue",
    "escalate", "failure_history", "goal_verdict", "handle", "is_supervisor_actor", "log",
    "moot_reason", "on_blocked", "on_budget_blocked", "on_failed", "on_gave_up", "on_goal_verifying", "on_sent_back", "on_telemetry", "overview", "panel",
    "propose_replan", "reconcile", "release_proposal", "set_supervisor", "status", "supervisor_actor",
    "supervisor_of", "sweep_candidates", "sweep_enqueue", "take_due", "wakes", "withdraw_moot_replans",
    "HISTORY_KINDS", "REPEATED_OUTCOMES", "TAKE_LIMIT", "set_budget_scope", "wake_out",
]
