"""Statuses and the transition table.

The table below is the single statement of which verb may move a task from which status to
which status. The kernel checks every change against it, the tests are generated from it and
``agentboard`` prints it in the docs. Nothing else compares statuses to decide a move.
"""

from __future__ import annotations

from typing import Final

from .errors import InvalidTransition

TRIAGE: Final = "triage"
TODO: Final = "todo"
READY: Final = "ready"
RUNNING: Final = "running"
REVIEW: Final = "review"
BLOCKED: Final = "blocked"
DONE: Final = "done"
ARCHIVED: Final = "archived"

STATUSES: Final[tuple[str, ...]] = (TRIAGE, TODO, READY, RUNNING, REVIEW, BLOCKED, DONE, ARCHIVED)

#: statuses from which a parent counts as satisfied for its children
SATISFIED: Final = frozenset({DONE, ARCHIVED})

BLOCK_KINDS: Final[tuple[str, ...]] = (
    "needs_input",
    "gave_up",
    "rejected",
    "budget",
    "dependency",
    "manual",
    "merge_conflict",
    "rate_limited",
)

#: a todo task a person put there while its parents were done (``block_kind``; not a block): it
#: stays in todo — the dispatcher's safety net does not promote it — until a person moves it to
#: ready (the hold ends with it)
HELD: Final = "held"

#: block kinds that wait for a person (shown as such on the board)
PERSON_KINDS: Final = frozenset({"needs_input", "rejected", "manual"})

#: block kinds the dispatcher lifts by itself when the task's cool-down ends (``cooldown_until``)
TIMED_BLOCK_KINDS: Final = frozenset({"rate_limited"})

#: goal statuses: ``verifying`` once all its tasks are done, until its acceptance is checked
GOAL_STATUSES: Final[tuple[str, ...]] = ("active", "verifying", "done", "cancelled")

#: where a task a person creates lands: triage when asked, else todo or ready (the dashboard's
#: columns with a create button); the kernel's own creations may also start blocked
HAND_CREATE_STATUSES: Final[tuple[str, ...]] = (TRIAGE, TODO, READY)

#: a review's verdicts (``protocol/review.py``, ``POST /api/tasks/{id}/review``)
VERDICTS: Final[tuple[str, ...]] = ("approved", "changes_requested", "rejected")

#: a supervisor wake's statuses (``kernel/supervision.py``)
WAKE_STATUSES: Final[tuple[str, ...]] = ("pending", "running", "handled", "moot", "expired", "escalated")

#: run outcomes that return a running task to ready (the dispatcher's failure verbs)
RETURN_OUTCOMES: Final[tuple[str, ...]] = (
    "reclaimed",
    "stale",
    "crashed",
    "timed_out",
    "spawn_failed",
    "protocol_violation",
    "rate_limited",
    "verify_failed",
)

#: outcomes that count towards the circuit breaker
FAILURE_OUTCOMES: Final = frozenset(
    {"reclaimed", "crashed", "timed_out", "spawn_failed", "protocol_violation", "verify_failed"}
)

RUN_OUTCOMES: Final[tuple[str, ...]] = (
    "completed",
    "review_requested",
    "blocked",
    *RETURN_OUTCOMES,
    "gave_up",
    "changes_requested",
)

_ALL_BUT_ARCHIVED = frozenset(STATUSES) - {ARCHIVED}
_EDITABLE = frozenset(STATUSES)

#: verb -> {from status -> allowed target statuses}. ``None`` as the from-status is creation.
TRANSITIONS: Final[dict[str, dict[str | None, frozenset[str]]]] = {
    "create": {None: frozenset({READY, TODO, TRIAGE, BLOCKED})},
    "release": {TRIAGE: frozenset({TODO, READY})},
    "specify": {TRIAGE: frozenset({TODO, READY})},
    "decompose": {TRIAGE: frozenset({TODO})},
    "promote": {TODO: frozenset({READY})},
    "demote": {READY: frozenset({TODO})},
    "claim": {READY: frozenset({RUNNING})},
    "heartbeat": {RUNNING: frozenset({RUNNING})},
    "complete": {
        RUNNING: frozenset({DONE, REVIEW}),
        READY: frozenset({DONE}),
        BLOCKED: frozenset({DONE}),
        REVIEW: frozenset({DONE}),
    },
    "request_review": {RUNNING: frozenset({REVIEW})},
    "approve": {REVIEW: frozenset({DONE})},
    "request_changes": {REVIEW: frozenset({READY, TODO})},
    "reject": {REVIEW: frozenset({BLOCKED})},
    # approval could not integrate the task's branch (dirty target, conflicting base, no gh)
    "integration_refused": {REVIEW: frozenset({BLOCKED})},
    "block": {
        RUNNING: frozenset({BLOCKED}),
        READY: frozenset({BLOCKED}),
        TODO: frozenset({BLOCKED}),
    },
    # a ``dependency`` block: the task waits in todo for the task it names, then resumes by itself
    "wait": {
        RUNNING: frozenset({TODO}),
        READY: frozenset({TODO}),
        TODO: frozenset({TODO}),
    },
    # a task blocked again and again goes back to triage for the supervisor (or a person)
    "block_loop": {BLOCKED: frozenset({TRIAGE})},
    "unblock": {BLOCKED: frozenset({READY, TODO})},
    "assign": {
        TRIAGE: frozenset({TRIAGE}),
        TODO: frozenset({TODO, READY}),
        READY: frozenset({READY, TODO}),
        BLOCKED: frozenset({BLOCKED}),
        REVIEW: frozenset({REVIEW}),
    },
    "reclaim": {RUNNING: frozenset({READY, TODO})},
    "reopen": {DONE: frozenset({READY, TODO})},
    "archive": {s: frozenset({ARCHIVED}) for s in _ALL_BUT_ARCHIVED},
    "restore": {ARCHIVED: frozenset({TODO, READY})},
    # dispatcher outcomes: the worker is gone, the task goes back to the queue
    **{o: {RUNNING: frozenset({READY, TODO})} for o in RETURN_OUTCOMES if o != "reclaimed"},
    "gave_up": {RUNNING: frozenset({BLOCKED}), READY: frozenset({BLOCKED})},
    # no status change
    "edit": {s: frozenset({s}) for s in _EDITABLE},
    "comment": {s: frozenset({s}) for s in _EDITABLE},
    "attach": {s: frozenset({s}) for s in _EDITABLE},
}

