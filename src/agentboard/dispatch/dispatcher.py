"""The dispatcher: one pass (reap, liveness, timeouts, stale, promote, spawn) and the loop.

A pass is O(running tasks + one ready batch per board), never O(board). Writes go through the
kernel; every write against a running task passes its run id, so a late worker and the
dispatcher can never both apply. Slow work (stopping a process group, reading a worker's
result and running its verification) happens on a small thread pool so a pass stays short;
the run ids being handled there are skipped by later passes until done.

``Dispatcher(db, settings).run_pass()`` is one pass (``agentboard dispatch``);
``start()``/``stop()`` run the loop in a background thread (``agentboard dispatcher`` and
``agentboard serve``); ``wake()`` asks for a pass now.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..domain.errors import AgentboardError, StaleRun
from ..kernel import dispatching as kd
from ..kernel import runs as kr
from ..kernel.boards import board_out
from ..kernel.common import get_task, task_out
from ..kernel.profiles import profile_out
from ..protocol import lifecycle
from . import adapters, breaker, liveness, spawn, workspaces

log = logging.getLogger("agentboard.dispatch")

STOP_GRACE = 5.0
#: exits found in one pass go to at most this many pool jobs, each handling at least EXIT_BATCH_MIN
EXIT_JOBS = 2
EXIT_BATCH_MIN = 4
#: threads preparing the workspaces and .board/ files of the tasks claimed in one pass
PREPARE_THREADS = 8
EXIT_RATE_LIMITED = 75


def free_memory_mb() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class _BoardLock:
    """An exclusive, non-blocking file lock: one dispatcher per board per SQLite home."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> bool:
        if self.fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None


@dataclass
class _Launch:
    """A claimed task whose workspace and .board/ are ready, about to be (or just) started."""

    board: str
    task_id: str
    run_id: int
    profile: dict[str, Any]
    ws: workspaces.Workspace
    launch: adapters.Launch
    env: dict[str, str]
    worker: spawn.Worker | None = None


