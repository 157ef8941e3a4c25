"""What the worker protocol (``agentboard.protocol``) reads, and the review gate's one write.

- :func:`prepare_inputs` / :func:`prepare_inputs_many`: everything written into a worker's
  ``.board/`` before it starts (the task with its surroundings, its history events and whether
  the board has a published wiki page), for one task or a batch in one transaction.
- :func:`exit_state` / :func:`exit_states`: the task and run an exited worker left behind.
- :func:`review_entry`: where a task's latest review entry stands;
  :func:`note_review_unavailable` records, once per entry, that no reviewer will give a verdict.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..domain import states
from ..domain.errors import AgentboardError
from ..store.engine import Database, Row, Tx, in_list
from .common import get_task
from .queries import task_details_in

HISTORY_KINDS = ("changes_requested", "rejected", "verify_failed", "result_invalid", "result_degraded")
REVIEW_UNAVAILABLE = "peer review unavailable"


# -- before a spawn ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrepareInputs:
    """What is written into one worker's ``.board/`` folder, read in one transaction."""

    detail: Row
    """The task with its surroundings (:func:`queries.task_detail`, without events)."""
    history: list[Row]
    """The events ``.board/history.md`` is rebuilt from: the task's rework notes, verification
    failures and result repairs (:data:`HISTORY_KINDS`), oldest first, payloads decoded."""
    any_published: bool
    """Whether the board has a published wiki page (False when the wiki context is off)."""


def _history_events_in(tx: Tx, board: str, task_ids: Sequence[str]) -> Callable[[], dict[str, list[Row]]]:
    """The history events of each of ``task_ids`` (see :class:`PrepareInputs`), in one statement
    sent now (:meth:`Tx.later`) and read when the answer is called."""
    params: dict[str, Any] = {"b": board}
    sent = tx.later(
        "SELECT task_id, id, run_id, kind, payload, actor, created_at FROM task_events "
        f"WHERE task_id IN {in_list('t', task_ids, params)} AND board = :b "
        f"AND kind IN {in_list('k', HISTORY_KINDS, params)} ORDER BY id",
        params,
    )

    def read() -> dict[str, list[Row]]:
        out: dict[str, list[Row]] = {}
        for r in sent():
            try:
                r["payload"] = json.loads(r["payload"] or "{}")
            except ValueError:
                r["payload"] = {}
            out.setdefault(r.pop("task_id"), []).append(r)
        return out
    return read


def _any_published_in(tx: Tx, board: str) -> Callable[[], bool]:
    """Whether ``board`` has a published wiki page: sent now, read when the answer is called."""
    sent = tx.later("SELECT 1 AS x FROM wiki_pages WHERE board = :b AND status = 'published' LIMIT 1", {"b": board})
    return lambda: bool(sent())


def prepare_inputs_many(db: Database, board: str, task_ids: Sequence[str], *,
                        wiki_on: bool) -> dict[str, PrepareInputs | AgentboardError]:
    """:class:`PrepareInputs` of several tasks of one board, in one transaction; a task whose
    read failed maps to the error (NotFound: it is gone or on another board)."""
    return db.read_pipelined(prepare_inputs_many_in, board, task_ids, wiki_on=wiki_on)


def prepare_inputs_many_in(tx: Tx, board: str, task_ids: Sequence[str], *,
                           wiki_on: bool) -> dict[str, PrepareInputs | AgentboardError]:
    """:func:`prepare_inputs_many` inside the caller's transaction (a dispatcher's claim)."""
    # sent with the details' first statements: one round trip on a PostgreSQL pipeline
    published = _any_published_in(tx, board) if wiki_on else (lambda: False)
    read_history = _history_events_in(tx, board, list(dict.fromkeys(task_ids)))
    details = task_details_in(tx, board, task_ids, events=0)
    history = read_history()
    published_now = published()
    out: dict[str, PrepareInputs | AgentboardError] = {}
    for task_id, detail in details.items():
        out[task_id] = (detail if isinstance(detail, AgentboardError)
                        else PrepareInputs(detail, history.get(task_id, []), published_now))
    return out


def prepare_inputs(db: Database, board: str, task_id: str, *, wiki_on: bool) -> PrepareInputs:
    """:class:`PrepareInputs` of one task (NotFound when it is not on ``board``)."""
    found = prepare_inputs_many(db, board, [task_id], wiki_on=wiki_on)[task_id]
    if isinstance(found, AgentboardError):
        raise found
    return found


# -- after an exit ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExitState:
    """The rows an exited worker left behind, as stored (JSON columns not decoded)."""

    task: Row | None
    """The task, or None when it is gone or not on the board the exit names."""
    run: Row | None
    """The run, or None when it is gone."""


