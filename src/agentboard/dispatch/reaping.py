"""Reaping: what became of running tasks and of our workers.

Over 600 lines on purpose: one class, the road from a worker's exit (or silence) to its task's
outcome, whose steps share the facts of one check.

Checked by the pass thread, acted on by the job pool:

- **exits**: a local worker gone → what it left running in its process group is ended
  (SIGTERM, then SIGKILL), then its exit goes to the worker protocol
  (``protocol.lifecycle.after_exit``); plain completions, one exit's or several, are applied
  together (``lifecycle.plan_plain_completions`` + ``kernel.dispatching.complete_runs``: the
  closed runs are observed from what the completion had, without reading them back); what nothing
  reported becomes ``protocol_violation``, ``rate_limited`` or ``crashed``. A repair attempt is
  restarted through the spawner (:meth:`.spawning.Spawner.respawn`);
- **liveness**: a live local worker's claim is renewed; another host's (or a hand claim's)
  expired claim is ``reclaimed``; ``max_runtime`` → ``timed_out``; running long with no
  heartbeat → ``stale``; a repair attempt past its deadline is stopped and judged;
- **orphans**: our workers whose run is no longer current (it reported, or was reclaimed) —
  those taken over from an earlier dispatcher process on the host included (:mod:`.takeover`):
  their exit status and usage are kept on the run (and the run counted), or they are stopped;
  one that goes on after its report is kept within ``log_max_bytes`` until it is.

Every write against a running task passes its run id, so a late worker and the dispatcher never
both apply.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..domain.errors import AgentboardError, NotFound, StaleRun
from ..kernel import budgets as kb
from ..kernel import dispatching as kd
from ..kernel import profiles as kprofiles
from ..kernel import queries as kqueries
from ..kernel import runs as kr
from ..kernel import tasks as ktasks
from ..observe import logs, metrics
from ..protocol import inbox as boardinbox
from ..protocol import lifecycle
from ..store.engine import Row
from . import adapters, agent_config, finish, guard, liveness, spawn, takeover
from .report import Seen
from .runtime import Context
from .spawning import STOP_GRACE, Spawner, SpawnError

log = logging.getLogger("agentboard.dispatch")

#: exits found in one pass go to at most this many jobs, each handling at least EXIT_BATCH_MIN
EXIT_JOBS = 2
EXIT_BATCH_MIN = 4
EXIT_RATE_LIMITED = 75
#: seconds a worker that reported is given to exit on its own before it is stopped
REPORTED_GRACE = 30
#: hung runs (``stale``) of one task in a row after which it is blocked ``gave_up``
STALE_LIMIT = 3
#: how the error of a run stopped for hanging begins
HUNG = "running for"
#: seconds what an exited worker left running in its process group gets between SIGTERM and SIGKILL
EXIT_GROUP_GRACE = 2.0
#: an agent CLI's tool calls count as a heartbeat at most this often (seconds)
TOOL_HEARTBEAT_MIN = 60.0


@dataclass(frozen=True)
class FoundExit:
    """A worker found gone in this pass (its run is claimed busy until the exit is handled)."""

    run_id: int
    worker: spawn.Worker | None
    #: the running task (a row of ``PassSnapshot.running``) when the run is still current,
    #: so the exit decides the task; None for a worker of ours whose run had already ended
    row: Row | None = None


@dataclass(frozen=True)
class Check:
    """What checking one running task found: what the report counts, when it next needs a
    look, and an exit to handle."""

    seen: Seen | None = None
    due: float | None = None
    exit: FoundExit | None = None


@dataclass(frozen=True)
class ExitFacts:
    """How a worker ended and where its output is (from our child, else from the run's row)."""

    exit_code: int | None
    pid: int | None
    log_file: Path | None
    offset: int
    profile: Row
    workspace: Path
    attempt: int

    @property
    def adapter(self) -> str:
        return str(self.profile.get("adapter") or "command")

    @property
    def cli(self) -> str:
        """The agent CLI's name as its users know it."""
        return adapters.NAMES.get(self.adapter, f"the {self.adapter} agent")


def earliest(*times: float | None) -> float | None:
    """The earliest of the given times (None when none is given)."""
    return min((t for t in times if t is not None), default=None)


class Reaper:
    def __init__(self, ctx: Context, spawner: Spawner) -> None:
        self.ctx = ctx
        self.spawner = spawner
        #: (board, task, run) of the claims this pass found due for renewal (pass thread only)
        self._renewals: list[tuple[str, str, int]] = []
        #: the log-cutting state of the local runs whose worker is not our child, by run id
        #: (:func:`.spawn.run_log`); a run is looked at by one thread at a time (busy)
        self._log_cuts: dict[int, spawn.LogCut] = {}
        #: when this dispatcher first saw the report of a live worker held for its exit, by run id
        self._reported: dict[int, float] = {}

    # -- our workers whose run is no longer current ------------------------------------------------

    def check_orphans(self, current: set[int], now: float) -> tuple[list[FoundExit], float | None]:
        """Our workers whose run is no longer current: exited → their exit is to be recorded;
        still running → stopped (after a grace when the run reported). Returns the exits found
        and when to look again."""
        ctx, exits, due = self.ctx, [], None
        for w in ctx.workers.all():
            rid = w.run_id
            if rid in current or ctx.workers.busy(rid):
                continue
            if w.poll():
                ctx.workers.forget(rid)
                if ctx.workers.claim(rid):
                    exits.append(FoundExit(rid, w))
                continue
            first = ctx.workers.orphan_since(rid, now)
            run = kd.last_runs(ctx.db, [rid]).get(rid) or {}
            reported = run.get("outcome") in ("completed", "review_requested", "blocked") and \
                '"closed_by_hand"' not in str(run.get("metadata") or "")  # a person's close stops it at once
            if reported and now - first < REPORTED_GRACE:
                # it reported; give it time to exit, its log kept within the cap meanwhile
                due = earliest(due, first + REPORTED_GRACE, self._cap_orphan_log(w, now))
                continue
            ctx.jobs.submit(rid, self.stop_orphan, w)
        return exits, due

    def _cap_orphan_log(self, w: spawn.Worker, now: float) -> float | None:
        """Keep the log of a worker that goes on after its run closed within ``log_max_bytes``,
        as a running task's (:meth:`_cap_log`); when to look again: at its pace, and at least
        every :data:`.spawn.LOG_LOOK_EVERY` seconds of its grace (no pass may come meanwhile)."""
        cap = int(self.ctx.settings.log_max_bytes or 0)
        if not cap:
            return None
        try:
            before = os.stat(w.log_path).st_size
        except OSError:
            return None
        dropped = self._cut(w.board, w.task_id, w.run_id, w, cap)
        return earliest(spawn.next_log_look(w, before, before - dropped, now, cap), now + spawn.LOG_LOOK_EVERY)

    def record_exit(self, w: spawn.Worker) -> None:
        """A worker whose run closed before it exited (it reported, or its run was closed for
        it): keep its exit status and usage on the run — what its CLI measured replaces what its
        report said — count the run (its ``run closed`` line), and hand a task it sent to review
        to the reviewer."""
        out = adapters.read_output((w.profile or {}).get("adapter") or "command", w.log_path, w.log_offset)
        usage = _usage(out)
        if usage:  # what the CLI measured is the run's usage, all of it: the report's is not kept beside it
            usage = {k: usage.get(k) for k in _USAGE_KEYS}
        try:
            kr.update_run(self.ctx.db, w.run_id, exit_code=w.exit_code, add_usage=w.attempt > 0, **usage)
        except AgentboardError:
            pass
        self.note_denied(w.board, w.task_id, w.run_id, out)
        metrics.runs_closed(self.ctx.db, [w.run_id])
        self.review_entry(w)

    def note_denied(self, board: str, task_id: str, run_id: int, out: adapters.Outcome) -> None:
        """The tool calls the profile's permission mode refused, as a ``tools_denied`` event of
        the run (a person sees what the agent could not do, and may widen the permission)."""
        if not out.denied:
            return
        try:
            kr.record_telemetry(self.ctx.db, board, task_id, "tools_denied", {"tools": out.denied[:20]}, run_id=run_id)
        except AgentboardError as exc:
            log.info("run %s: could not record its denied tools: %s", run_id, exc)

    def review_entry(self, w: spawn.Worker) -> None:
        """A worker that finished to review through the CLI or REST (its task was no longer running
        when it exited): the review hand-off has not happened yet. ``on_review_entered`` is
        idempotent per review entry, so a hand-off already made (MCP) is not repeated."""
        try:
            if not kd.sent_to_review_by(self.ctx.db, w.board, w.task_id, w.run_id):
                return
            finish.review_entered(self.ctx.db, self.ctx.settings, w.board, w.task_id)
        except AgentboardError as exc:
            log.info("review hand-off of %s after run %s: %s", w.task_id, w.run_id, exc)

    def stop_orphan(self, w: spawn.Worker) -> None:
        """Stop a worker whose run is no longer current (a job): its log cut within the cap, its
        exit recorded (:meth:`record_exit`)."""
        if self.ctx.stop_worker(w.run_id, w.pid, grace=STOP_GRACE, proc=w.proc):
            self.ctx.workers.forget(w.run_id)
            w.poll()
            _say_unknown(w)
            self.cut_log_at_exit(w.run_id, w, None)
            self.record_exit(w)
        else:
            self.ctx.notes.note(("deferred", w.run_id), w.board, w.task_id, "reclaim_deferred",
                                {"pid": w.pid, "reason": "the worker of a closed run survived SIGKILL"},
                                run_id=w.run_id)

    def stop_later(self, w: spawn.Worker) -> None:
        """Stop a worker whose run is no longer current, on the job pool."""
        self.ctx.jobs.submit(w.run_id, self.stop_orphan, w)

    # -- an earlier dispatcher's workers on this host ----------------------------------------------

    def take_over_leftovers(self, others: set[str] | frozenset[str] = frozenset()) -> tuple[int, int]:
        """The workers an earlier dispatcher process on this host started and left alive (its
        worker file, :mod:`.guard`): those whose run is still current are adopted — workers of
        this dispatcher like its own (:func:`.takeover.adopt`: checked each pass, stopped once
        their run is no longer current, their exit recorded; guarded, kept in the file; their
        exit watched once the dispatcher starts) —; the others are stopped — their task may
        already run again elsewhere. The workers of ``others`` (the owner keys of dispatchers
        still running on the host and home) are theirs: left alone. Returns (adopted, stopped)."""
        ctx = self.ctx
        guard.prune_ended(guard.ended_file(guard.guard_pid_file(ctx.home, ctx.host)))
        listed = ctx.worker_file.read()
        alive = {rid: (pid, at) for rid, (pid, at, owner) in listed.items()
                 if owner not in others and ctx.workers.get(rid) is None
                 and liveness.pid_alive(pid, started_after=at)}
        runs = kd.last_runs(ctx.db, list(alive)) if alive else {}
        keep: dict[int, tuple[int, float]] = {}
        stopped = 0
        profiles: dict[str, Row] = {}
        for rid, (pid, at) in alive.items():
            run = runs.get(rid) or {}
            if run.get("status") == "open" and run.get("worker_host") == ctx.host and run.get("worker_pid") == pid:
                try:
                    full = kqueries.get_run(ctx.db, str(run["board"]), rid)
                except NotFound:
                    full = None
                if full is not None:
                    keep[rid] = (pid, at)
                    ctx.workers.add(takeover.adopt(ctx, dict(full), pid, at, profiles))
                    ctx.guard.hold(pid, ctx.cgroups.folder(rid))
                    continue
            stopped += 1
            log.warning("run %s: its worker (pid %s) outlived an earlier dispatcher on this host and its run is "
                        "no longer current; stopping it", rid, pid)
            ctx.jobs.submit(rid, self._stop_pid, str(run.get("board") or ""), str(run.get("task_id") or ""),
                            rid, pid, at)
        # a dispatcher started again keeps listing its own workers still running
        ours = {w.run_id: (w.pid, w.started) for w in ctx.workers.all() if not w.exited}
        if others:  # they append to the file meanwhile: appended to, not rewritten
            ctx.worker_file.adopted(keep, [rid for rid, e in listed.items()
                                           if e[2] not in others and rid not in keep and rid not in ours])
        else:
            ctx.worker_file.rewrite({**ours, **keep})
        self._end_stale_cgroups(set(keep))
        return len(keep), stopped

    def _end_stale_cgroups(self, kept: set[int]) -> None:
        """The cgroups of this host's runs that are over (their dispatcher and its guard were lost
        together): what is left in them is ended, and they are removed. A run still open here
        (adopted, or a one-shot pass's worker) keeps its cgroup."""
        ctx = self.ctx
        found = [rid for rid in ctx.cgroups.runs() if rid not in kept]
        if not found:
            return
        runs = kd.last_runs(ctx.db, found)
        for rid in found:
            run = runs.get(rid) or {}
            if run.get("status") == "open" and run.get("worker_host") == ctx.host:
                continue
            left = ctx.cgroups.end(rid, grace=STOP_GRACE)
            if left:
                log.warning("run %s is over: ended %d process(es) its worker left running (%s)", rid, len(left),
                            " ".join(map(str, left[:10])))

    # -- a previous run's worker ----------------------------------------------------------------------

    def previous_worker_alive(self, task: Row, last: Row) -> bool:
        """A local worker of an earlier run of ``task`` still alive: it is being stopped (in the
        background) and the task is spawned by a later pass once it is gone."""
        ctx, rid = self.ctx, int(last["id"])
        if ctx.workers.busy(rid):
            return True  # being stopped right now
        w = ctx.workers.get(rid)
        if w is None and not ctx.local(last):
            return False
        pid = w.pid if w is not None else last.get("worker_pid")
        if not pid:
            return False
        # the leader may be gone while others of its process group (its children) still run
        leader = (not w.poll()) if w is not None else liveness.pid_alive(pid, started_after=last.get("started_at"))
        if not leader and not liveness.group_has_live(pid):
            if w is not None:
                ctx.workers.forget(rid)
            return False
        if w is not None:
            ctx.jobs.submit(rid, self.stop_orphan, w)
        else:
            ctx.jobs.submit(rid, self._stop_pid, task["board"], task["id"], rid, int(pid), last.get("started_at"))
        return True

    def _stop_pid(self, board: str, task_id: str, run_id: int, pid: int, started: float | None) -> None:
        if self.ctx.stop_worker(run_id, pid, grace=STOP_GRACE, started_after=started):
            self.ctx.guard.release(pid)
        elif board:
            self.ctx.notes.note(
                ("deferred", run_id), board, task_id, "reclaim_deferred",
                {"pid": pid, "reason": "the previous run's worker survived SIGKILL; not starting a duplicate"},
                run_id=run_id)

    # -- running tasks ------------------------------------------------------------------------------

    def check_running(self, r: Row, now: float, *, polled: bool = False) -> Check:
        """Look at one running task (a row of ``PassSnapshot.running``); slow work goes to
        the job pool, an exit is returned (claimed) for :meth:`handle_exits`. ``polled``: the
        pass reaped every worker a moment ago (an exit since then wakes the next pass)."""
        ctx, rid = self.ctx, r["current_run_id"]
        if ctx.workers.busy(rid):
            return Check()
        started = float(r["run_started_at"] or now)
        by_hand = str(r.get("claim_lock") or "").startswith(kr.HAND_CLAIM)
        if by_hand or not ctx.local(r):
            return self._check_claim(r, now, by_hand)
        w = ctx.workers.get(rid)
        if w is not None:
            alive, due = not (w.exited if polled else w.poll()), None
        elif r["worker_pid"]:
            alive, due = liveness.pid_alive(r["worker_pid"], started_after=started), None
        else:
            # claimed but no pid recorded: a spawn in progress elsewhere, or a dispatcher that died
            grace = ctx.settings.spawn_grace
            alive = now - started < grace
            due = started + grace if alive else None
        if not alive:
            return Check(Seen.EXIT, due, FoundExit(rid, w, r) if ctx.workers.claim(rid) else None)
        limits = self._check_limits(r, w, now, started)
        return Check(limits.seen, earliest(due, limits.due))

    def _check_claim(self, r: Row, now: float, by_hand: bool) -> Check:
        """Another host's worker, or a run claimed by hand (no process of ours behind it): only
        its claim expiry says it is gone; its heartbeats extend the claim."""
        exp = r["claim_expires"]
        if exp is None or exp >= now:
            return Check(due=exp)
        gone = None if by_hand else takeover.host_gone(self.ctx, r.get("worker_host"), now)
        if gone is not None:  # its dispatcher's loss, not the task's failure
            self.fail(r, "stale", gone, count=False, payload={"dispatcher_gone": True})
            return Check(Seen.RECLAIMED)
        who = "its claimer" if by_hand else f"the worker on host {r['worker_host']!r}"
        self.fail(r, "reclaimed", f"claim expired: {who} stopped heartbeating"
                  + ("" if by_hand else " and its dispatcher did not renew the claim"))
        return Check(Seen.RECLAIMED)

    def _check_limits(self, r: Row, w: spawn.Worker | None, now: float, started: float) -> Check:
        """A live local worker: its repair deadline, max runtime, staleness, then its claim."""
        ctx, rid = self.ctx, r["current_run_id"]
        deadline = w.deadline if w is not None else None
        if w is not None and deadline is not None and now > deadline:
            ctx.jobs.submit(rid, self._stop_repair, r, w)
            return Check()
        held = self._held_report(r, w, now)
        if held is not None and held <= now:
            ctx.jobs.submit(rid, self._stop_reported, r, w)
            return Check()
        seen = self._waiting(w) if w is not None else None
        if w is not None and seen is not None and seen.network:
            ctx.jobs.submit(rid, self._stop_then_retry_offline, r, w)
            return Check()
        if w is not None and seen is not None and seen.rate_limit_until is not None:
            ctx.jobs.submit(rid, self._stop_rate_limited, r, w, seen.rate_limit_until, seen.said)
            return Check()
        log_due = self._cap_log(r, w, now)
        max_rt = r["max_runtime_seconds"]
        if max_rt and now - started > max_rt:
            ctx.jobs.submit(rid, self._stop_then_fail, r, w, "timed_out",
                            f"ran longer than its max runtime of {int(max_rt)}s; stopped", True)
            return Check(Seen.TIMEOUT, deadline)
        runtime_end = started + max_rt if max_rt else None
        last_hb = float(r["last_heartbeat_at"] or started)
        stale_after, quiet = float(ctx.settings.stale_timeout), float(ctx.settings.stale_heartbeat)
        if w is not None and now - last_hb >= min(TOOL_HEARTBEAT_MIN, quiet / 2) and self._made_progress(r, w):
            last_hb = now  # its tool calls since the last look are its heartbeat
        if now - started > stale_after and now - last_hb > quiet:
            ctx.jobs.submit(rid, self._stop_then_fail, r, w, "stale",
                            f"{HUNG} {_span(now - started)} with no heartbeat in the last "
                            f"{_span(quiet)}; stopped and returned to the queue", False)
            return Check(Seen.STALE, earliest(deadline, runtime_end))
        renew = self._renew_claim(r, now)
        return Check(renew.seen, earliest(deadline, runtime_end, max(started + stale_after, last_hb + quiet),
                                          renew.due, log_due, held))

    def _held_report(self, r: Row, w: spawn.Worker | None, now: float) -> float | None:
        """When the live worker of ``r`` is stopped because it goes on after a report held until
        its exit (its checks, its branch's integration, what it left uncommitted): what an
        orphan that reported gets, :data:`REPORTED_GRACE` after this dispatcher first saw the
        report. None without such a report."""
        rid = int(r["current_run_id"])
        if w is None or not r.get("reported"):
            self._reported.pop(rid, None)
            return None
        if len(self._reported) > 10_000:  # runs closed without a look at their exit here
            self._reported.clear()
        return self._reported.setdefault(rid, now) + REPORTED_GRACE

    def _stop_reported(self, r: Row, w: spawn.Worker) -> None:
        """A worker that went on :data:`REPORTED_GRACE` seconds after its held report: stopped,
        then its exit handled as any exit (the report applied)."""
        rid = int(r["current_run_id"])
        if not self.ctx.stop_worker(rid, w.pid, grace=STOP_GRACE, proc=w.proc,
                                    started_after=float(r["run_started_at"] or 0) or None):
            self.ctx.notes.note(("deferred", rid), r["board"], r["id"], "reclaim_deferred",
                                {"pid": w.pid, "reason": "the worker that reported survived SIGKILL"}, run_id=rid)
            return
        w.poll()
        self._reported.pop(rid, None)
        e = FoundExit(rid, w, r)
        self.end_group(e)
        self.cut_log_at_exit(rid, w, r)
        if w.collect is not None:  # a task repository's branch
            w.collect()
        self.handle_exit(r, w)

    def _cap_log(self, r: Row, w: spawn.Worker | None, now: float) -> float | None:
        """Keep a local worker's log within ``log_max_bytes`` (:func:`.spawn.cap_log`); a log
        growing towards it is looked at again soon (:func:`.spawn.next_log_look`)."""
        cap = int(self.ctx.settings.log_max_bytes or 0)
        run = self._run_log(r, w) if cap else None
        if run is None:
            return None
        try:
            before = os.stat(run.log_path).st_size
        except OSError:
            return None
        dropped = self._cut(str(r["board"]), str(r["id"]), int(r["current_run_id"]), run, cap)
        return spawn.next_log_look(run, before, before - dropped, now, cap)

    def _run_log(self, r: Row, w: spawn.Worker | None) -> spawn.RunLog | None:
        """The log-cutting state of the run of ``r``: its worker's, or (not our child) found in
        its log once."""
        if w is not None:
            return w
        rid, path = int(r["current_run_id"]), r.get("log_path")
        if not path:
            return None
        run = self._log_cuts.get(rid)
        if run is None:
            if len(self._log_cuts) > 10_000:  # runs closed without a look at their exit here
                self._log_cuts.clear()
            run = self._log_cuts[rid] = spawn.run_log(Path(path), rid, str(r["id"]),
                                                      int(self.ctx.settings.log_max_bytes or 0))
        return run

    def _cut(self, board: str, task_id: str, run_id: int, run: spawn.RunLog, cap: int) -> int:
        """Cut the run's log back within ``cap``; its first cut is a ``log_capped`` event."""
        dropped = spawn.cap_log(run, cap)
        if dropped and run.log_dropped == dropped:  # the first cut of this run: said once
            self.ctx.notes.note(("log_capped", run_id), board, task_id, "log_capped",
                                {"max_bytes": cap, "log": str(run.log_path)}, run_id=run_id)
        return dropped

    def cut_log_at_exit(self, run_id: int, w: spawn.Worker | None, r: Row | None) -> None:
        """The worker of ``run_id`` is gone (what it left running ended): its log is cut back
        within ``log_max_bytes`` once more, before its run is closed, so what it printed since
        the last look (a burst, or faster than the looks) is not left many times the cap."""
        cut = self._log_cuts.pop(run_id, None)
        cap = int(self.ctx.settings.log_max_bytes or 0)
        run: spawn.RunLog | None = w
        if run is None and r is not None and self.ctx.local(r) and r.get("log_path"):
            run = cut or spawn.run_log(Path(r["log_path"]), run_id, str(r["id"]), cap)
        if run is None or not cap:
            return
        board = w.board if w is not None else str((r or {}).get("board") or "")
        task_id = w.task_id if w is not None else str((r or {}).get("id") or "")
        try:
            self._cut(board, task_id, run_id, run, cap)
        except OSError as exc:
            log.info("run %s: could not cut its log back within log_max_bytes: %s", run_id, exc)

    def _made_progress(self, r: Row, w: spawn.Worker) -> bool:
        """An agent CLI worker whose log shows tool calls since the last look: recorded as a
        heartbeat (so a working agent that never calls the heartbeat verb is not stale)."""
        adapter = str((w.profile or {}).get("adapter") or "command")
        if adapter not in adapters.CLI_ADAPTERS:
            return False
        calls, w.scanned = adapters.progress(adapter, w.log_path, max(w.scanned, w.log_offset))
        if not calls:
            return False
        try:
            kr.heartbeat(self.ctx.db, r["board"], r["id"], run_id=r["current_run_id"],
                         note=f"{calls} tool call{'s' if calls != 1 else ''} (from the agent's output)",
                         actor=str(w.profile.get("name") or adapter))
        except AgentboardError as exc:
            log.info("heartbeat of run %s from its tool calls: %s", r["current_run_id"], exc)
            return False
        return True

    def _renew_claim(self, r: Row, now: float) -> Check:
        """A live local worker keeps its claim (renewed well before expiry, so other hosts never
        mistake it for a dead one); being quiet is handled by the stale rule. The renewals a
        pass finds due go out together (:meth:`flush_renewals`); the next look comes with a
        little jitter, so a host's renewals gather into few passes."""
        ttl = float(self.ctx.settings.claim_ttl)
        exp = r["claim_expires"]
        if exp is not None and exp - now >= ttl / 2:
            return Check(due=exp - ttl / 2 + random.uniform(0.0, ttl / 20))
        self._renewals.append((str(r["board"]), str(r["id"]), int(r["current_run_id"])))
        return Check(None, now + ttl / 2)

    def flush_renewals(self) -> int:
        """Renew the claims this pass found due, in one statement (``kernel.dispatching
        .extend_claims``: it wakes no other host). Returns how many were renewed."""
        items, self._renewals = self._renewals, []
        if not items:
            return 0
        try:
            return len(kd.extend_claims(self.ctx.db, items))
        except AgentboardError as exc:
            log.info("renewing %d claims: %s", len(items), exc)
            return 0

    def fail(self, r: Row, outcome: str, error: str, *, exit_code: int | None = None,
             count: bool | None = None, cooldown: float | None = None,
             payload: dict[str, Any] | None = None) -> Row | None:
        """Close the run of ``r`` as failed (``kernel.runs.fail``); None when it was no longer
        current or the kernel refused."""
        try:
            return kr.fail(self.ctx.db, r["board"], r["id"], outcome, run_id=r["current_run_id"], error=error,
                           exit_code=exit_code, count_failure=count, cooldown_seconds=cooldown, payload=payload)
        except StaleRun:
            return None
        except AgentboardError as exc:
            log.info("could not record %s for %s: %s", outcome, r["id"], exc)
            return None

    def _stop_then_fail(self, r: Row, w: spawn.Worker | None, outcome: str, error: str, count: bool) -> None:
        pid = w.pid if w is not None else r["worker_pid"]
        ok = True
        if pid:
            ok = self.ctx.stop_worker(int(r["current_run_id"]), pid, grace=STOP_GRACE, proc=w.proc if w else None,
                                      started_after=float(r["run_started_at"] or 0) or None)
        if not ok:
            self.ctx.notes.note(
                ("deferred", r["current_run_id"]), r["board"], r["id"], "reclaim_deferred",
                {"pid": pid, "reason": f"{outcome}: the worker survived SIGKILL; not starting a duplicate"},
                run_id=r["current_run_id"])
            return
        self.cut_log_at_exit(int(r["current_run_id"]), w, r)
        if w is not None:
            w.poll()
            self.ctx.workers.forget(w.run_id)
            stopped_usage(self.ctx.db, w)
        closed = self.fail(r, outcome, error, exit_code=w.exit_code if w else None, count=count)
        metrics.runs_closed(self.ctx.db, [r["current_run_id"]])
        if outcome == "stale" and closed is not None:
            self._hung_too_often(r)

    def _hung_too_often(self, r: Row) -> None:
        """A task whose worker hung (``stale``: not counted as a failure) :data:`STALE_LIMIT`
        times in a row is blocked ``gave_up`` rather than started again without end."""
        from ..kernel import queries

        last = [x for x in queries.runs(self.ctx.db, r["board"], r["id"]) if not x.get("synthetic")][-STALE_LIMIT:]
        if len(last) < STALE_LIMIT or any(x.get("outcome") != "stale" or not str(x.get("error") or "").startswith(
                HUNG) for x in last):
            return
        try:
            ktasks.block(self.ctx.db, r["board"], r["id"],
                         f"gave up: its worker hung {STALE_LIMIT} times in a row (each {last[-1].get('error')}); "
                         f"read its log (`agentboard log {r['id']}`), then unblock the task", kind="gave_up",
                         actor="dispatcher")
        except AgentboardError as exc:  # claimed again meanwhile, or moved by a person: theirs
            log.info("could not block %s after %d hung runs: %s", r["id"], STALE_LIMIT, exc)

    def _waiting(self, w: spawn.Worker) -> adapters.Waiting | None:
        """What an agent CLI worker's new output shows it waiting for (a network it cannot
        reach, a rate limit's reset); None for other workers."""
        adapter = str((w.profile or {}).get("adapter") or "command")
        if adapter not in adapters.CLI_ADAPTERS:
            return None
        seen, w.offline_scanned = adapters.waiting(adapter, w.log_path, max(w.offline_scanned, w.log_offset))
        return seen

    def _stop_rate_limited(self, r: Row, w: spawn.Worker, until: float, said: str) -> None:
        """A worker sitting out a rate limit (opencode sleeps until the reset, holding its slot
        and showing its task running): stopped, its task blocked ``rate_limited`` until then,
        as for a CLI that exits on a 429."""
        if not self.ctx.stop_worker(w.run_id, w.pid, grace=STOP_GRACE, proc=w.proc,
                                    started_after=float(r["run_started_at"] or 0) or None):
            return
        w.poll()
        self.ctx.workers.forget(w.run_id)
        stopped_usage(self.ctx.db, w)
        adapter = str((w.profile or {}).get("adapter") or "command")
        cli = adapters.NAMES.get(adapter, f"the {adapter} agent")
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(until))
        self._block(r, "rate_limited", f"{cli} hit a rate limit or quota and was waiting for its reset "
                    f"({said}); stopped, the dispatcher resumes the task at {when} (the reset time it gave)",
                    until=until)

    def _stop_then_retry_offline(self, r: Row, w: spawn.Worker) -> None:
        """A worker waiting for its network (Codex waits without end): stopped, then retried with
        back-off like a run that exited offline."""
        if not self.ctx.stop_worker(w.run_id, w.pid, grace=STOP_GRACE, proc=w.proc,
                                    started_after=float(r["run_started_at"] or 0) or None):
            return
        w.poll()
        self.ctx.workers.forget(w.run_id)
        adapter = str((w.profile or {}).get("adapter") or "command")
        cli = adapters.NAMES.get(adapter, f"the {adapter} agent")
        tail = spawn.log_tail(w.log_path, w.log_offset)
        self._network_retry(r, cli, ": it was waiting for its network; stopped",
                            f"; last output: {tail}" if tail else "", w.exit_code)

    def _network_retry(self, r: Row, cli: str, said: str, detail: str, exit_code: int | None) -> None:
        """A run that could not reach its service: crashed, retried after a doubling back-off,
        counted against the failure limit only after ``network_retry_limit`` in a row."""
        s = self.ctx.settings
        n = kd.network_failures(self.ctx.db, r["id"]) + 1
        delay = min(float(s.network_retry_max), float(s.network_retry_base) * 2 ** (n - 1))
        self.fail(r, "crashed", f"{kd.NETWORK_ERROR} {n} in a row: {cli} could not reach its service{said}; "
                  f"retrying in {int(delay)}s{detail}", exit_code=exit_code, cooldown=delay,
                  count=n > int(s.network_retry_limit))

    def _stop_repair(self, r: Row, w: spawn.Worker) -> None:
        """A repair attempt past its deadline: stop it, then judge what it left behind."""
        self.ctx.stop_worker(w.run_id, w.pid, grace=STOP_GRACE, proc=w.proc)
        w.poll()
        self.handle_exit(r, w)

    # -- exits --------------------------------------------------------------------------------------

    def handle_exits(self, exits: list[FoundExit]) -> None:
        """Hand the exits found in this pass to the job pool. A job handles its exits one after
        the other, so exits do not compete with each other for the database's write lock; a slow
        one (a verification run) delays only the few in its own job."""
        if not exits:
            return
        size = max(EXIT_BATCH_MIN, -(-len(exits) // EXIT_JOBS))
        for i in range(0, len(exits), size):
            self.ctx.jobs.submit_claimed(functools.partial(self._exit_job, exits[i:i + size]))

    def _exit_job(self, chunk: list[FoundExit]) -> None:
        jobs = self.ctx.jobs
        for e in chunk:  # before anything of the exit is read: nothing the worker left keeps running
            _say_unknown(e.worker)
            self.end_group(e)
            self.cut_log_at_exit(e.run_id, e.worker, e.row)
            if e.worker is not None and e.worker.collect is not None:  # a task repository's branch
                e.worker.collect()
        try:
            done = self._plain_exits([e for e in chunk if e.row is not None])
        except Exception:
            log.exception("completing several exits at once failed; handling them one by one")
            done = set()
        for e in chunk:
            if e.run_id in done:
                jobs.release(e.run_id)
            elif e.row is not None:
                jobs.run(e.run_id, self.handle_exit, e.row, e.worker)
            elif e.worker is not None:
                jobs.run(e.run_id, self.record_exit, e.worker)
            else:  # pragma: no cover - an orphan exit always has its worker
                jobs.release(e.run_id)

    def end_group(self, e: FoundExit) -> None:
        """End the process group of the exited worker of ``e`` (background children it left):
        SIGTERM, then SIGKILL after a short grace."""
        pid = e.worker.pid if e.worker is not None else (e.row or {}).get("worker_pid")
        if pid and not liveness.end_group(int(pid), grace=EXIT_GROUP_GRACE):
            log.warning("run %s: a process the worker left behind survived SIGKILL (group %s)", e.run_id, pid)
        # what left its process group (setsid, job control) is still in the run's cgroup
        left = self.ctx.cgroups.end(e.run_id, grace=EXIT_GROUP_GRACE)
        if left:
            log.warning("run %s: ended %d process(es) the worker left running outside its process group: %s",
                        e.run_id, len(left), " ".join(map(str, left[:10])))
            w = e.worker
            board = w.board if w is not None else (e.row or {}).get("board")
            task_id = w.task_id if w is not None else (e.row or {}).get("id")
            if board:  # on the task's timeline: its agent leaves daemons behind
                self.ctx.notes.note(("leftovers", e.run_id), str(board), task_id, "leftovers_ended",
                                    {"processes": len(left), "reason": "still running in the run's cgroup "
                                     "after its worker exited (started outside its process group)"},
                                    run_id=e.run_id)

    def _plain_exits(self, exits: list[FoundExit]) -> set[int]:
        """Exits of first attempts whose whole effect is a completion
        (``lifecycle.plan_plain_completions``): one read and one write per board for all of
        them (a lone exit too: its run is observed from the plan, not read back). Returns the
        run ids handled."""
        if not exits:
            return set()
        candidates: dict[int, tuple[Row, spawn.Worker]] = {}
        for e in exits:
            w = e.worker
            if e.row is None or w is None or w.attempt or not w.exited:
                continue
            if ((w.profile or {}).get("adapter") or "command") != "command":
                continue  # usage comes from the agent's output: the one-by-one path reads it
            candidates[e.run_id] = (e.row, w)
        if not candidates:
            return set()
        db = self.ctx.db
        plans = lifecycle.plan_plain_completions(
            db, self.ctx.settings,
            [(r["board"], r["id"], rid, w.workspace, w.exit_code) for rid, (r, w) in candidates.items()])
        by_board: dict[str, list[dict[str, Any]]] = {}
        for rid, pc in plans.items():
            by_board.setdefault(pc.board, []).append(
                {"task_id": pc.task_id, "run_id": rid, "summary": pc.summary, "metadata": pc.metadata,
                 "usage": pc.usage, "actor": pc.actor, "exit_code": pc.exit_code})
        done: set[int] = set()
        for slug, items in by_board.items():
            results = kd.complete_runs(db, slug, items)
            with logs.batch():
                for rid, state in results.items():
                    if state in ("completed", "stale"):  # stale: someone else closed the run meanwhile
                        done.add(rid)
                        self.ctx.workers.forget(rid)
                        r, w = candidates[rid]
                        if state == "completed":
                            prof = w.profile or {}
                            metrics.run_closed(rid, slug, w.task_id, prof.get("name"), "completed",
                                               time.time() - w.started, r.get("model") or prof.get("model"),
                                               plans[rid].usage, db=db)
        metrics.runs_closed(db, done)  # (the stale ones: read back)
        return done

    def handle_exit(self, r: Row, w: spawn.Worker | None) -> None:
        """The worker of the running task ``r`` is gone: apply what it left behind."""
        with self.ctx.workers.exiting(r["current_run_id"]), logs.context(board=r["board"], task=r["id"],
                                                                          run=r["current_run_id"]):
            self._handle_exit(r, w)
        metrics.runs_closed(self.ctx.db, [r["current_run_id"]])

    def _handle_exit(self, r: Row, w: spawn.Worker | None) -> None:
        rid, board, task_id = r["current_run_id"], r["board"], r["id"]
        facts = self._exit_facts(r, w)
        self.ctx.workers.forget(rid)
        out = adapters.read_output(facts.adapter, facts.log_file, facts.offset)
        usage = _usage(out)
        if usage:  # after_exit records the exit code itself
            try:
                kr.update_run(self.ctx.db, rid, exit_code=facts.exit_code, add_usage=facts.attempt > 0, **usage)
            except AgentboardError:
                pass
        self.note_denied(board, task_id, rid, out)
        decision = lifecycle.after_exit(
            self.ctx.db, self.ctx.settings, board, task_id, rid, facts.workspace, facts.exit_code, facts.log_file,
            facts.attempt, verifying=functools.partial(self.spawner.verifying, board, task_id, int(rid), facts.profile,
                                                       facts.workspace),
            complete=finish.complete_verified, apply_verdict=finish.review)
        if decision.action == "handled":
            return
        if decision.action == "repair" and decision.prompt_file is not None:
            number = facts.attempt + 1
            try:
                self.spawner.respawn(r, facts.profile, facts.workspace, Path(decision.prompt_file), number,
                                     decision.deadline_seconds)
            except SpawnError as exc:
                self.fail(r, "crashed", f"could not start repair attempt {number}: {exc.cause}")
            return
        self._classify(r, facts, out)

    def _exit_facts(self, r: Row, w: spawn.Worker | None) -> ExitFacts:
        if w is not None:
            return ExitFacts(w.exit_code, w.pid, w.log_path, w.log_offset, w.profile or {}, w.workspace, w.attempt)
        # not our child: the status its wrapper wrote, if it got that far
        rid = int(r["current_run_id"])
        exit_code = spawn.read_exit(spawn.exit_path(self.ctx.home, r["board"], r["id"], rid))
        try:
            profile = kprofiles.get(self.ctx.db, r["profile"] or r["assignee"] or "")
        except NotFound:
            profile = {}
        return ExitFacts(exit_code, r["worker_pid"], Path(r["log_path"]) if r["log_path"] else None, 0, profile,
                         Path(r["run_workspace"] or r["workspace_path"] or "."), 0)

    def _nudged(self, r: Row, facts: ExitFacts) -> bool:
        """Start the worker once more with a reminder (protocol.inbox.nudge); True if started,
        or if its run closed instead because a budget covering it is spent (the reminder would
        be a new paid session: ``lifecycle.budget_spent``, what the run spent so far counted)."""
        if not self.ctx.settings.stop_nudge:
            return False
        spent = lifecycle.budget_spent(self.ctx.db, r["board"], r["id"], int(r["current_run_id"]))
        if spent is not None:
            self._stop_for_budget(r, f"{spent}; its worker stopped without reporting and was not started again "
                                  "to be reminded")
            return True
        prompt = boardinbox.nudge(self.ctx.db, self.ctx.settings, r["board"], r["id"], int(r["current_run_id"]),
                                  facts.workspace, facts.exit_code)
        if prompt is None:
            return False
        deadline = float(r.get("max_runtime_seconds") or self.ctx.settings.stale_timeout)
        try:
            self.spawner.respawn(r, facts.profile, facts.workspace, prompt, facts.attempt + 1, deadline)
        except SpawnError as exc:
            log.info("could not nudge the worker of %s: %s", r["id"], exc.cause)
            return False
        return True

    def _classify(self, r: Row, facts: ExitFacts, out: adapters.Outcome) -> None:
        """An exit nothing reported: a missing login (the task waits for a person), a rate limit
        (blocked until it resets), a lost network (retried with back-off), a protocol violation
        (exit 0) or a crash; the first exit 0 of a run without a report nudges the worker once
        instead."""
        exit_code = facts.exit_code
        # not its own end: the guard of its dispatcher ended it when that dispatcher died (or
        # stopped, not taken over) — the dispatcher's loss, back to the queue, not counted
        gone = takeover.dispatcher_gone(self.ctx, facts.pid, r.get("run_started_at")) if exit_code is None else None
        if gone is not None:
            self.fail(r, "stale", gone, count=False, payload={"dispatcher_gone": True})
            return
        tail = spawn.log_tail(facts.log_file, facts.offset)
        detail = f"; last output: {tail}" if tail else ""
        if facts.adapter in adapters.CLI_ADAPTERS and out.final_text and not out.is_error:
            # an agent CLI's log is its event stream: its last message says more than its last bytes
            detail = f"; its last message: {' '.join(out.final_text.split())[:300]}"
        if out.denied:
            detail = f"; its permission mode refused {', '.join(out.denied[:5])}" + detail
        said = f": {out.error}" if out.error else ""
        if out.failure == "auth":
            # what to do first: a block reason is one line of 300 characters, and what the CLI
            # said (a status, a URL) can take them all
            self._block(r, "needs_input", f"{facts.cli} could not sign in. "
                        f"{agent_config.login_fix(facts.adapter, facts.profile)}, then unblock the task"
                        + (f" (it said: {out.error})" if out.error else ""))
            return
        # its budget is spent (its heartbeat said stop, and an agent that obeys ends its turn):
        # the run closes as the budget's, never reminded to go on
        spent = self.ctx.db.read(lambda tx: kb.stop_reason_in(tx, r["id"]))
        if spent is not None:
            self._stop_for_budget(r, spent)
            return
        if out.rate_limited or exit_code == EXIT_RATE_LIMITED:
            self._rate_limited(r, facts.cli, said, exit_code, out.retry_at)
            return
        if out.failure == "network":
            self._network_retry(r, facts.cli, said, detail, exit_code)
            return
        if exit_code == 0 and out.no_result:
            self.fail(r, "crashed", f"the {facts.adapter} agent exited 0 without its final result event: it "
                      "stopped before doing any work" + detail, exit_code=0)
            return
        if exit_code == 0 and out.is_error:  # it said it failed (Gemini CLI exits 0 after a cut stream)
            self.fail(r, "crashed", f"{facts.cli} ended its turn with an error{said or ' (no message)'}" + detail,
                      exit_code=0)
            return
        # a worker that stopped by itself (exit 0) and said nothing is reminded once
        if exit_code == 0 and self._nudged(r, facts):
            return
        if exit_code == 0:
            self.fail(r, "protocol_violation",
                      "the worker exited 0 without reporting: no kanban_complete/kanban_block call, no "
                      "`agentboard complete`/`block`, no valid .board/result.json" + detail, exit_code=0)
            return
        self.fail(r, "crashed", _crash_error(exit_code, facts.pid) + (f" ({facts.cli}{said})" if said else "") + detail,
                  exit_code=exit_code)

    def _rate_limited(self, r: Row, cli: str, said: str, exit_code: int | None, reset: float | None) -> None:
        """Block ``r`` ``rate_limited`` until the reset its CLI gave, else ``rate_limit_cooldown``;
        doubled for each rate limit in a row before it (a reset given too, from the second)."""
        before = kr.rate_limits_in_a_row(self.ctx.db, r["id"])
        base = float(self.ctx.settings.rate_limit_cooldown)
        now = time.time()
        if reset is None:
            until, source = now + kr.rate_limit_backoff(base, before), "the rate_limit_cooldown setting"
        else:
            until = max(reset, now + kr.rate_limit_backoff(base, before - 1)) if before else reset
            source = "the reset time it gave" if until == reset else "rate_limit_cooldown"
        if before:
            source += f", doubled for each of the {before} rate limit(s) in a row before this one"
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(until))
        self._block(r, "rate_limited", f"{cli} hit a rate limit or quota{said} (exit {exit_code}); the "
                    f"dispatcher resumes the task at {when} ({source})", until=until)

    def _stop_for_budget(self, r: Row, reason: str) -> None:
        """Close the run of ``r`` as its spent budget's (blocked ``budget``, ``reason`` said)."""
        try:
            kb.stop_run(self.ctx.db, r["board"], r["id"], int(r["current_run_id"]), reason)
        except AgentboardError as exc:
            log.info("could not close run %s of %s for its budget: %s", r["current_run_id"], r["id"], exc)

    def _block(self, r: Row, kind: str, reason: str, until: float | None = None) -> None:
        """Block the running task ``r`` (its run closed), unless the run is no longer current."""
        try:
            ktasks.block(self.ctx.db, r["board"], r["id"], reason[:4000], kind=kind, run_id=r["current_run_id"],
                         actor="dispatcher", until=until)
        except StaleRun:
            return
        except AgentboardError as exc:
            log.info("could not block %s (%s): %s", r["id"], kind, exc)


def _say_unknown(w: spawn.Worker | None) -> None:
    """Log that the exit status of a worker taken over is unknown (its run keeps none)."""
    if w is not None and w.adopted and w.exited and w.exit_code is None:
        log.info("run %s: its worker (pid %s, taken over from an earlier dispatcher) is gone; %s", w.run_id, w.pid,
                 spawn.UNKNOWN_EXIT)


def _crash_error(exit_code: int | None, pid: int | None) -> str:
    if exit_code is None:
        return (f"worker process {pid} is gone ({spawn.UNKNOWN_EXIT})" if pid else
                "the dispatcher stopped between claiming the task and starting its worker")
    if exit_code < 0 or 128 < exit_code < 128 + 65:
        num = -exit_code if exit_code < 0 else exit_code - 128
        try:
            name = signal.Signals(num).name
        except ValueError:
            name = f"signal {num}"
        return f"worker killed by {name}"
    return f"worker exited with status {exit_code}"


def stopped_usage(db: Any, w: spawn.Worker) -> None:
    """What a worker the dispatcher stopped (a timeout, a spent budget) had spent by then, as its
    output reported it (an agent CLI's finished turns and steps), put on its run: a run stopped
    for running away counts what it spent."""
    adapter = str((w.profile or {}).get("adapter") or "command")
    if adapter not in adapters.CLI_ADAPTERS:
        return
    usage = _usage(adapters.read_output(adapter, w.log_path, w.log_offset))
    if usage:
        try:
            kr.update_run(db, w.run_id, add_usage=w.attempt > 0, **usage)
        except AgentboardError as exc:
            log.info("usage of stopped run %s: %s", w.run_id, exc)


_USAGE_KEYS = ("input_tokens", "output_tokens", "cost_usd")


def _usage(out: adapters.Outcome) -> dict[str, Any]:
    """The token counts and cost an agent's output reported (only those it did)."""
    return {k: v for k, v in (("input_tokens", out.input_tokens), ("output_tokens", out.output_tokens),
                              ("cost_usd", out.cost_usd)) if v is not None}


def _span(seconds: float) -> str:
    """``seconds`` as a stale run's message says it: whole minutes, or seconds under two minutes."""
    return f"{int(seconds)} s" if seconds < 120 else f"{int(seconds // 60)} min"