class Dispatcher:
    def __init__(
        self,
        db: Any,
        settings: Any,
        *,
        api_url: str | None = None,
        token_factory: Callable[[str, str, int], str] | None = None,
        boards: list[str] | None = None,
        host_id: str | None = None,
        one_shot: bool = False,
    ) -> None:
        self.db = db
        self.settings = settings
        # a one-shot pass (`agentboard dispatch`) exits before its workers do: each worker then
        # runs under a small shell that records its exit status for the pass that finds it gone.
        # A long-running dispatcher reaps its own children and keeps them direct children, so a
        # killed worker never lingers as an unreaped orphan.
        self.one_shot = one_shot
        self.api_url = api_url
        self.token_factory = token_factory
        self.only_boards = boards
        self.host = host_id or settings.host_id
        self.home: Path = Path(settings.home)
        self.sqlite = db.dialect == "sqlite"
        self.workers: dict[int, spawn.Worker] = {}
        self._busy: set[int] = set()
        self._busy_lock = threading.Lock()
        self._pass_lock = threading.Lock()
        self._locks: dict[str, _BoardLock] = {}
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="agentboard-dispatch")
        self._prep_pool = ThreadPoolExecutor(max_workers=PREPARE_THREADS, thread_name_prefix="agentboard-prepare")
        self._git_lock = threading.Lock()
        self._noted: set[tuple[Any, ...]] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._waker: Any = None
        self._last_promote = 0.0
        self._next_due = 0.0
        self._orphans: dict[int, float] = {}
        self._exited: set[int] = set()
        self._batch: list[tuple[int, Callable[..., None], tuple[Any, ...]]] = []
        self.passes = 0
        #: optional hook called as ``on_spawn(board, task_id, run_id, pid, at)`` right after a worker starts
        self.on_spawn: Callable[[str, str, int, int, float], None] | None = None

    # -- public API ----------------------------------------------------------------------------

    def run_pass(self, max_spawn: int | None = None, dry_run: bool = False) -> dict[str, Any]:
        """One pass now. Returns what it did (spawned, handled exits, reclaimed, skipped…)."""
        with self._pass_lock:
            persistent = self._thread is not None
            try:
                return self._pass(max_spawn, dry_run)
            finally:
                if not persistent:
                    self._release_locks()

    def start(self) -> None:
        """Run the dispatcher loop in a background thread (returns at once)."""
        if self._thread is not None:
            return
        from .wake import Waker

        self._stop.clear()
        self._waker = Waker(self.db)
        self._waker.start()
        self._thread = threading.Thread(target=self._loop, name="agentboard-dispatcher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the loop; workers keep running and a later dispatcher picks their tasks up."""
        self._stop.set()
        if self._waker is not None:
            self._waker.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._waker is not None:
            self._waker.stop()
            self._waker = None
        self._pool.shutdown(wait=True, cancel_futures=False)
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="agentboard-dispatch")
        self._prep_pool.shutdown(wait=True)
        self._prep_pool = ThreadPoolExecutor(max_workers=PREPARE_THREADS, thread_name_prefix="agentboard-prepare")
        self._release_locks()

    def wake(self) -> None:
        """Ask for a pass now (e.g. the dashboard's "dispatch now")."""
        if self._waker is not None:
            self._waker.set()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until no exit handling or stop is in flight (for tests and the demo)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._busy_lock:
                if not self._busy:
                    return True
            time.sleep(0.01)
        return False

    # -- the loop --------------------------------------------------------------------------------

    def _loop(self) -> None:
        interval = float(self.settings.dispatch_interval or 60.0)
        while not self._stop.is_set():
            try:
                self.run_pass()
            except Exception:  # a pass must never kill the loop
                log.exception("dispatcher pass failed")
                self._next_due = time.time() + 1.0
            if self._stop.is_set():
                break
            timeout = min(interval, max(0.0, self._next_due - time.time())) if self._next_due else interval
            self._waker.wait(max(timeout, 0.002))

    def _due(self, at: float | None) -> None:
        if at is not None and (self._next_due == 0.0 or at < self._next_due):
            self._next_due = at

    # -- locks -------------------------------------------------------------------------------------

    def _lock(self, slug: str) -> bool:
        if not self.sqlite:
            return True
        lk = self._locks.get(slug)
        if lk is None:
            lk = self._locks[slug] = _BoardLock(self.home / "boards" / slug / "dispatcher.lock")
        return lk.acquire()

    def _release_locks(self) -> None:
        for lk in self._locks.values():
            lk.release()

    # -- helpers -----------------------------------------------------------------------------------

    def _profiles(self) -> dict[str, dict[str, Any]]:
        rows = self.db.read(lambda tx: tx.all("SELECT * FROM profiles"))
        return {r["name"]: profile_out(r) for r in rows}

    def _note(self, key: tuple[Any, ...], board: str, task_id: str | None, kind: str,
              payload: dict[str, Any], run_id: int | None = None) -> None:
        """Record a telemetry event once per key (so a guard does not flood the log)."""
        if key in self._noted:
            return
        self._noted.add(key)
        if len(self._noted) > 50_000:
            self._noted.clear()
        try:
            kr.record_telemetry(self.db, board, task_id, kind, payload, run_id=run_id)
        except AgentboardError:
            pass

    def _claim_busy(self, run_id: int) -> bool:
        with self._busy_lock:
            if run_id in self._busy:
                return False
            self._busy.add(run_id)
            return True

    def _release_busy(self, run_id: int) -> None:
        with self._busy_lock:
            self._busy.discard(run_id)
        if self._waker is not None:
            self._waker.set()

    def _submit(self, run_id: int, fn: Callable[..., None], *args: Any) -> None:
        if not self._claim_busy(run_id):
            return

        self._pool.submit(self._run_job, run_id, fn, args)

    def _run_job(self, run_id: int, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        """Run one job for a run; a failure is logged, and the run is free again either way."""
        try:
            fn(*args)
        except Exception:
            log.exception("dispatcher job for run %s failed", run_id)
        finally:
            self._release_busy(run_id)

    def _queue_exit(self, run_id: int, fn: Callable[..., None], *args: Any) -> None:
        """Like :meth:`_submit`, for an exit found in this pass: the pass hands its exits to the
        pool in a few jobs that each handle several in turn (see :meth:`_flush_exits`)."""
        if not self._claim_busy(run_id):
            return
        self._batch.append((run_id, fn, args))

    def _flush_exits(self) -> None:
        """Submit the exits found in this pass. A job handles its exits one after the other, so
        exits do not compete with each other for the database's write lock; a slow one (a
        verification run) delays only the few in its own job."""
        batch, self._batch = self._batch, []
        if not batch:
            return
        size = max(EXIT_BATCH_MIN, -(-len(batch) // EXIT_JOBS))
        for i in range(0, len(batch), size):
            chunk = batch[i:i + size]

            def job(chunk: list[tuple[int, Callable[..., None], tuple[Any, ...]]] = chunk) -> None:
                try:
                    done = self._plain_exits([args for _rid, fn, args in chunk if fn == self._handle_exit])
                except Exception:
                    log.exception("completing several exits at once failed; handling them one by one")
                    done = set()
                for run_id, fn, args in chunk:
                    if run_id in done:
                        self._release_busy(run_id)
                    else:
                        self._run_job(run_id, fn, args)

            self._pool.submit(job)

    def _local(self, row: dict[str, Any]) -> bool:
        host = row.get("worker_host")
        return host == self.host or (host is None and self.sqlite)

    # -- the pass ----------------------------------------------------------------------------------

    def _pass(self, max_spawn: int | None, dry_run: bool) -> dict[str, Any]:
        now = time.time()
        self.passes += 1
        self._next_due = 0.0
        report: dict[str, Any] = {
            "host": self.host, "dry_run": dry_run, "spawned": [], "would_spawn": [], "exits": 0,
            "timeouts": 0, "stale": 0, "reclaimed": 0, "extended": 0, "promoted": 0, "skipped": [],
            "skipped_boards": [], "spawn_failed": [],
        }
        snap = kd.pass_snapshot(self.db, now)  # one read for what every pass needs
        boards = [board_out(r) for r in snap["boards"]]
        if self.only_boards is not None:
            boards = [b for b in boards if b["slug"] in self.only_boards]
        held = []
        for b in boards:
            if dry_run or self._lock(b["slug"]):
                held.append(b)
            else:
                report["skipped_boards"].append(b["slug"])
        if report["skipped_boards"]:
            report["skipped_reason"] = "another dispatcher is running on this home for these boards"
        if not held:
            return report
        slugs = [b["slug"] for b in held]

        # 1. reap our children
        for w in list(self.workers.values()):
            w.poll()

        # 2-5. running tasks: exits, expired claims, timeouts, stale
        held_slugs = set(slugs)
        rows = [r for r in snap["running"] if r["board"] in held_slugs]
        current = {r["current_run_id"] for r in rows}
        if not dry_run:
            self._check_orphaned_workers(current, now)
        per_board: dict[str, int] = {}
        per_profile: dict[str, int] = {}
        local_count = 0
        for r in rows:
            per_board[r["board"]] = per_board.get(r["board"], 0) + 1
            if r["assignee"]:
                per_profile[r["assignee"]] = per_profile.get(r["assignee"], 0) + 1
            if self._local(r):
                w = self.workers.get(r["current_run_id"])
                # capacity is about processes: a worker that exited frees its slot at once, while
                # its result is still being read and applied
                if r["current_run_id"] not in self._exited and not (w is not None and w.poll()):
                    local_count += 1
            if not dry_run:
                try:
                    self._check_running(r, now, report)
                except AgentboardError as exc:
                    log.info("run %s of %s: %s", r["current_run_id"], r["id"], exc)
        self._flush_exits()
        # our own workers whose runs ended but which still run count against the caps
        # (a copy: exit handling on the pool removes workers meanwhile)
        local_count += sum(1 for rid, w in list(self.workers.items()) if rid not in current and not w.exited)

        # 6. promotion safety net (every interval, not every pass)
        interval = float(self.settings.dispatch_interval or 60.0)
        if not dry_run and now - self._last_promote >= interval:
            self._last_promote = now
            for slug in slugs:
                try:
                    report["promoted"] += len(kd.promote_pending(self.db, slug))
                except AgentboardError as exc:
                    log.warning("promotion safety net on %s: %s", slug, exc)
        self._due(self._last_promote + interval)

        # 7. spawn
        room = int(self.settings.max_parallel) - local_count
        if max_spawn is not None:
            room = min(room, int(max_spawn))
        if room > 0:
            mem = free_memory_mb()
            floor = int(self.settings.min_free_memory_mb or 0)
            if mem is not None and floor and mem < floor:
                report["skipped"].append({"reason": f"free memory {mem} MB is below {floor} MB"})
                if not dry_run:
                    for slug in slugs:
                        self._note(("memory", slug, int(now // 300)), slug, None, "respawn_guarded",
                                   {"reason": f"not spawning: free memory {mem} MB is below the {floor} MB guard"})
                self._due(now + 5.0)
            else:
                profiles = {r["name"]: profile_out(r) for r in snap["profiles"]}
                failures: list[tuple[Any, str]] = []
                for b in held:
                    if room <= 0:
                        break
                    n = self._spawn_board(b, profiles, room, per_board, per_profile, dry_run, report, failures)
                    room -= n
                if failures:
                    self._apply_spawn_failures(failures, report)
        if not dry_run:
            ends = [float(v) for k, v in snap["cooldowns"].items() if k in held_slugs and v is not None]
            if ends:
                self._due(min(ends) + 0.01)
        return report

    # -- running tasks ------------------------------------------------------------------------------

    def _check_orphaned_workers(self, current: set[int], now: float) -> None:
        """Our workers whose run is no longer current: gone → forget; reclaimed → stop."""
        for rid, w in list(self.workers.items()):
            if rid in current:
                continue
            with self._busy_lock:
                if rid in self._busy:
                    continue
            if w.poll():
                self.workers.pop(rid, None)
                self._orphans.pop(rid, None)
                self._queue_exit(rid, self._record_exit, w)
                continue
            first = self._orphans.setdefault(rid, now)
            runs = kd.last_runs(self.db, [rid])
            outcome = (runs.get(rid) or {}).get("outcome")
            if outcome in ("completed", "review_requested", "blocked") and now - first < 30:
                self._due(first + 30)  # it reported; give it time to exit on its own
                continue
            self._submit(rid, self._stop_orphan, w)

    def _record_exit(self, w: spawn.Worker) -> None:
        """A worker that reported before exiting: keep its exit status and usage on the run, and
        hand a task it sent to review to the reviewer."""
        out = adapters.read_output((w.profile or {}).get("adapter") or "command", w.log_path, w.log_offset)
        fields = {k: v for k, v in (("input_tokens", out.input_tokens), ("output_tokens", out.output_tokens),
                                    ("cost_usd", out.cost_usd)) if v is not None}
        try:
            kr.update_run(self.db, w.run_id, exit_code=w.exit_code, **fields)
        except AgentboardError:
            pass
        self._review_entry(w)

    def _review_entry(self, w: spawn.Worker) -> None:
        """A worker that finished to review through the CLI or REST (its task was no longer running
        when it exited): the review hand-off has not happened yet. ``on_review_entered`` is
        idempotent per review entry, so a hand-off already made (MCP) is not repeated."""
        def _r(tx: Any) -> Any:
            return tx.one(
                "SELECT t.status, r.outcome, (SELECT MAX(x.id) FROM task_runs x WHERE x.task_id = t.id "
                "AND x.status = 'closed') AS last_closed FROM tasks t JOIN task_runs r ON r.id = :r "
                "WHERE t.id = :t AND t.board = :b", {"t": w.task_id, "b": w.board, "r": w.run_id})
        try:
            st = self.db.read(_r)
            # in review because of this very run (not a later one)
            if (st is None or st["status"] != "review" or st["outcome"] != "review_requested"
                    or int(st["last_closed"] or 0) != w.run_id):
                return
            from ..protocol import review

            review.on_review_entered(self.db, self.settings, w.board, w.task_id)
        except AgentboardError as exc:
            log.info("review hand-off of %s after run %s: %s", w.task_id, w.run_id, exc)

    def _stop_orphan(self, w: spawn.Worker) -> None:
        if liveness.stop_worker(w.pid, grace=STOP_GRACE, proc=w.proc):
            self.workers.pop(w.run_id, None)
            self._orphans.pop(w.run_id, None)
            w.poll()
            self._review_entry(w)
        else:
            self._note(("deferred", w.run_id), w.board, w.task_id, "reclaim_deferred",
                       {"pid": w.pid, "reason": "the worker of a closed run survived SIGKILL"}, run_id=w.run_id)

    def _check_running(self, r: dict[str, Any], now: float, report: dict[str, Any]) -> None:
        rid = r["current_run_id"]
        with self._busy_lock:
            if rid in self._busy:
                return
        started = float(r["run_started_at"] or now)
        ttl = float(self.settings.claim_ttl or 900)
        by_hand = str(r.get("claim_lock") or "").startswith(kr.HAND_CLAIM)
        if by_hand or not self._local(r):
            # another host's worker, or a run claimed by hand (no process of ours behind it):
            # only its claim expiry says it is gone; its heartbeats extend the claim
            exp = r["claim_expires"]
            if exp is not None and exp < now:
                report["reclaimed"] += 1
                who = "its claimer" if by_hand else f"the worker on host {r['worker_host']!r}"
                self._fail(r, "reclaimed", f"claim expired: {who} stopped heartbeating"
                           + ("" if by_hand else " and its dispatcher did not renew the claim"))
            else:
                self._due(exp)
            return
        w = self.workers.get(rid)
        grace = float(self.settings.spawn_grace or 2.0)
        if w is not None:
            alive = not w.poll()
        elif r["worker_pid"]:
            alive = liveness.pid_alive(r["worker_pid"], started_after=started)
        else:
            # claimed but no pid recorded: a spawn in progress elsewhere, or a dispatcher that died
            alive = now - started < grace
            if alive:
                self._due(started + grace)
        if not alive:
            report["exits"] += 1
            self._queue_exit(rid, self._handle_exit, r, w)
            return
        if w is not None and w.deadline is not None:
            if now > w.deadline:
                self._submit(rid, self._stop_repair, r, w)
                return
            self._due(w.deadline)
        max_rt = r["max_runtime_seconds"]
        if max_rt and now - started > max_rt:
            report["timeouts"] += 1
            self._submit(rid, self._stop_then_fail, r, w, "timed_out",
                         f"ran longer than its max runtime of {int(max_rt)}s; stopped", True)
            return
        if max_rt:
            self._due(started + max_rt)
        last_hb = float(r["last_heartbeat_at"] or started)
        stale_after = float(self.settings.stale_timeout)
        quiet = float(self.settings.stale_heartbeat)
        if now - started > stale_after and now - last_hb > quiet:
            report["stale"] += 1
            self._submit(rid, self._stop_then_fail, r, w, "stale",
                         f"running for {int((now - started) // 60)} min with no heartbeat in the last "
                         f"{int(quiet // 60)} min; stopped and returned to the queue", False)
            return
        self._due(max(started + stale_after, last_hb + quiet))
        exp = r["claim_expires"]
        # a live local worker keeps its claim (renewed well before expiry, so other hosts never
        # mistake it for a dead one); being quiet is handled by the stale rule above
        if exp is None or exp - now < ttl / 2:
            if kr.extend_claim(self.db, r["board"], r["id"], rid):
                report["extended"] += 1
            self._due(now + ttl / 2)
        else:
            self._due(exp - ttl / 2)

    def _fail(self, r: dict[str, Any], outcome: str, error: str, *, exit_code: int | None = None,
              count: bool | None = None, cooldown: float | None = None) -> dict[str, Any] | None:
        try:
            return kr.fail(self.db, r["board"], r["id"], outcome, run_id=r["current_run_id"], error=error,
                           exit_code=exit_code, count_failure=count, cooldown_seconds=cooldown)
        except StaleRun:
            return None
        except AgentboardError as exc:
            log.info("could not record %s for %s: %s", outcome, r["id"], exc)
            return None

    def _stop_then_fail(self, r: dict[str, Any], w: spawn.Worker | None, outcome: str, error: str,
                        count: bool) -> None:
        pid = w.pid if w is not None else r["worker_pid"]
        ok = True
        if pid:
            ok = liveness.stop_worker(pid, grace=STOP_GRACE, proc=w.proc if w else None,
                                      started_after=float(r["run_started_at"] or 0) or None)
        if not ok:
            self._note(("deferred", r["current_run_id"]), r["board"], r["id"], "reclaim_deferred",
                       {"pid": pid, "reason": f"{outcome}: the worker survived SIGKILL; not starting a duplicate"},
                       run_id=r["current_run_id"])
            return
        if w is not None:
            w.poll()
            self.workers.pop(w.run_id, None)
        self._fail(r, outcome, error, exit_code=w.exit_code if w else None, count=count)

    def _stop_repair(self, r: dict[str, Any], w: spawn.Worker) -> None:
        liveness.stop_worker(w.pid, grace=STOP_GRACE, proc=w.proc)
        w.poll()
        self._handle_exit(r, w, deadline_hit=True)

    # -- exits ----------------------------------------------------------------------------------------

    def _plain_exits(self, exits: list[tuple[Any, ...]]) -> set[int]:
        """Exits of first attempts whose whole effect is a completion (``lifecycle.plan_plain_completions``):
        one read and one write per board for all of them. Returns the run ids handled."""
        if len(exits) < 2:
            return set()
        candidates = {}
        for r, w in exits:
            if w is None or w.attempt or not w.exited:
                continue
            adapter = (w.profile or {}).get("adapter") or "command"
            if adapter != "command":
                continue  # usage comes from the agent's output: the one-by-one path reads it
            candidates[int(r["current_run_id"])] = (r, w)
        if len(candidates) < 2:
            return set()
        plans = lifecycle.plan_plain_completions(
            self.db, self.settings,
            [(r["board"], r["id"], rid, w.workspace, w.exit_code) for rid, (r, w) in candidates.items()])
        by_board: dict[str, list[dict[str, Any]]] = {}
        for rid, pc in plans.items():
            by_board.setdefault(pc.board, []).append(
                {"task_id": pc.task_id, "run_id": rid, "summary": pc.summary, "metadata": pc.metadata,
                 "usage": pc.usage, "actor": pc.actor, "exit_code": pc.exit_code})
        done: set[int] = set()
        for slug, items in by_board.items():
            for rid, state in kd.complete_runs(self.db, slug, items).items():
                if state in ("completed", "stale"):  # stale: someone else closed the run meanwhile
                    done.add(rid)
                    self.workers.pop(rid, None)
        return done

    def _handle_exit(self, r: dict[str, Any], w: spawn.Worker | None, deadline_hit: bool = False) -> None:
        rid = r["current_run_id"]
        self._exited.add(rid)
        try:
            self._handle_exit_inner(r, w)
        finally:
            self._exited.discard(rid)

    def _handle_exit_inner(self, r: dict[str, Any], w: spawn.Worker | None) -> None:
        rid = r["current_run_id"]
        board, task_id = r["board"], r["id"]
        exit_code = w.exit_code if w is not None else None
        if exit_code is None:  # not our child: the status its wrapper wrote, if it got that far
            exit_code = spawn.read_exit(spawn.exit_path(self.home, board, task_id, int(rid)))
        log_file = w.log_path if w is not None else (Path(r["log_path"]) if r["log_path"] else None)
        offset = w.log_offset if w is not None else 0
        profile = w.profile if w is not None else self._profiles().get(r["profile"] or r["assignee"] or "", {})
        adapter = (profile or {}).get("adapter") or "command"
        workspace = w.workspace if w is not None else Path(r["run_workspace"] or r["workspace_path"] or ".")
        attempt = w.attempt if w is not None else 0
        self.workers.pop(rid, None)
        out = adapters.read_output(adapter, log_file, offset)
        usage = {k: v for k, v in (("input_tokens", out.input_tokens), ("output_tokens", out.output_tokens),
                                   ("cost_usd", out.cost_usd)) if v is not None}
        if usage:  # after_exit records the exit code itself
            try:
                kr.update_run(self.db, rid, exit_code=exit_code, **usage)
            except AgentboardError:
                pass
        decision = lifecycle.after_exit(self.db, self.settings, board, task_id, rid, workspace, exit_code,
                                        log_file, attempt)
        if decision.action == "handled":
            return
        if decision.action == "repair" and decision.prompt_file is not None:
            self._respawn_repair(r, profile, workspace, Path(decision.prompt_file), attempt + 1,
                                 decision.deadline_seconds)
            return
        self._classify(r, exit_code, out, log_file, offset, pid=w.pid if w else r["worker_pid"])

    def _classify(self, r: dict[str, Any], exit_code: int | None, out: adapters.Outcome,
                  log_file: Path | None, offset: int, pid: int | None) -> None:
        tail = spawn.log_tail(log_file, offset)
        detail = f"; last output: {tail}" if tail else ""
        if out.rate_limited or exit_code == EXIT_RATE_LIMITED:
            cooldown = float(self.settings.rate_limit_cooldown or 300)
            res = self._fail(r, "rate_limited", f"the agent hit a rate limit (exit {exit_code}); retrying after "
                             f"a {int(cooldown)}s cooldown{detail}", exit_code=exit_code, cooldown=cooldown)
            if res is not None:
                self._note(("cooldown", r["current_run_id"]), r["board"], r["id"], "respawn_guarded",
                           {"reason": "rate-limit cooldown", "until": time.time() + cooldown})
            return
        if exit_code == 0:
            self._fail(r, "protocol_violation",
                       "the worker exited 0 without reporting: no kanban_complete/kanban_block call, no "
                       "`agentboard complete`/`block`, no valid .board/result.json" + detail, exit_code=0)
            return
        if exit_code is None:
            error = (f"worker process {pid} is gone (its exit status is unknown: it was not started by "
                     "this dispatcher process)" if pid else
                     "the dispatcher stopped between claiming the task and starting its worker")
        elif exit_code < 0 or 128 < exit_code < 128 + 65:
            num = -exit_code if exit_code < 0 else exit_code - 128
            try:
                name = signal.Signals(num).name
            except ValueError:
                name = f"signal {num}"
            error = f"worker killed by {name}"
        else:
            error = f"worker exited with status {exit_code}"
        self._fail(r, "crashed", error + detail, exit_code=exit_code)

    # -- spawning ---------------------------------------------------------------------------------------

    def _spawn_board(self, b: dict[str, Any], profiles: dict[str, dict[str, Any]], room: int,
                     per_board: dict[str, int], per_profile: dict[str, int], dry_run: bool,
                     report: dict[str, Any], failures: list[tuple[Any, str]]) -> int:
        slug = b["slug"]
        settings = b.get("settings") or {}
        cap = settings.get("max_parallel")
        if b.get("default_workdir") and not dry_run:
            from .targets import is_git_target

            if not is_git_target(b["default_workdir"]):
                cap = 1  # one shared, non-git checkout: no parallel writers
        if cap is not None:
            room = min(room, int(cap) - per_board.get(slug, 0))
        if room <= 0:
            return 0
        batch = kd.ready_batch(self.db, slug, room * 3 + 8)
        if not batch:
            return 0
        prev = kd.last_runs(self.db, [c["last_run_id"] for c in batch if c.get("last_run_id")])
        chosen: list[tuple[dict[str, Any], dict[str, Any]]] = []
        taken: dict[str, int] = {}
        now = time.time()
        for c in batch:
            if len(chosen) >= room:
                break
            name = c["assignee"] or c.get("default_assignee")
            if not name:
                self._skip(report, dry_run, ("noassignee", c["id"]), slug, c["id"], "profile_skipped",
                           "no assignee and no default_assignee is configured")
                continue
            p = profiles.get(name)
            if p is None:
                self._skip(report, dry_run, ("noprofile", c["id"], name), slug, c["id"], "profile_skipped",
                           f"profile {name!r} does not exist; add it with `agentboard profiles add {name} --command ...` "
                           "or assign another profile")
                continue
            if not p["enabled"]:
                self._skip(report, dry_run, ("disabled", c["id"], name), slug, c["id"], "profile_skipped",
                           f"profile {name!r} is disabled")
                continue
            limit = p.get("max_concurrency")
            if limit and per_profile.get(name, 0) + taken.get(name, 0) >= int(limit):
                continue
            why = breaker.guard(
                c, profiles=set(profiles),
                comments=lambda tid, since: kd.recent_comments(self.db, tid, since),
                reopened=lambda tid: kd.last_event_of(self.db, tid, "reopened"), now=now)
            if why:
                self._skip(report, dry_run, ("guard", c["id"], why[:40]), slug, c["id"], "respawn_guarded", why)
                continue
            last = prev.get(int(c["last_run_id"])) if c.get("last_run_id") else None
            if last is not None and not dry_run and self._previous_worker_alive(c, last):
                report["skipped"].append({"task": c["id"], "reason": "stopping the worker of its previous run first"})
                continue
            chosen.append((c, p))
            taken[name] = taken.get(name, 0) + 1
        if not chosen:
            return 0
        if dry_run:
            for c, p in chosen:
                report["would_spawn"].append({"board": slug, "task": c["id"], "title": c["title"],
                                              "profile": p["name"], "priority": c["priority"]})
            return len(chosen)
        claimed = kd.claim_batch(self.db, slug, [c["id"] for c, _ in chosen],
                                 ttl=int(self.settings.claim_ttl), host=self.host)
        by_id = {c["id"]: (c, p) for c, p in chosen}
        # prepare and start every claimed task, then record them all in one transaction
        todo = []
        for cl in claimed:
            c, p = by_id[cl["id"]]
            per_board[slug] = per_board.get(slug, 0) + 1
            per_profile[p["name"]] = per_profile.get(p["name"], 0) + 1
            todo.append(({**c, **(cl.get("task") or {})}, p, int(cl["run_id"])))
        # what the workers' files need is read for all of them in one transaction, here; writing
        # the files and starting the processes is mostly waiting: several at once, without a
        # database connection each
        loaded: dict[str, Any] = {}
        if todo:
            try:
                loaded = lifecycle.prepare_reads(self.db, self.settings, slug, [t[0]["id"] for t in todo])
            except AgentboardError as exc:
                log.info("reading what %d workers need at once failed (%s); one by one", len(todo), exc)
        if len(todo) > 1:
            results = list(self._prep_pool.map(
                lambda t: self._prepare_and_start(b, *t, loaded=loaded.get(t[0]["id"])), todo))
        else:
            results = [self._prepare_and_start(b, *t, loaded=loaded.get(t[0]["id"])) for t in todo]
        started: list[_Launch] = []
        for (task, _p, run_id), res in zip(todo, results, strict=True):
            if isinstance(res, str):
                failures.append(((slug, task["id"], run_id), res))
            else:
                started.append(res)
        # then every pid in one transaction
        self._record_started(slug, started, report)
        return len(claimed)

    def _skip(self, report: dict[str, Any], dry_run: bool, key: tuple[Any, ...], board: str, task_id: str,
              kind: str, reason: str) -> None:
        report["skipped"].append({"task": task_id, "reason": reason})
        if not dry_run:
            self._note(key, board, task_id, kind, {"reason": reason})

    def _previous_worker_alive(self, c: dict[str, Any], last: dict[str, Any]) -> bool:
        """A local worker of an earlier run of this task still alive: stop it before respawning."""
        rid = int(last["id"])
        with self._busy_lock:
            if rid in self._busy:
                return True  # being stopped right now
        w = self.workers.get(rid)
        pid = w.pid if w is not None else last.get("worker_pid")
        if w is None and last.get("worker_host") != self.host and not (self.sqlite and last.get("worker_host") is None):
            return False
        if not pid:
            return False
        # the leader may be gone while others of its process group (its children) still run
        leader = (not w.poll()) if w is not None else liveness.pid_alive(pid, started_after=last.get("started_at"))
        if not leader and not liveness.group_has_live(pid):
            if w is not None:
                self.workers.pop(rid, None)
            return False
        # stop it (in the background); the task is spawned by a later pass once it is gone
        if w is not None:
            self._submit(rid, self._stop_orphan, w)
        else:
            self._submit(rid, self._stop_pid, c["board"], c["id"], rid, int(last["worker_pid"]),
                         last.get("started_at"))
        return True

    def _stop_pid(self, board: str, task_id: str, run_id: int, pid: int, started: float | None) -> None:
        if not liveness.stop_worker(pid, grace=STOP_GRACE, started_after=started):
            self._note(("deferred", run_id), board, task_id, "reclaim_deferred",
                       {"pid": pid, "reason": "the previous run's worker survived SIGKILL; not starting a duplicate"},
                       run_id=run_id)

    def _prepare_and_start(self, b: dict[str, Any], task: dict[str, Any], p: dict[str, Any],
                           run_id: int, loaded: Any = None) -> _Launch | str:
        ln = self._prepare_spawn(b, task, p, run_id, loaded)
        if isinstance(ln, str):
            return ln
        return self._start(ln) or ln

    def _prepare_spawn(self, b: dict[str, Any], task: dict[str, Any], p: dict[str, Any],
                       run_id: int, loaded: Any = None) -> _Launch | str:
        """Prepare the workspace and .board/ and build the command line. The launch, or error text."""
        slug, task_id = b["slug"], task["id"]
        try:
            plan = workspaces.plan(self.home, b, task)
            if plan.kind == "scratch":
                ws = workspaces.prepare(plan)
            else:  # git worktrees and excludes of one repository: one at a time
                with self._git_lock:
                    ws = workspaces.prepare(plan)
        except workspaces.WorkspaceError as exc:
            return f"workspace: {exc}"
        except AgentboardError as exc:
            return str(exc)
        if ws.kind == "scratch" and ws.created:
            self._tip_scratch(slug, task_id, ws.path)
        token = None
        try:
            if self.token_factory is not None:
                token = self.token_factory(slug, task_id, run_id)
            prompt_file = Path(lifecycle.prepare(self.db, self.settings, slug, task, run_id, ws.path,
                                                 api_url=self.api_url, token=token, loaded=loaded))
        except Exception as exc:
            return f"preparing the worker's .board/ files failed: {type(exc).__name__}: {exc}"
        env = spawn.worker_env(self.settings, board=slug, task=task, run_id=run_id, workspace=ws.path,
                               branch=ws.branch, profile=p, api_url=self.api_url, token=token)
        try:
            launch = adapters.build(p, task_id=task_id, run_id=run_id, workspace=ws.path, prompt_file=prompt_file,
                                    board=slug, path_env=env.get("PATH"))
        except adapters.AdapterError as exc:
            return f"profile {p['name']!r}: {exc}"
        return _Launch(slug, task_id, run_id, p, ws, launch, env)

    def _start(self, ln: _Launch) -> str | None:
        """Start a prepared worker. Error text or None."""
        p, launch = ln.profile, ln.launch
        logp = spawn.log_path(self.home, ln.board, ln.task_id)
        try:
            proc, offset = spawn.start(
                launch.argv, cwd=ln.ws.path, env=ln.env, log=logp, log_max_bytes=int(self.settings.log_max_bytes),
                exit_file=spawn.exit_path(self.home, ln.board, ln.task_id, ln.run_id) if self.one_shot else None,
                header=f"=== run {ln.run_id} of {ln.task_id} by {p['name']} ({launch.adapter}) at "
                       f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} ===")
        except OSError as exc:
            return f"profile {p['name']!r}: cannot start {launch.argv[0]!r}: {exc.strerror or exc}"
        w = spawn.Worker(ln.board, ln.task_id, ln.run_id, proc, p, ln.ws.path, logp, offset)
        ln.worker = w
        self.workers[ln.run_id] = w
        if self.on_spawn is not None:
            self.on_spawn(ln.board, ln.task_id, ln.run_id, proc.pid, w.started)
        self._watch(proc)
        return None

    def _record_started(self, slug: str, started: list[_Launch], report: dict[str, Any]) -> None:
        """Record the pids of the workers started on ``slug`` in this pass (one transaction)."""
        if not started:
            return
        items = []
        for ln in started:
            assert ln.worker is not None
            items.append({"task_id": ln.task_id, "run_id": ln.run_id, "pid": ln.worker.pid, "host": self.host,
                          "log_path": str(ln.worker.log_path), "workspace": str(ln.ws.path),
                          "extra": {"profile": ln.profile["name"], "adapter": ln.launch.adapter,
                                    "branch": ln.ws.branch, "workspace_kind": ln.ws.kind}})
        stale = {int(it["run_id"]) for it in kd.record_spawns(self.db, slug, items)}
        for ln in started:
            assert ln.worker is not None
            if ln.run_id in stale:
                # reclaimed between the claim and the spawn: this worker must not run
                self._submit(ln.run_id, self._stop_orphan, ln.worker)
                continue
            report["spawned"].append({"board": slug, "task": ln.task_id, "run_id": ln.run_id,
                                      "pid": ln.worker.pid, "profile": ln.profile["name"],
                                      "workspace": str(ln.ws.path)})
            log.info("spawned %s (%s) run %s pid %s in %s", ln.task_id, ln.profile["name"], ln.run_id,
                     ln.worker.pid, ln.ws.path)

    def _respawn_repair(self, r: dict[str, Any], profile: dict[str, Any], workspace: Path, prompt_file: Path,
                        attempt: int, deadline: float | None) -> None:
        slug, task_id, run_id = r["board"], r["id"], r["current_run_id"]
        try:
            task = self.db.read(lambda tx: task_out(get_task(tx, slug, task_id)))
            token = self.token_factory(slug, task_id, run_id) if self.token_factory else None
            env = spawn.worker_env(self.settings, board=slug, task=task, run_id=run_id, workspace=workspace,
                                   branch=task.get("branch_name"), profile=profile, api_url=self.api_url, token=token)
            launch = adapters.build(profile, task_id=task_id, run_id=run_id, workspace=workspace,
                                    prompt_file=prompt_file, board=slug, path_env=env.get("PATH"))
            logp = spawn.log_path(self.home, slug, task_id)
            proc, offset = spawn.start(launch.argv, cwd=workspace, env=env, log=logp,
                                       log_max_bytes=int(self.settings.log_max_bytes),
                                       exit_file=spawn.exit_path(self.home, slug, task_id, run_id)
                                       if self.one_shot else None,
                                       header=f"=== run {run_id} of {task_id}: repair attempt {attempt} ===")
        except (adapters.AdapterError, OSError, AgentboardError) as exc:
            self._fail(r, "crashed", f"could not start repair attempt {attempt}: {exc}")
            return
        w = spawn.Worker(slug, task_id, run_id, proc, profile, workspace, logp, offset, attempt=attempt,
                         deadline=time.time() + float(deadline or self.settings.repair_deadline or 300))
        self.workers[run_id] = w
        self._watch(proc)
        try:
            kr.record_spawn(self.db, slug, task_id, run_id, pid=proc.pid, host=self.host, log_path=str(logp),
                            workspace=str(workspace), extra={"repair_attempt": attempt, "profile": profile.get("name")})
        except StaleRun:
            liveness.stop_worker(proc.pid, grace=STOP_GRACE, proc=proc)

    def _watch(self, proc: Any) -> None:
        """Wake the loop the moment a worker exits."""
        def wait() -> None:
            try:
                proc.wait()
            except Exception:
                pass
            if self._waker is not None:
                self._waker.set()
        threading.Thread(target=wait, name="agentboard-worker-wait", daemon=True).start()

    def _tip_scratch(self, board: str, task_id: str, path: Path) -> None:
        marker = self.home / ".tip_scratch_workspace"
        if marker.exists():
            return
        try:
            marker.touch(exist_ok=False)
        except OSError:
            return
        self._note(("tip",), board, task_id, "tip_scratch_workspace", {
            "workspace": str(path),
            "tip": "scratch workspaces are removed by `agentboard gc` once a task is done; to keep outputs, "
                   "use --workspace dir:<absolute path> or worktree, or attach files to the task",
        })

    def _apply_spawn_failures(self, failures: list[tuple[Any, str]], report: dict[str, Any]) -> None:
        systemic, single = breaker.systemic_groups(failures)
        for (slug, task_id, run_id), err in systemic:
            reason = (f"systemic failure: {sum(1 for _ in systemic)} tasks failed to start in one pass with the "
                      f"same error: {err}")
            try:
                kr.give_up(self.db, slug, task_id, reason, run_id=run_id)
            except AgentboardError:
                pass
            report["spawn_failed"].append({"task": task_id, "error": err, "systemic": True})
        for (slug, task_id, run_id), err in single:
            try:
                kr.fail(self.db, slug, task_id, "spawn_failed", run_id=run_id, error=err)
            except AgentboardError:
                pass
            report["spawn_failed"].append({"task": task_id, "error": err, "systemic": False})
