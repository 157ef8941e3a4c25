"""The dispatcher: the public object, and the wake loop that runs its passes.

``Dispatcher(db, settings).run_pass()`` is one pass (``agentboard dispatch``);
``start()``/``stop()`` run the loop in a background thread (``agentboard dispatcher`` and
``agentboard serve``); ``wake()`` asks for a pass now.

The parts, each its own module: :mod:`.planning` (what a pass reads, the caps, which tasks to
start), :mod:`.spawning` (claim, prepare, start and record workers — the one path that starts
any worker), :mod:`.reaping` (exits, crashes, timeouts, stale runs, expired claims) and
:mod:`.runtime` (what the pass thread and the pool threads share, behind locks). Here: the loop
thread, waking it (:mod:`.wake`), and starting and stopping it all.

**Idle wake-ups are skipped.** Every commit of every host wakes every dispatcher; most cannot
give it anything to do (another host claimed or started a task, a worker reported progress). A
wake-up that only saw a change (not one asked for: a worker of ours exiting, "dispatch now", a
deadline, the interval) first takes one small read (``kernel.dispatching.glance``) and skips
the pass when no claim has lapsed, this host's running tasks are the same ones with the same
comments as when its last pass began, no task in review or triage and no race under way changed,
and it has no free slot or no ready task is waiting. What the glance cannot see (a supervisor
wake, a schedule, a board's settings) gets its pass all the same, at most :data:`SKIP_AT_MOST`
after the first change skipped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import tracing
from ..config import Settings
from ..domain.errors import AgentboardError, Unavailable
from ..kernel import dispatching as kd
from ..kernel import insights, maintenance
from ..observe import metrics
from ..observe.health import PassMarks
from ..observe.outage import Outage, one_line
from ..store.engine import Database
from . import host_id as host_id_
from .guard import Dispatchers, guard_pid_file, take_over
from .planning import Planner
from .reaping import Reaper
from .report import PassReport
from .runtime import Context, WorkerRegistry
from .spawning import Spawner
from .wake import Waker

log = logging.getLogger("agentboard.dispatch")

#: after a pass that failed, the loop tries again this many seconds later (while the database
#: cannot be reached, after the pauses of :class:`~agentboard.observe.outage.Outage`)
RETRY_AFTER_FAILURE = 1.0
#: seconds until a SQLite board another dispatcher of the home holds is tried again (its holder
#: may die without a commit that would wake this one)
LOCKED_OUT_RETRY = 5.0
#: the shortest time between the starts of two passes: the commits of every host wake every
#: dispatcher, and under a busy board they arrive faster than passes are worth running (many
#: dispatchers would each run a pass per commit); woken sooner, a pass waits the rest of it
PASS_MIN_GAP = 0.02
#: a change whose pass was skipped is followed by a pass within this many seconds anyway: the
#: glance sees ready work, lapsed claims, this host's running tasks, review, triage and races,
#: not everything a pass acts on (supervisor wakes, schedules, goals, board settings)
SKIP_AT_MOST = 0.5
#: how often a running dispatcher folds the boards' task count deltas that piled up on PostgreSQL
#: (``kernel.maintenance.fold_task_counts``) and the closed runs pending for the insight rollups
#: (``kernel.insights.fold``); the board view and the insights read fold them too, but a board
#: nobody looks at would grow them
FOLD_COUNTS_EVERY = 60.0
#: how often a dispatcher on PostgreSQL looks whether the board's tables changed enough since
#: their planner statistics were taken, and analyzes them then (``kernel.maintenance.
#: refresh_statistics``; on a thread of its own, so no pass waits for it)
STATISTICS_EVERY = 1.0


class Dispatcher:
    def __init__(
        self,
        db: Database,
        settings: Settings,
        *,
        api_url: str | None = None,
        token_factory: Callable[[str, str, int], str] | None = None,
        boards: list[str] | None = None,
        host_id: str | None = None,
        one_shot: bool = False,
    ) -> None:
        self.db = db
        self.settings = settings
        tracing.setup(settings)
        self._waker: Waker | None = None
        self.ctx = Context(db, settings, host_id or settings.host_id, one_shot=one_shot, api_url=api_url,
                           token_factory=token_factory, wake=self.wake)
        self.spawner = Spawner(self.ctx)
        self.reaper = Reaper(self.ctx, self.spawner)
        self.planner = Planner(self.ctx, self.reaper, self.spawner, boards)
        self._pass_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: when the last pass said something will next need a pass (0: nothing known); written
        #: under the pass lock, read by the loop thread after its own pass
        self._next_due = 0.0
        self.passes = 0
        #: wake-ups whose pass was skipped (nothing this host could act on)
        self.skipped = 0
        self._fold_due = time.monotonic() + FOLD_COUNTS_EVERY
        #: passes the database's absence failed in a row
        self._outage = Outage(log, "dispatcher pass")
        self._statistics_due = 0.0
        self._statistics: threading.Thread | None = None
        #: when the last pass (not a dry run) finished (``/readyz``), and its mark on the database
        self.last_pass_at = 0.0
        #: this dispatcher's identity on the host's pass mark: a host id another live dispatcher
        #: holds is refused at the start and reported after it (:mod:`.host_id`)
        self._me = host_id_.identity(self.ctx.home, self.ctx.owner)
        self._marks = PassMarks(db, self.ctx.host, boards, by=self._me,
                                held=lambda other, at: host_id_.holds(other, at, self._me), on_held=self._host_held)
        self._claimed = False
        self._held_said = 0.0

    @property
    def host(self) -> str:
        return self.ctx.host

    @property
    def workers(self) -> WorkerRegistry:
        """The workers this dispatcher started and is watching."""
        return self.ctx.workers

    @property
    def on_spawn(self) -> Callable[[str, str, int, int, float], None] | None:
        """Optional hook called as ``on_spawn(board, task_id, run_id, pid, at)`` right after a
        task's worker starts."""
        return self.spawner.on_spawn

    @on_spawn.setter
    def on_spawn(self, hook: Callable[[str, str, int, int, float], None] | None) -> None:
        self.spawner.on_spawn = hook

    # -- public API ----------------------------------------------------------------------------

    def claim_host(self) -> None:
        """Sign the host's pass mark before the first pass; :class:`.host_id.HostIdInUse` when
        another live dispatcher holds this host id (nothing taken over, stopped or started)."""
        if self._claimed:
            return
        other = self._marks.mark(time.time())
        if other is not None:
            raise host_id_.HostIdInUse(host_id_.describe(self.host, other["by"], other["at"]))
        self._claimed = True

    def _host_held(self, other: dict[str, Any]) -> None:
        now = time.monotonic()
        if now - self._held_said >= 60.0:
            self._held_said = now
            log.error("%s", host_id_.describe(self.host, other["by"], other["at"]))

    def run_pass_report(self, max_spawn: int | None = None, dry_run: bool = False) -> PassReport:
        """One pass now. Returns what it did (spawned, handled exits, reclaimed, skipped…)."""
        if not dry_run:
            self.claim_host()
        with self._pass_lock:
            persistent = self._thread is not None
            try:
                self.passes += 1
                self._next_due = 0.0
                started = time.perf_counter()
                with tracing.span("dispatcher.pass", **{"agentboard.host": self.host}) as span:
                    report, due = self.planner.run(max_spawn, dry_run)
                    if span is not None:
                        span.set_attribute("agentboard.spawned", len(report.spawned))
                if report.skipped_reason and self.ctx.sqlite:  # another dispatcher holds boards: their lock is
                    due = min(due or float("inf"), time.time() + LOCKED_OUT_RETRY)  # tried again soon
                self._next_due = due or 0.0
                if not dry_run:
                    self.last_pass_at = time.time()
                    metrics.pass_done(self.host, started)
                    self._marks.passed(self.last_pass_at)
                return report
            finally:
                if not persistent:
                    self.planner.locks.release()

    def run_pass(self, max_spawn: int | None = None, dry_run: bool = False) -> dict[str, Any]:
        """One pass now; its report as JSON-ready data (see :meth:`PassReport.to_dict`)."""
        return self.run_pass_report(max_spawn, dry_run).to_dict()

    def start(self) -> None:
        """Run the dispatcher loop in a background thread (returns at once)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self.claim_host()
        self._marks.keep()  # marks that it lives every 15 s between passes, holding its host id
        if not self.ctx.one_shot:
            self._take_over()
        self._waker = Waker(self.db)
        self._waker.start()
        for w in self.ctx.workers.all():  # started again: the workers it still has wake it when they exit
            if not w.exited:
                self.ctx.exits.watch(w.proc)
        self._thread = threading.Thread(target=self._loop, args=(self._waker,), name="agentboard-dispatcher",
                                        daemon=True)
        self._thread.start()

    def _take_over(self) -> None:
        """The guards and workers of this host's dispatchers that are gone or stopped (never of
        one still running on the host and home), then our guard (:mod:`.guard`): one start on
        the host at a time."""
        ctx = self.ctx
        reg = Dispatchers(ctx.home, self.host)
        with reg.locked():
            live = take_over(reg, ctx.owner)
            if live:
                pids = ", ".join(sorted(o.split(":", 1)[0] for o in live))
                log.info("another dispatcher runs on this host and home (pid %s): its guard and its workers are "
                         "left alone", pids)
            try:
                adopted, stopped = self.reaper.take_over_leftovers(live)
                if adopted or stopped:
                    log.info("took over %d worker(s) of an earlier dispatcher on this host, stopped %d whose "
                             "run was no longer current", adopted, stopped)
            except Exception:
                log.exception("reading the workers an earlier dispatcher on this host left failed")
            ctx.guard.start(guard_pid_file(ctx.home, self.host))
            if ctx.guard.pid is not None:
                reg.register(ctx.guard.pid, ctx.owner)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the loop; workers keep running and a dispatcher started on this host within
        half the claim TTL takes them over (past that the guard stops them, :mod:`.guard`)."""
        self._stop.set()
        self._marks.stop()
        if self._waker is not None:
            self._waker.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._waker is not None:
            self._waker.stop()
            self._waker = None
        self.ctx.jobs.drain()
        self.spawner.drain()
        self.planner.auto.drain()
        self.planner.supervising.drain()
        # after the pools (a job may still start a review's worker): a start watches those again
        self.ctx.exits.close()
        with self._pass_lock:  # the board locks belong to whoever runs a pass
            self.planner.locks.release()
        self.ctx.guard.detach(float(self.settings.claim_ttl) / 2)
        if not self.ctx.one_shot:  # its workers are now for the next dispatcher on the host to take
            Dispatchers(self.ctx.home, self.host).release(self.ctx.owner)
        self.ctx.cgroups.close()  # its folder, when no worker is left in it

    def wake(self) -> None:
        """Ask for a pass now (e.g. the dashboard's "dispatch now")."""
        waker = self._waker
        if waker is not None:
            waker.set()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until no exit handling or stop is in flight (for tests and the demo)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ctx.workers.idle():
                return True
            time.sleep(0.01)
        return False

    # -- the loop --------------------------------------------------------------------------------

    def _loop(self, waker: Waker) -> None:
        """Run a pass, then sleep until woken, the next known deadline, or the interval; a
        wake-up by a change that cannot concern this host skips its pass (see the top)."""
        interval = float(self.settings.dispatch_interval)
        look: kd.Glance | None = None
        while not self._stop.is_set():
            down = self._outage.down
            if down and self._stop.wait(max(0.0, self._next_due - time.time())):
                break  # the database out of reach: the next try when its pause is over
            started = time.monotonic()
            # as the pass begins: what a later change is compared with (none while the database is away)
            base = look or (None if down else self._glance())
            try:
                self.run_pass_report()
            except Exception as exc:  # a pass must never kill the loop
                metrics.pass_done(self.host, started, ok=False)
                if isinstance(exc, Unavailable):  # a restart, a failover: a line, and growing pauses
                    self._next_due = time.time() + self._outage.failed(exc)
                else:
                    log.exception("dispatcher pass failed")
                    self._next_due = time.time() + RETRY_AFTER_FAILURE
                base = None
            else:
                self._outage.over()
            look = None
            last = started
            self._keep_statistics()
            if time.monotonic() >= self._fold_due:
                self._fold_due = time.monotonic() + FOLD_COUNTS_EVERY
                try:
                    maintenance.fold_task_counts(self.db)
                    insights.fold(self.db)
                except AgentboardError as exc:
                    if not isinstance(exc, Unavailable):
                        log.info("folding the task counts or the closed runs failed (%s); tried again later",
                                 one_line(exc))
            skipped_at: float | None = None  # the first change skipped since the pass
            while not self._stop.is_set():
                left = interval - (time.monotonic() - started)
                if skipped_at is not None:  # what a glance cannot see is acted on soon all the same
                    left = min(left, skipped_at + SKIP_AT_MOST - time.monotonic())
                timeout = min(left, max(0.0, self._next_due - time.time())) if self._next_due else left
                why = waker.wait_for(max(timeout, 0.002))
                rest = PASS_MIN_GAP - (time.monotonic() - last)
                if rest > 0:
                    self._stop.wait(rest)
                if why != "changed" or base is None:
                    break
                last = time.monotonic()
                look = self._glance()
                if not self._idle(look, base):
                    break
                look = None
                if skipped_at is None:
                    skipped_at = last
                self.skipped += 1
                metrics.pass_skipped(self.host)

    def _keep_statistics(self) -> None:
        """PostgreSQL: every :data:`STATISTICS_EVERY` seconds at most, analyze the tables whose
        planner statistics lag behind their rows, on a thread of its own."""
        if self.db.dialect != "postgresql" or time.monotonic() < self._statistics_due:
            return
        if self._statistics is not None and self._statistics.is_alive():
            return
        self._statistics_due = time.monotonic() + STATISTICS_EVERY

        def refresh() -> None:
            try:
                analyzed = maintenance.refresh_statistics(self.db)
            except Exception as exc:  # the next look tries again; passes go on meanwhile
                if not self._outage.down:  # (the passes say the database is away)
                    log.info("refreshing the planner statistics failed (%s); tried again later", one_line(exc))
            else:
                if analyzed:
                    log.info("analyzed %s: their planner statistics lagged behind their rows", ", ".join(analyzed))

        self._statistics = threading.Thread(target=refresh, name="agentboard-statistics", daemon=True)
        self._statistics.start()

    def _glance(self) -> kd.Glance | None:
        try:
            return kd.glance(self.db, self.host, unrecorded=self.ctx.sqlite)
        except AgentboardError as exc:
            if not isinstance(exc, Unavailable):  # (the pass that follows says the database is away)
                log.info("a glance at the board failed (%s); a full pass instead", one_line(exc))
            return None

    def _idle(self, look: kd.Glance | None, base: kd.Glance) -> bool:
        """Whether a pass now could do nothing ``base`` (the glance as the last pass began)
        would not have let it do."""
        if look is None or look.lapsed or look.mine != base.mine or look.waiting != base.waiting:
            return False
        return not look.ready or self.ctx.workers.running() >= self.settings.max_parallel
