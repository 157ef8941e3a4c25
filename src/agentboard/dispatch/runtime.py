"""What the parts of one dispatcher share, and who may touch it.

Three kinds of threads run a dispatcher's code: the pass thread (one pass at a time, under the
dispatcher's pass lock), the job pool (stopping process groups, handling exits) and the prepare
pool (writing workspaces and starting workers during a pass). Everything mutable that more than
one of them touches lives here, behind a lock:

- :class:`WorkerRegistry`: the workers this dispatcher started, the runs being handled on the
  job pool ("busy": later passes leave them alone), the runs whose exit is being handled, and
  when a worker was first seen without a current run;
- :class:`Notes`: telemetry recorded once per key;
- :class:`Jobs`: the job pool; a run is handled by at most one job at a time.

Both pools are :class:`Pool`: threads started when work comes and ended after
:data:`POOL_IDLE` seconds without any, so a host whose workers just run (500 of them) holds a
handful of threads — the pass, the wake-up listener, the exit watcher, the worker API, the
notifiers — not a pool's worth waiting for work.

State not listed here is owned by one thread: the pass thread owns the pass's report and
deadlines and the planner's promotion clock; a prepare thread only returns what it started.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import tracing
from ..cgroups import WorkerCgroups
from ..config import Settings
from ..domain.errors import AgentboardError
from ..kernel import runs as kr
from ..store.engine import Database, Row
from . import liveness
from .exits import ExitWatcher
from .guard import Guard, WorkerFile, owner_key, worker_file
from .spawn import Worker

log = logging.getLogger("agentboard.dispatch")

#: threads of the job pool
JOB_THREADS = 4
#: the longest pause, in seconds, before a job that failed for a run is tried again
JOB_RETRY_MAX = 60.0
#: seconds a pool thread waits for work before it ends
POOL_IDLE = 2.0


class Pool:
    """Up to ``size`` threads for slow work: one is started when work waits with none idle,
    and each ends after ``idle`` seconds without work."""

    def __init__(self, size: int, name: str, idle: float = POOL_IDLE) -> None:
        self.size, self.name, self.idle = size, name, idle
        self._cv = threading.Condition()
        self._work: deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = deque()
        self._threads = 0
        self._waiting = 0
        self._pending = 0
        self._n = 0

    @property
    def threads(self) -> int:
        """How many threads the pool has now."""
        with self._cv:
            return self._threads

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        with self._cv:
            self._work.append((fut, fn, args))
            self._pending += 1
            if len(self._work) > self._waiting and self._threads < self.size:
                self._threads += 1
                self._n += 1
                threading.Thread(target=self._run, name=f"{self.name}_{self._n}", daemon=True).start()
            # every waiter: one that is only draining must not take the wake-up an idle thread needs
            self._cv.notify_all()
        return fut

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        """``fn`` of each item on the pool; the results in order (the first error raised)."""
        return [f.result() for f in [self.submit(fn, it) for it in items]]

    def drain(self) -> None:
        """Wait until every piece of work submitted so far is done."""
        with self._cv:
            while self._pending:
                self._cv.wait()

    def _run(self) -> None:
        while True:
            with self._cv:
                self._waiting += 1
                end = time.monotonic() + self.idle
                while not self._work:
                    left = end - time.monotonic()
                    if left <= 0:
                        self._waiting -= 1
                        self._threads -= 1
                        return
                    self._cv.wait(left)
                self._waiting -= 1
                fut, fn, args = self._work.popleft()
            try:
                if fut.set_running_or_notify_cancel():
                    try:
                        fut.set_result(fn(*args))
                    except BaseException as exc:
                        fut.set_exception(exc)
            finally:
                with self._cv:
                    self._pending -= 1
                    self._cv.notify_all()
#: how many keys :class:`Notes` remembers before it starts over
NOTES_MAX = 50_000


class WorkerRegistry:
    """The workers this dispatcher started and the runs it is handling; one lock for all of it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: dict[int, Worker] = {}
        self._busy: set[int] = set()
        self._exiting: set[int] = set()
        self._orphan_since: dict[int, float] = {}
        #: called with each worker as it is forgotten (its guard and the host's worker file)
        self.on_forget: Callable[[Worker], None] | None = None

    # -- workers ------------------------------------------------------------------------------

    def add(self, w: Worker) -> None:
        with self._lock:
            self._workers[w.run_id] = w

    def get(self, run_id: int) -> Worker | None:
        with self._lock:
            return self._workers.get(run_id)

    def forget(self, run_id: int) -> None:
        """The worker of ``run_id`` is handled: stop tracking it."""
        with self._lock:
            w = self._workers.pop(run_id, None)
            self._orphan_since.pop(run_id, None)
        if w is not None and self.on_forget is not None:
            self.on_forget(w)
        if w is not None and tracing.tracer is not None:  # the run's span: start to handled exit
            tracing.finished_span("worker.run", w.started, {
                "agentboard.board": w.board, "agentboard.task": w.task_id, "agentboard.run": w.run_id,
                "agentboard.profile": str((w.profile or {}).get("name") or ""),
                "agentboard.attempt": w.attempt, "process.exit_code": w.exit_code})

    def all(self) -> list[Worker]:
        """A copy: jobs on the pool forget workers meanwhile."""
        with self._lock:
            return list(self._workers.values())

    def running(self, *, besides: set[int] | frozenset[int] = frozenset()) -> int:
        """How many of our workers have not exited (as last polled), not counting the runs in
        ``besides``."""
        return sum(1 for w in self.all() if not w.exited and w.run_id not in besides)

    def orphan_since(self, run_id: int, now: float) -> float:
        """When the worker of ``run_id`` was first seen with its run no longer current."""
        with self._lock:
            return self._orphan_since.setdefault(run_id, now)

    # -- runs being handled -------------------------------------------------------------------

    def claim(self, run_id: int) -> bool:
        """Mark ``run_id`` busy; False when it already is (a job is handling it)."""
        with self._lock:
            if run_id in self._busy:
                return False
            self._busy.add(run_id)
            return True

    def release(self, run_id: int) -> None:
        with self._lock:
            self._busy.discard(run_id)

    def busy(self, run_id: int) -> bool:
        with self._lock:
            return run_id in self._busy

    def idle(self) -> bool:
        with self._lock:
            return not self._busy

    @contextmanager
    def exiting(self, run_id: int) -> Iterator[None]:
        """While the exit of ``run_id`` is handled, its worker no longer takes a slot."""
        with self._lock:
            self._exiting.add(run_id)
        try:
            yield
        finally:
            with self._lock:
                self._exiting.discard(run_id)

    def takes_slot(self, run_id: int, *, polled: bool = False) -> bool:
        """Whether the run's local process still counts against the caps: a worker that exited
        frees its slot at once, while its result is still being read and applied. ``polled``:
        the caller reaped every worker a moment ago (a pass): what that found is used."""
        with self._lock:
            if run_id in self._exiting:
                return False
            w = self._workers.get(run_id)
        return not (w is not None and (w.exited if polled else w.poll()))


