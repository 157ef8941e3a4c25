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
    "attached",
)
TELEMETRY: Final = (
    "decompose_failed", "children_refused",
    "spawned", "heartbeat", "claim_extended", "reclaimed", "reclaim_deferred", "stale",
    "crashed", "timed_out", "spawn_failed", "protocol_violation", "rate_limited",
    "respawn_guarded", "gave_up", "verify_failed", "result_invalid", "result_repaired",
    "result_degraded", "review_unavailable", "tip_scratch_workspace", "profile_skipped",
    "verified", "workspace_removed", "verify_pending", "wiki_unavailable",
    "llm_used",
)
GOALS: Final = (
    "goal_created", "goal_completed", "goal_cancelled", "goal_edited", "supervisor_woken",
    "replan_proposed", "budget_exhausted", "budget_warning",
)
#: budgets and diagnostics
BUDGETS: Final = ("budget_changed", "unguarded")
BOARD: Final = ("board_created", "board_renamed", "board_archived", "board_restored", "board_deleted", "profile_changed", "wiki_changed")

ALL: Final = frozenset(LIFECYCLE + EDITS + TELEMETRY + GOALS + BOARD + BUDGETS)

#: events a notifier delivers
TERMINAL: Final = frozenset(
    {"completed", "blocked", "gave_up", "crashed", "timed_out", "review_requested", "goal_completed"}
)
