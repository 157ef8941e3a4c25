"""The dispatcher's side of the supervisor (``kernel.supervision`` holds the wakes).

Each pass, for the boards with open wakes (read with the pass's snapshot, :func:`kernel.supervision.due_work`):

- **reconcile**: wakes whose supervision task ended without marking them handled expire,
  re-fire once, then go to a person;
- **the cheap check and the spawn**: :func:`kernel.supervision.take_due` closes the wakes with
  nothing left to judge as ``moot`` (code, no LLM, no spawn) and turns the others into one
  supervision task per subject, assigned to the board's supervisor profile. The pass then starts
  those like any ready task — the same :class:`~.spawning.Spawner` path, the same parallelism
  caps, the profile's ``max_concurrency``, budgets and the breaker;
- **goal verification**: a verifying goal with ``--verify`` commands has them run (off the pass
  thread) in the board's target directory; they give the verdict;
- **the sweep**, every ``supervisor_sweep`` seconds per board (and on the first pass after a
  start): runs whose process is gone, tasks blocked longer than ``stuck_after``, ready tasks no
  enabled profile can run — wakes for whatever the hooks missed.
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..domain.errors import AgentboardError
from ..kernel import supervision as ks
from ..protocol import verify
from ..store.engine import Row
from . import liveness
from .runtime import Context

log = logging.getLogger("agentboard.dispatch")


class Supervising:
    """The supervisor's work in each pass; only the pass thread calls :meth:`run`."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        #: when each board was last swept (0: not since this dispatcher started)
        self.last_sweep: dict[str, float] = {}
        self._checking: set[str] = set()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def run(self, held: list[Row], now: float, work: dict[str, Row] | None = None) -> float | None:
        """One pass's supervision over the boards ``held``; the next time a sweep is due.
        ``work``: the due work, read already (the pass's snapshot)."""
        db = self.ctx.db
        work = ks.due_work(db) if work is None else work
        due: float | None = None
        interval = float(self.ctx.settings.supervisor_sweep)
        for b in held:
            slug = b["slug"]
            entry = work.get(slug) or {}
            try:
                for g in entry.get("goals", []):
                    self._verify_goal(b, g)
                if not (b.get("settings") or {}).get("supervisor"):
                    continue
                if now - self.last_sweep.get(slug, 0.0) >= interval:
                    self.last_sweep[slug] = now
                    self.sweep(slug, now)
                    entry = ks.due_work(db).get(slug) or {}
                at = self.last_sweep[slug] + interval
                due = at if due is None else min(due, at)
                refired = ks.reconcile(db, slug)["refired"] if entry.get("running") else []
                if entry.get("pending") or refired:
                    out = ks.take_due(db, slug)
                    if out["moot"] or out["tasks"]:
                        log.info("supervisor on %s: %d wake(s) moot, %d supervision task(s) created",
                                 slug, len(out["moot"]), len(out["tasks"]))
            except AgentboardError as exc:
                log.warning("supervisor on %s: %s", slug, exc)
        return due

    # -- the sweep -----------------------------------------------------------------------------------

    def sweep(self, slug: str, now: float) -> list[int]:
        """Enqueue wakes for what the hooks missed on board ``slug``; the wake ids added. Replan
        proposals whose task is done or archived since are withdrawn first."""
        ks.withdraw_moot_replans(self.ctx.db, slug)
        found = ks.sweep_candidates(self.ctx.db, slug, now)
        lost: list[tuple[str, Any]] = []
        for r in found["running"]:
            if r.get("purpose") == ks.SUPERVISION or r.get("current_run_id") is None:
                continue
            if self.ctx.local(r):
                pid = r.get("worker_pid")
                if pid and not liveness.pid_alive(int(pid), started_after=r.get("started_at")):
                    lost.append((r["id"], r["current_run_id"]))
            elif r.get("claim_expires") is not None and float(r["claim_expires"]) < now:
                lost.append((r["id"], r["current_run_id"]))
        return ks.sweep_enqueue(self.ctx.db, slug, {"run_lost": lost, "stuck": found["stuck"],
                                                    "unrunnable": found["unrunnable"],
                                                    "goal_verifying": found["goal_verifying"]})

    # -- goals with verify commands ------------------------------------------------------------------

    def _verify_goal(self, board: Row, goal: Row) -> None:
        with self._lock:
            if goal["id"] in self._checking:
                return
            self._checking.add(goal["id"])
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentboard-goal-verify")
        self._pool.submit(self._check_goal, board, goal)

    def _check_goal(self, board: Row, goal: Row) -> None:
        try:
            workdir = board.get("default_workdir")
            if workdir and Path(workdir).is_dir():
                where = Path(workdir)
            else:
                where = self.ctx.home / "goal-checks" / goal["id"]
                where.mkdir(parents=True, exist_ok=True)
            from ..kernel import host_access

            checks = host_access.board_checks(self.ctx.db, board["slug"])
            setup = goal_setup(self.ctx, board, goal["id"], where)
            result = verify.run(list(goal["verify"]), where, timeout=float(self.ctx.settings.verify_timeout),
                                checks=checks, confinement=setup.confinement, base_env=setup.base_env,
                                unavailable=setup.unavailable)
            lines = [f"{'ok' if r.passed else 'FAILED'}: `{r.command}` (exit {r.exit_code})"
                     + (f"\n{r.output_tail.strip()[-1500:]}" if not r.passed and r.output_tail.strip() else "")
                     for r in result.results]
            evidence = f"verify commands in {where}:\n" + "\n".join(lines)
            ks.goal_verdict(self.ctx.db, board["slug"], goal["id"], passed=result.passed, evidence=evidence,
                            actor="verify")
        except AgentboardError as exc:
            log.info("goal %s verification: %s", goal["id"], exc)
        except Exception:
            log.exception("goal %s verification failed", goal["id"])
        finally:
            with self._lock:
                self._checking.discard(goal["id"])
            self.ctx.wake()

    def drain(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


#: the isolation modes, the least confined first
_STRICTNESS = ("none", "user", "sandbox")


def goal_setup(ctx: Context, board: Row, goal_id: str, where: Path) -> verify.Setup:
    """How a goal's checks run: they run the code its tasks' workers wrote, so never with more
    than the most confined of those workers had — the environment a worker inherits (no
    ``AGENTBOARD_*``, no secret the deny list names, no run token) under the strictest isolation
    among the profiles that ran the goal's tasks (``unavailable`` says why that cannot be had)."""
    from ..kernel import profiles as kprofiles
    from ..protocol import project_env
    from . import isolation, spawn

    settings = ctx.settings
    env = spawn.inherited(settings, os.environ)
    env.pop("VIRTUAL_ENV", None)
    env.update(project_env.environment(settings.home, env.get("PATH", os.defpath), board))
    names = ctx.db.read(lambda tx: [r["profile"] for r in tx.all(
        "SELECT DISTINCT r.profile FROM task_runs r JOIN tasks t ON t.id = r.task_id "
        "WHERE t.goal_id = :g AND r.profile IS NOT NULL", {"g": goal_id})])
    modes = {"none"}
    for name in names:
        try:
            modes.add(str(kprofiles.get(ctx.db, name).get("isolation") or "none"))
        except AgentboardError:
            modes.add("sandbox")  # a profile gone since: assume the worst it could have been
    mode = max(modes, key=lambda m: _STRICTNESS.index(m) if m in _STRICTNESS else len(_STRICTNESS))
    if mode == "none":
        return verify.Setup(None, env)
    try:
        conf = isolation.resolve(mode, settings)
    except isolation.IsolationError as exc:
        return verify.Setup(None, env, f"the goal's workers ran with isolation {mode!r}: {exc}")
    if conf.bwrap is not None:
        conf = conf.showing(isolation.needed_paths(["/bin/sh"], env))
    return verify.Setup(conf, env)


__all__ = ["Supervising", "goal_setup"]