def exit_states(db: Database, keys: Sequence[tuple[str, str, int]]) -> dict[int, ExitState]:
    """The :class:`ExitState` of several exits ``(board, task id, run id)`` by run id: two
    statements for all."""
    def _r(tx: Tx) -> dict[int, ExitState]:
        tparams: dict[str, Any] = {}
        rparams: dict[str, Any] = {}
        tasks = {r["id"]: r for r in tx.all(
            f"SELECT * FROM tasks WHERE id IN {in_list('t', [k[1] for k in keys], tparams)}", tparams)}
        runs = {int(r["id"]): r for r in tx.all(
            f"SELECT * FROM task_runs WHERE id IN {in_list('r', [k[2] for k in keys], rparams)}", rparams)}
        out: dict[int, ExitState] = {}
        for board, task_id, run_id in keys:
            task = tasks.get(task_id)
            out[run_id] = ExitState(task if task is not None and task["board"] == board else None,
                                    runs.get(run_id))
        return out
    return db.read(_r)


def exit_state(db: Database, board: str, task_id: str, run_id: int) -> ExitState:
    """The :class:`ExitState` of one exit."""
    return exit_states(db, [(board, task_id, run_id)])[run_id]


# -- the review gate ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewEntry:
    """Where a task's latest entry into review stands."""

    status: str
    """The task's status."""
    noted: bool
    """A ``review_unavailable`` event was recorded since the latest ``review_requested`` one."""
    degraded: bool
    """The result of the run that entered review never validated (``result_degraded``)."""
    run: Row | None
    """The latest closed run that is not a review run (id, profile, summary, metadata as stored), if any."""


def _review_entry_in(tx: Tx, board: str, task_id: str) -> ReviewEntry:
    task = get_task(tx, board, task_id)
    anchor = tx.scalar(
        "SELECT COALESCE(MAX(id), 0) FROM task_events WHERE task_id = :t AND kind = 'review_requested'",
        {"t": task_id},
    )
    noted = tx.scalar(
        "SELECT COUNT(*) FROM task_events WHERE task_id = :t AND kind = 'review_unavailable' AND id > :a",
        {"t": task_id, "a": anchor},
    )
    degraded = tx.scalar(
        "SELECT COUNT(*) FROM task_events WHERE task_id = :t AND kind = 'result_degraded' AND id > :a",
        {"t": task_id, "a": anchor},
    ) if anchor else 0
    # a degraded result records its event just after the review_requested one
    last_run = tx.one(
        "SELECT id, profile, summary, metadata FROM task_runs WHERE task_id = :t AND status = 'closed' "
        "AND (claim_lock IS NULL OR claim_lock NOT LIKE 'review:%') ORDER BY id DESC LIMIT 1",
        {"t": task_id},
    )
    degraded_run = 0
    if last_run is not None:
        degraded_run = tx.scalar(
            "SELECT COUNT(*) FROM task_events WHERE task_id = :t AND kind = 'result_degraded' AND run_id = :r",
            {"t": task_id, "r": last_run["id"]},
        )
    return ReviewEntry(status=str(task["status"]), noted=bool(noted), degraded=bool(degraded or degraded_run),
                       run=last_run)


def review_entry(db: Database, board: str, task_id: str) -> ReviewEntry:
    """Where the task's latest review entry stands (NotFound when it is not on ``board``)."""
    return db.read(_review_entry_in, board, task_id)


def note_review_unavailable(db: Database, board: str, task_id: str, reason: str) -> Row:
    """Record that no reviewer will give a verdict on the task's current review entry: one
    ``review_unavailable`` event per entry, saying the task waits for a person and why.

    Returns ``{"action": "unavailable", "message"}``, or ``{"action": "already_noted"}`` when
    this entry was noted before, or ``{"action": "not_in_review", "status"}``.
    """
    def _w(tx: Tx) -> Row:
        entry = _review_entry_in(tx, board, task_id)
        if entry.status != states.REVIEW:
            return {"action": "not_in_review", "status": entry.status}
        if entry.noted:
            return {"action": "already_noted"}
        tx.event(board, task_id, "review_unavailable",
                 {"message": REVIEW_UNAVAILABLE, "reason": reason, "waiting_for": "a person"},
                 run_id=entry.run["id"] if entry.run else None, actor="reviewer")
        return {"action": "unavailable", "message": f"{REVIEW_UNAVAILABLE}: {reason}"}
    return db.write(_w)


__all__ = [
    "HISTORY_KINDS", "REVIEW_UNAVAILABLE", "ExitState", "PrepareInputs", "ReviewEntry", "exit_state",
    "exit_states", "note_review_unavailable", "prepare_inputs", "prepare_inputs_many", "review_entry",
]
