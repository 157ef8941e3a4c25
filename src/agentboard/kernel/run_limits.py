"""What one worker run may post: a few hundred comments, a few dozen proposals.

A run's token (and its MCP server) may comment on its own task and propose work, which lands in
triage for a person or the supervisor. Without a bound, one looping or hostile agent fills a
board in seconds (and again after its nudge). Each run is counted from the event log: its
``commented`` events on its task and the ``proposed`` events its proposals leave there (read
through the task's event index), in the transaction that writes the next one, so the bound
holds across hosts. Past it the verb is refused with :class:`.TooMany` (HTTP 429, exit code 4)
and nothing is written. The settings ``run_comment_limit`` and ``run_proposal_limit`` set the
bounds (``docs/settings.md``).
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
_WHAT = {COMMENTS: ("comments", "run_comment_limit", "say the rest in your result's summary"),
         PROPOSALS: ("proposals", "run_proposal_limit", "list further ideas in your result's summary")}


def charge(tx: Tx, task_id: str, run_id: int, kind: str, limit: int, n: int = 1) -> None:
    """Refuse (:class:`.TooMany`) ``n`` more ``kind`` events (:data:`COMMENTS`,
    :data:`PROPOSALS`) of run ``run_id`` on its task ``task_id`` past ``limit``."""
    if n <= 0:
        return
    used = int(tx.scalar("SELECT count(*) FROM task_events WHERE task_id = :t AND run_id = :r AND kind = :k",
                         {"t": task_id, "r": int(run_id), "k": kind}) or 0)
    if used + n > limit:
        what, setting, instead = _WHAT[kind]
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


__all__ = ["COMMENTS", "PROPOSALS", "charge", "propose", "proposed_in"]
