"""What a worker may post: a few hundred comments a run, a few dozen proposals a task, and for
an orchestrator's task a bounded number of tasks, not too deep.

A run's token (and its MCP server) may comment on its own task and propose work, which lands in
triage for a person or the supervisor. Without a bound, one looping or hostile agent fills a
board in seconds (and again after its nudge). They are counted from the event log: a run's
``commented`` events on its task, and the ``proposed`` and ``delegated`` events of all the task's
runs together (a task retried after a run that created work and failed would otherwise create
it again on every retry), read through the task's event index, in the transaction that writes
the next one, so the bound holds across hosts. Past it the verb is refused with :class:`.TooMany` (HTTP 429, exit code 4)
and nothing is written. The settings ``run_comment_limit`` and ``run_proposal_limit`` set the
bounds (``docs/settings.md``).

An orchestrator's run creates tasks that start by themselves, and an orchestrator that hands
work to itself would do so without end. Its creates (:func:`delegate`) leave a ``delegated``
event each on its own task, counted the same way against ``run_create_limit``; and a task is
one level deeper than the task whose run created it (``tasks.created_by`` is ``run:<id>``), so
a run of a task ``delegation_depth_limit`` levels deep may create none (its proposals into
triage, for a person, it still may).
"""

from __future__ import annotations

import time
from typing import Any, Unpack

from ..domain.errors import TooMany
from ..domain.task_fields import NewTaskFields
from ..store.engine import Database, Row, Tx
from .tasks.creation import NewTask, create_in

COMMENTS = "commented"
PROPOSALS = "proposed"
CREATES = "delegated"
_WHAT = {COMMENTS: ("comments", "run_comment_limit", "say the rest in your result's summary"),
         PROPOSALS: ("proposals", "run_proposal_limit", "list further ideas in your result's summary"),
         CREATES: ("tasks", "run_create_limit", "do the rest in this run, or propose it with "
                   "`agentboard create --triage` for a person")}
#: how a run's token names itself, as the ``created_by`` of the tasks it creates (``kernel.tokens``)
_RUN_ACTOR = "run:"


#: what is counted over all the runs of a task (since a person last reopened it), not per run: a
#: retry of a run that created or proposed work before it failed would create it again, and each
#: retry as much again
PER_TASK = frozenset({PROPOSALS, CREATES})


def charge(tx: Tx, task_id: str, run_id: int, kind: str, limit: int, n: int = 1) -> None:
    """Refuse (:class:`.TooMany`) ``n`` more ``kind`` events past ``limit``: comments
    (:data:`COMMENTS`) of run ``run_id`` on its task ``task_id``; proposals and creates
    (:data:`PER_TASK`) of all the task's runs together."""
    if n <= 0:
        return
    per_task = kind in PER_TASK
    # a task's runs since a person last reopened it: a reopened task is new work
    since = (" AND id > COALESCE((SELECT MAX(id) FROM task_events WHERE task_id = :t AND kind = 'reopened'), 0)"
             if per_task else " AND run_id = :r")
    used = int(tx.scalar("SELECT count(*) FROM task_events WHERE task_id = :t AND kind = :k" + since,
                         {"t": task_id, "r": int(run_id), "k": kind}) or 0)
    if used + n > limit:
        what, setting, instead = _WHAT[kind]
        if per_task:
            raise TooMany(f"the runs of task {task_id} have posted {used} {what}, the most one task's runs may "
                          f"together ({setting} = {limit}; what the runs before made is in its `delegated` and `proposed` "
                          f"events): {instead}")
        raise TooMany(f"run {run_id} of task {task_id} has posted {used} {what}, the most one run may "
                      f"({setting} = {limit}): {instead}")


def proposed_in(tx: Tx, board: str, task_id: str, run_id: int, actor: str, children: list[Row]) -> None:
    """Record on the run's own task the proposals it made (one ``proposed`` event each)."""
    if children:
        tx.events(board, [(task_id, PROPOSALS, {"task": c["id"], "title": c["title"]}, int(run_id), actor,
                           float(c.get("created_at") or time.time())) for c in children])


def propose(db: Database, board: str, title: str, *, task_id: str, run_id: int, actor: str | None = None,
            **fields: Unpack[NewTaskFields]) -> Row:
    """A worker run's proposal: a task in triage on its board, and a ``proposed`` event on the
    run's own task ``task_id``; refused past ``run_proposal_limit`` proposals of the run."""
    fields["triage"] = True
    new = NewTask.build(board, title, actor=actor, **fields)
    limit = int(db.settings.run_proposal_limit)

    def _w(tx: Tx) -> Row:
        charge(tx, task_id, run_id, PROPOSALS, limit)
        out: dict[str, Any] = create_in(tx, new)
        if not out.get("existing"):
            proposed_in(tx, board, task_id, run_id, actor or "worker", [out])
        return out

    return db.write(_w)


def delegation_depth(tx: Tx, task_id: str, stop: int) -> int:
    """How many levels deep ``task_id`` is: 0 for a task a person (or the board) created, one
    more than its creator's task for a task created by a run (``created_by`` ``run:<id>``);
    counted up to ``stop``, two lookups by key a level."""
    depth = 0
    seen = {task_id}
    while depth < stop:
        by = str(tx.scalar("SELECT created_by FROM tasks WHERE id = :t", {"t": task_id}) or "")
        if not by.startswith(_RUN_ACTOR) or not by[len(_RUN_ACTOR):].isdigit():
            break
        parent = tx.scalar("SELECT task_id FROM task_runs WHERE id = :r", {"r": int(by[len(_RUN_ACTOR):])})
        if parent is None or parent in seen:  # its run is gone (purged)
            break
        seen.add(str(parent))
        task_id = str(parent)
        depth += 1
    return depth


def delegate(db: Database, board: str, title: str, *, task_id: str, run_id: int, actor: str | None = None,
             **fields: Unpack[NewTaskFields]) -> Row:
    """An orchestrator run's create: a task on its board, and a ``delegated`` event on the run's
    own task ``task_id``; refused (:class:`.TooMany`) past ``run_create_limit`` creates of the
    run, or when the run's task is ``delegation_depth_limit`` levels deep already."""
    new = NewTask.build(board, title, actor=actor, **fields)
    limit = int(db.settings.run_create_limit)
    deepest = int(db.settings.delegation_depth_limit)

    def _w(tx: Tx) -> Row:
        charge(tx, task_id, run_id, CREATES, limit)
        depth = delegation_depth(tx, task_id, deepest) + 1
        if depth > deepest:
            raise TooMany(f"task {task_id} is {deepest} level(s) of delegation deep (a task created by a run of "
                          f"a task created by a run of …), the most there may be (delegation_depth_limit = "
                          f"{deepest}): its runs create no more tasks; {_WHAT[CREATES][2]}")
        out: dict[str, Any] = create_in(tx, new)
        if not out.get("existing"):
            tx.event(board, task_id, CREATES, {"task": out["id"], "title": out["title"], "depth": depth},
                     run_id=int(run_id), actor=actor or "worker", at=float(out.get("created_at") or time.time()))
        return out

    return db.write(_w)


__all__ = ["COMMENTS", "CREATES", "PROPOSALS", "charge", "delegate", "delegation_depth", "propose", "proposed_in"]