VERBS: Final[tuple[str, ...]] = tuple(TRANSITIONS)


#: the statuses a person may ask a task to move to (the dashboard's drag and buttons, ``PATCH
#: status``); running is the dispatcher's and triage is where tasks start
HAND_TARGETS: Final[tuple[str, ...]] = (TODO, READY, REVIEW, BLOCKED, DONE, ARCHIVED)

#: the verb a move by hand to ready or todo uses, by the status the task leaves
_BACK_TO_QUEUE: Final[dict[str, str]] = {
    ARCHIVED: "restore",
    DONE: "reopen",
    BLOCKED: "unblock",
    TRIAGE: "release",
    RUNNING: "reclaim",
    REVIEW: "request_changes",
}


def hand_verb(current: str, target: str) -> str | None:
    """The verb a move by hand from ``current`` to ``target`` runs (``kernel.tasks.set_status``
    maps a requested status this way), or None when no verb is asked for that target."""
    if target == current or target not in HAND_TARGETS:
        return None
    if target == ARCHIVED:
        return "archive"
    if target == BLOCKED:
        return "reject" if current == REVIEW else "block"
    if target == DONE:
        return "approve" if current == REVIEW else "complete"
    if target == REVIEW:
        return "request_review"
    return _BACK_TO_QUEUE.get(current, "promote" if target == READY else "demote")


def hand_moves(current: str) -> dict[str, str]:
    """The moves by hand the transition table allows from ``current``: target -> verb, in
    lifecycle order. The kernel may still refuse a move to ready (parents not done, no
    assignee); ``kernel.offers.allowed_moves`` says so per task."""
    out: dict[str, str] = {}
    for target in STATUSES:
        verb = hand_verb(current, target)
        if verb is not None and target in TRANSITIONS[verb].get(current, ()):
            out[target] = verb
    return out


#: how a verb reads in "cannot <phrase> task X …" when its name alone does not
_PHRASES: Final[dict[str, str]] = {
    "request_changes": "request changes on",
    "request_review": "request a review of",
}


def check(verb: str, current: str | None, target: str, task_id: str = "") -> None:
    """Raise :class:`InvalidTransition` unless ``verb`` may move ``current`` to ``target``."""
    moves = TRANSITIONS.get(verb)
    if moves is None:
        raise InvalidTransition(f"unknown verb {verb!r}")
    targets = moves.get(current)
    if targets is None or target not in targets:
        who = f"task {task_id} " if task_id else ""
        phrase = _PHRASES.get(verb, verb.replace("_", " "))
        if targets is None:
            starts = sorted(s for s in moves if s is not None)
            raise InvalidTransition(
                f"cannot {phrase} {who}while it is {current} "
                f"(allowed from: {', '.join(starts) or 'creation'})"
            )
        raise InvalidTransition(f"cannot {phrase} {who}from {current} to {target}")


def can(verb: str, current: str | None) -> bool:
    return current in TRANSITIONS.get(verb, {})


def table_markdown() -> str:
    """The transition table rendered for the docs."""
    lines = ["| verb | from | to |", "|---|---|---|"]
    order = {s: i for i, s in enumerate(STATUSES)}
    for verb, moves in TRANSITIONS.items():
        # statuses in lifecycle order, so the printout is the same in every process
        for frm in sorted(moves, key=lambda s: -1 if s is None else order[s]):
            lines.append(f"| {verb} | {frm or '(new)'} | {', '.join(sorted(moves[frm]))} |")
    return "\n".join(lines)
