"""What a dispatcher pass does for races (``kernel.races``): settle each board's races under way,
and pick a ``first-pass`` race's winner through the one road to done (``finish.pick``).

A winner whose branch cannot be integrated blocks the race ``needs_input`` with the reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from ..domain.errors import AgentboardError
from ..kernel import boards as kboards
from ..kernel import races as kraces
from ..protocol import review_context
from ..store.engine import Database, Row
from . import branches, diffs, finish

log = logging.getLogger("agentboard.dispatch")


def settle(db: Database, board: str, ids: Sequence[str] | None = None) -> list[str]:
    """Settle the board's races (``ids``: those under way, read already); returns the races won
    in this call."""
    won = []
    for task_id, n in kraces.settle(db, board, ids=ids):
        try:
            # refused, the race is blocked: unblocking it runs its settling again, which picks it
            finish.pick(db, board, task_id, n, actor="dispatcher",
                        again=f"unblock the race (`agentboard unblock {task_id}`), which picks its winner again")
            won.append(task_id)
        except AgentboardError as exc:
            log.warning("race %s: attempt %s could not be picked: %s", task_id, n, exc)
            why = f"attempt {n} passed first but could not be picked: {exc}"
            if isinstance(exc, finish.PickRefused):  # what to do first (a block reason shows one line), then why
                why = (f"attempt {n} passed first but its branch could not be integrated ({exc.mode}); fix this, "
                       f"then `agentboard unblock {task_id}` picks it again: {exc.why}")
            try:
                kraces.refuse(db, board, task_id, why)
            except AgentboardError as again:  # the race moved meanwhile (a person picked or cancelled it)
                log.info("race %s: %s", task_id, again)
    return won


def view(db: Database, board: str, task_id: str) -> Row:
    """A race with its attempts as ``agentboard attempts``, REST and the dashboard show them: each
    attempt's profile, model, state, outcome, verification, its branch's diff stat, duration,
    tokens, cost (``cost_known`` false: its agent reported none) and summary, whether it is
    picked, and which attempts may be picked now. The diff stat counts what is not committed yet
    in the attempt's worktree too, as ``agentboard diff`` does. An attempt under way whose task is
    blocked for a while (a spent budget, a rate limit) is ``paused`` with that block kind."""
    race = kraces.attempts(db, board, task_id)
    settings = kboards.get(db, board).get("settings") or {}
    now = time.time()
    out: list[dict[str, Any]] = []
    for a in race["attempts"]:
        own = a.pop("task", None) or {}
        git: dict[str, Any] | None = None
        if own.get("workspace_kind") == "worktree":
            repo = branches.repo_of(own)
            default = branches.board_base(repo, settings) if repo is not None else None
            git = _with_uncommitted(own, branches.facts(own, default).as_dict())
        started, finished = a.get("started_at"), a.get("finished_at")
        duration = (float(finished or now) - float(started)) if started else None
        paused = own.get("block_kind") if own.get("status") == "blocked" and a.get("state") == "running" else None
        out.append({**a, "task_status": own.get("status"), "git": git, "paused": paused,
                    "duration": None if duration is None else round(duration, 3),
                    "tokens": int(a.get("input_tokens") or 0) + int(a.get("output_tokens") or 0),
                    "can_pick": int(a["n"]) in race["can_pick"]})
    race["attempts"] = out
    passed = sum(1 for a in out if a.get("outcome") == "done")
    race["badge"] = f"race {passed}/{len(out)} passed" if race.get("race_until") else ""
    return race


def _with_uncommitted(own: Row, git: dict[str, Any]) -> dict[str, Any]:
    """The diff stat ``git`` of an attempt's branch, counting what its worktree holds uncommitted
    (``git["uncommitted"]``) the way the task's diff does (``dispatch.diffs``): its files once each,
    and their added and deleted lines."""
    if not git.get("uncommitted") or git.get("landed"):
        return git
    files = diffs.split(review_context.work_diff(diffs.facts_of(own)).text)
    if files:
        git.update(files=len({f["path"] for f in files}), insertions=sum(f["additions"] for f in files),
                   deletions=sum(f["deletions"] for f in files))
    return git


__all__ = ["settle", "view"]
