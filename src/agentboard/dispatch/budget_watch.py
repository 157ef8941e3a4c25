"""Budgets in the dispatcher: workers of a spent scope stopped, blocked tasks released.

The claim itself refuses a task whose scope cannot afford a run (``kernel.budgets.gate_in``, in
``kernel.dispatching.claim_batch``: every run the dispatcher starts goes through it). Here, once
per pass:

- a running task one of whose budgets is spent has been told so by its heartbeat answer; after
  ``budget_stop_grace`` seconds its worker's process group is ended and its run closed, the task
  blocked with kind ``budget`` (``kernel.budgets.stop_run``). The runs under way spend runtime
  as they go: a runtime limit they pass is marked spent here (its ``budget_exhausted`` event, the
  heartbeats told to stop), and the pass is due again when the runs under way will pass the next
  one (``kernel.budgets.running_over``: one read of the budgets, one of the runs under way when
  a runtime limit exists);
- once per ``dispatch_interval``, tasks blocked by a budget that now lets them through (a new
  day or month) are released (``kernel.budgets.release``); raising or clearing a limit releases
  them at once, in its own transaction.
"""

from __future__ import annotations

import logging

from ..domain.errors import AgentboardError
from ..kernel import budgets as kb
from ..store.engine import Row
from . import liveness, reaping, spawn
from .runtime import Context

log = logging.getLogger("agentboard.dispatch")

#: seconds between SIGTERM and SIGKILL when ending a worker stopped for its budget
STOP_GRACE = 5.0


class BudgetWatch:
    """Only the pass thread calls it."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        #: run id -> when this dispatcher first saw its scope spent
        self.first_seen: dict[int, float] = {}
        self.last_release = 0.0

    def check(self, running: list[Row], slugs: set[str], now: float, spent: bool = True) -> float | None:
        """Stop the local workers whose budget is spent once their grace is over; release what a
        budget lets through again. Returns when it needs the next pass. ``spent=False``: no
        budget is spent and none has a runtime limit (the pass's snapshot says so), nothing to
        read for the running tasks."""
        ctx = self.ctx
        due: float | None = None
        interval = float(ctx.settings.dispatch_interval)
        if now - self.last_release >= interval:
            self.last_release = now
            try:
                kb.release(ctx.db, sorted(slugs))
            except AgentboardError as exc:
                log.warning("releasing budget-blocked tasks: %s", exc)
        over: dict[str, str] = {}
        if running and spent:
            try:
                rows, due = kb.running_over(ctx.db)
                over = {r["id"]: r["reason"] for r in rows}
            except AgentboardError as exc:
                log.warning("reading spent budgets: %s", exc)
        grace = float(ctx.settings.budget_stop_grace)
        live: set[int] = set()
        for r in running:
            rid = r["current_run_id"]
            if r["id"] not in over or rid is None or r["board"] not in slugs or not ctx.local(r):
                continue
            live.add(rid)
            if ctx.workers.busy(rid):
                continue
            first = self.first_seen.setdefault(rid, now)
            if now - first < grace:
                due = first + grace if due is None else min(due, first + grace)
                continue
            ctx.jobs.submit(rid, self._stop, r, ctx.workers.get(rid), over[r["id"]])
        for rid in set(self.first_seen) - live:
            del self.first_seen[rid]
        return due

    def _stop(self, r: Row, w: spawn.Worker | None, reason: str) -> None:
        """End the worker's process group, then close its run and block the task."""
        pid = w.pid if w is not None else r.get("worker_pid")
        if pid:
            if not liveness.stop_worker(int(pid), grace=STOP_GRACE, proc=w.proc if w else None,
                                        started_after=float(r.get("run_started_at") or 0) or None):
                log.warning("run %s of %s: the worker survived SIGKILL", r["current_run_id"], r["id"])
                return
            liveness.end_group(int(pid), grace=STOP_GRACE)
        self.ctx.cgroups.end(int(r["current_run_id"]), grace=STOP_GRACE)
        if w is not None:
            w.poll()
            self.ctx.workers.forget(w.run_id)
            reaping.stopped_usage(self.ctx.db, w)
        try:
            kb.stop_run(self.ctx.db, r["board"], r["id"], int(r["current_run_id"]), reason)
        except AgentboardError as exc:
            log.info("run %s of %s: %s", r["current_run_id"], r["id"], exc)
        self.first_seen.pop(int(r["current_run_id"]), None)
