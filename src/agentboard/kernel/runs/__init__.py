"""Run verbs: claim, heartbeat, complete, review, reclaim and the dispatcher's outcomes.

Every write against a running task is a compare-and-swap on the task's status and current run,
so a late worker and a dispatcher's reclaim can never both apply. The verbs live in four modules:
``claims`` (claim, spawn, heartbeat), ``completion`` (complete, request review), ``reviews``
(verdicts and review runs) and ``outcomes`` (reclaim, fail, give up, facts learned afterwards);
``kernel.runs.X`` names them all.
"""

from __future__ import annotations

from .claims import (
    HAND_CLAIM,
    claim,
    claim_in,
    claim_next,
    claim_ttl,
    extend_claim,
    heartbeat,
    record_spawn,
    stale_error,
)
from .completion import (
    Report,
    complete,
    complete_in,
    request_review,
    request_review_in,
    usage_params,
)
from .outcomes import (
    RATE_LIMIT_BACKOFF_MAX,
    fail,
    give_up,
    mark_nudged,
    rate_limit_backoff,
    rate_limits_in_a_row,
    reclaim,
    reclaim_in,
    record_telemetry,
    return_to_queue,
    update_run,
)
from .reviews import (
    REVIEW_CLAIM,
    Verdict,
    approve,
    close_review_run,
    extend_review_claim,
    open_review_run,
    reject,
    request_changes,
    review,
    review_in,
    review_run_verdict,
    worker_of_review,
)

__all__ = [
    "HAND_CLAIM", "RATE_LIMIT_BACKOFF_MAX", "REVIEW_CLAIM", "Report", "Verdict", "approve", "claim", "claim_in", "claim_next", "claim_ttl",
    "close_review_run", "complete", "complete_in", "extend_claim", "extend_review_claim", "fail", "give_up",
    "heartbeat", "mark_nudged", "open_review_run", "rate_limit_backoff", "rate_limits_in_a_row", "reclaim",
    "reclaim_in", "record_spawn", "record_telemetry", "reject", "request_changes", "request_review",
    "request_review_in", "return_to_queue", "review", "review_in", "review_run_verdict", "stale_error", "update_run",
    "usage_params", "worker_of_review",
]