class Notes:
    """Telemetry events recorded once per key (so a guard does not flood the log)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._lock = threading.Lock()
        self._seen: set[tuple[Any, ...]] = set()

    def note(self, key: tuple[Any, ...], board: str, task_id: str | None, kind: str,
             payload: dict[str, Any], run_id: int | None = None) -> None:
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
            if len(self._seen) > NOTES_MAX:
                self._seen.clear()
        try:
            kr.record_telemetry(self.db, board, task_id, kind, payload, run_id=run_id)
        except AgentboardError:
            pass


class Jobs:
    """The job pool: slow work for one run at a time (stopping a worker, handling its exit).

    A run handed to a job is busy in the registry until the job ends; then the dispatcher is
    woken, since the run may now need a pass.
    """

    def __init__(self, workers: WorkerRegistry, wake: Callable[[], None]) -> None:
        self.workers = workers
        self.wake = wake
        self._pool = Pool(JOB_THREADS, "agentboard-dispatch")
        #: run id -> (failures in a row, not before): a job that keeps failing (a bug, or
        #: something a worker left that no reader expected) is retried with a growing pause,
        #: not at every pass
        self._failing: dict[int, tuple[int, float]] = {}
        self._failing_lock = threading.Lock()

    def submit(self, run_id: int, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` on the pool unless a job already handles ``run_id``, or its last
        job failed a moment ago (:data:`JOB_RETRY_MAX` at most)."""
        with self._failing_lock:
            failing = self._failing.get(run_id)
        if failing is not None and time.monotonic() < failing[1]:
            return
        if self.workers.claim(run_id):
            self._pool.submit(self.run, run_id, fn, *args)

    def submit_claimed(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the pool; it handles runs already claimed (and releases each)."""
        self._pool.submit(fn)

    def run(self, run_id: int, fn: Callable[..., None], *args: Any) -> None:
        """Run one job for a claimed run here; a failure is logged, and the run is free again
        either way."""
        try:
            fn(*args)
        except Exception:
            with self._failing_lock:
                count = self._failing.get(run_id, (0, 0.0))[0] + 1
                pause = min(JOB_RETRY_MAX, 2.0 ** (count - 1))
                self._failing[run_id] = (count, time.monotonic() + pause)
                if len(self._failing) > NOTES_MAX:
                    self._failing.pop(next(iter(self._failing)))
            log.exception("dispatcher job for run %s failed (%d in a row; tried again in %.0f s at the "
                          "earliest)", run_id, count, pause)
        else:
            if self._failing:
                with self._failing_lock:
                    self._failing.pop(run_id, None)
        finally:
            self.release(run_id)

    def release(self, run_id: int) -> None:
        self.workers.release(run_id)
        self.wake()

    def drain(self) -> None:
        """Wait for every job (the dispatcher may be started again)."""
        self._pool.drain()


@dataclass
class Context:
    """What every part of one dispatcher reads, fixed at construction, plus the shared state."""

    db: Database
    settings: Settings
    host: str
    #: a one-shot pass (``agentboard dispatch``) exits before its workers do: each worker then
    #: runs under a small shell that records its exit status for the pass that finds it gone. A
    #: long-running dispatcher reaps its own children and keeps them direct children, so a
    #: killed worker never lingers as an unreaped orphan.
    one_shot: bool
    api_url: str | None
    token_factory: Callable[[str, str, int], str] | None
    wake: Callable[[], None]
    workers: WorkerRegistry = field(default_factory=WorkerRegistry)
    notes: Notes = field(init=False)
    jobs: Jobs = field(init=False)
    #: one thread wakes the dispatcher on any worker's exit (:mod:`.exits`)
    exits: ExitWatcher = field(init=False)
    #: ends this dispatcher's workers if it dies (:mod:`.guard`; started by ``Dispatcher.start``)
    guard: Guard = field(init=False)
    #: the workers this host's dispatcher started, for the next one on the host (:mod:`.guard`)
    worker_file: WorkerFile = field(init=False)
    #: this dispatcher's owner key in the host's files (:func:`.guard.owner_key`)
    owner: str = field(init=False)
    #: each worker's cgroup, where the host has them (:mod:`.cgroups`)
    cgroups: WorkerCgroups = field(init=False)

    def __post_init__(self) -> None:
        self.notes = Notes(self.db)
        self.jobs = Jobs(self.workers, self.wake)
        self.exits = ExitWatcher(self.wake)
        self.guard = Guard()
        self.owner = owner_key()
        self.worker_file = WorkerFile(worker_file(self.home, self.host), self.owner)
        self.cgroups = WorkerCgroups(self.home, self.host, enabled=bool(self.settings.worker_cgroups))
        self.workers.on_forget = self._gone

    def track(self, w: Worker) -> None:
        """A worker just started: its exit wakes the dispatcher; unless this is a one-shot pass
        (whose workers outlive it), the guard ends its process group if the dispatcher dies and
        the worker file lists it (with its cgroup, where the host has them: :mod:`.cgroups`)."""
        self.exits.watch(w.proc)
        if not self.one_shot:
            self.guard.hold(w.pid, self.cgroups.folder(w.run_id))
            self.worker_file.started(w.run_id, w.pid, w.started)

    def stop_worker(self, run_id: int, pid: int, *, grace: float, proc: subprocess.Popen[bytes] | None = None,
                    started_after: float | None = None) -> bool:
        """Stop the worker of run ``run_id`` before its run is judged (a timeout, a stale run, a
        budget, a closed run): its process group (SIGTERM, SIGKILL after ``grace``), then what it
        started outside that group, still in the run's cgroup. True when the worker is gone
        (:func:`.liveness.stop_worker`: False means it survived SIGKILL; start no duplicate)."""
        gone = liveness.stop_worker(pid, grace=grace, proc=proc, started_after=started_after)
        self.cgroups.end(run_id, grace=grace)
        return gone

    def _gone(self, w: Worker) -> None:
        if not self.one_shot:
            self.guard.release(w.pid)
            self.worker_file.gone(w.run_id)

    @property
    def home(self) -> Path:
        home = self.settings.home
        return home if isinstance(home, Path) else Path(home)

    @property
    def sqlite(self) -> bool:
        return self.db.dialect == "sqlite"

    def local(self, row: Row) -> bool:
        """Whether the run's worker is on this host (on SQLite, a run with no host is)."""
        host = row.get("worker_host")
        return host == self.host or (host is None and self.sqlite)
