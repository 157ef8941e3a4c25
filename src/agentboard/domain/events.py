"""Event kinds: every change to the board appends one of these to ``task_events``."""

from __future__ import annotations

from typing import Final

LIFECYCLE: Final = (
    "created", "released", "specified", "decomposed", "promoted", "demoted", "claimed",
    "completed", "review_requested", "approved", "changes_requested", "rejected", "blocked",
    "unblocked", "reopened", "archived", "restored",
)
EDITS: Final = (
    "assigned", "edited", "reprioritized", "status", "linked", "unlinked", "commented",
    "attached", "detached",
)
TELEMETRY: Final = (
    "decompose_failed", "children_refused",
    "spawned", "heartbeat", "claim_extended", "reclaimed", "reclaim_deferred", "stale",
    "crashed", "timed_out", "spawn_failed", "protocol_violation", "rate_limited",
    "respawn_guarded", "gave_up", "verify_failed", "result_invalid", "result_repaired",
    "result_degraded", "review_unavailable", "tip_scratch_workspace", "profile_skipped",
    "verified", "workspace_removed", "verify_pending", "wiki_unavailable",
    "llm_used", "nudged", "workspace_busy", "tools_denied", "leftovers_ended", "log_capped",
    "proposed", "delegated",
)
GOALS: Final = (
    "goal_created", "goal_completed", "goal_cancelled", "goal_edited", "supervisor_woken",
    "replan_proposed", "budget_exhausted", "budget_warning",
)
NOTIFY: Final = ("notify_subscribed", "notify_unsubscribed", "notify_parked", "notify_resumed")
SUPERVISOR: Final = (
    "wake_moot", "wake_handled", "wake_expired", "escalated", "block_loop_detected", "waiting",
    "goal_verifying", "goal_verify_failed", "supervisor_enabled", "supervisor_disabled",
)
BOARD: Final = ("board_created", "board_renamed", "board_archived", "board_restored", "board_deleted", "profile_changed", "wiki_changed",
         "purged", "schedule_added", "schedule_removed", "schedule_fired", "schedule_skipped",
         "schedule_failed")

#: a task's branch: what finishing the task did with it (``integration_pending``: a worker's
#: report waits for the dispatcher to integrate the branch after the worker exits)
GIT: Final = ("integrated", "integration_refused", "integration_left", "integration_pending")

#: races: several attempts at one task (``kernel.races``)
RACES: Final = ("race_created", "race_started", "race_refused", "attempt_started", "attempt_finished",
                "attempt_stopped", "race_won", "race_finished", "race_failed")

#: budgets and diagnostics
BUDGETS: Final = ("budget_changed", "unguarded")

ALL: Final = frozenset(LIFECYCLE + EDITS + TELEMETRY + GOALS + BOARD + NOTIFY + SUPERVISOR + GIT + BUDGETS
                         + RACES)

#: events a notifier delivers
TERMINAL: Final = frozenset(
    {"completed", "blocked", "gave_up", "crashed", "timed_out", "review_requested", "goal_completed",
     "escalated"}
)

#: what a subscription delivers when it names no kinds: work that finished, stopped or needs a
#: person (a ``blocked`` event covers needs_input and the supervisor's escalations), budgets,
#: and goals reached
NOTIFY_DEFAULT: Final = (
    "completed", "blocked", "gave_up", "crashed", "timed_out", "review_requested",
    "budget_warning", "budget_exhausted", "goal_completed",
)
