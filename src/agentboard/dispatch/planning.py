"""Planning a pass: what one pass reads, which boards it may act on, how much room there is,
and which ready tasks to start.

A pass starts from one read (``kernel.dispatching.pass_snapshot``), then:

1. holds the boards it acts on (on SQLite one dispatcher per board: ``boards/<slug>/dispatcher.lock``);
2. reaps our children and checks every running task (:mod:`.reaping`), counting what already
   runs per board, per profile and as processes on this host;
3. runs the promotion safety net once per interval;
4. picks ready tasks by priority then age within the caps (``max_parallel`` here, the board's
   ``max_parallel`` — 1 for a non-git target directory —, each profile's ``max_concurrency``, a
   free-memory floor), skipping unknown or disabled profiles and guarded tasks, and hands them
   to the spawner (:mod:`.spawning`) one board at a time.

A pass is O(running tasks + one ready batch per board), never O(board). It runs on the pass
thread and owns its report and deadlines.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..domain import settings_schema
from ..domain.errors import AgentboardError, InvalidInput
from ..kernel import dispatching as kd
from ..kernel import schedules
from ..kernel.boards import board_out
from ..kernel.profiles import profile_out
from ..protocol import inbox as boardinbox
from ..store.engine import Row
from . import breaker, races
from .auto_decompose import AutoDecomposer
from .budget_watch import BudgetWatch
from .reaping import FoundExit, Reaper, earliest
from .report import PassReport, Seen, Skipped, WouldSpawn
from .reviewing import Reviewing
from .runtime import Context
from .spawning import Choice, Spawner, StartFailure
from .supervising import Supervising
from .targets import is_git_target

log = logging.getLogger("agentboard.dispatch")

#: a pass that skips spawning for lack of memory looks again this many seconds later
MEMORY_RETRY = 5.0


def free_memory_mb() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


#: the most ready tasks of one board a pass reads to fill its room (page after page, while the
#: ones it reads cannot start): a board whose first thousands of ready tasks all wait for a full
#: profile or a busy folder starts the ones behind them in a later pass
READY_READ_AT_MOST = 2000
#: seconds until a host whose pass lost tasks it chose to other hosts' claims looks again; doubled
#: after each pass in a row that lost all it chose (rows another claim holds), up to 64 times
LOST_CLAIMS_RETRY = 0.1

class BoardLock:
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


def running_dispatchers(home: Path) -> list[str]:
    """The boards of a SQLite home that a dispatcher is working on now (its board lock is held),
    each as ``"<board> (pid N)"``."""
    found: list[str] = []
    for path in sorted((home / "boards").glob("*/dispatcher.lock")):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            pid = path.read_text(errors="replace").strip() or "?"
            found.append(f"{path.parent.name} (pid {pid})")
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    return found


class BoardLocks:
    """The board locks of one dispatcher (SQLite only: on PostgreSQL several dispatchers share
    the boards and claims keep them apart)."""

    def __init__(self, home: Path, enabled: bool) -> None:
        self.home = home
        self.enabled = enabled
        self._locks: dict[str, BoardLock] = {}

    def acquire(self, slug: str) -> bool:
        if not self.enabled:
            return True
        lk = self._locks.get(slug)
        if lk is None:
            lk = self._locks[slug] = BoardLock(self.home / "boards" / slug / "dispatcher.lock")
        return lk.acquire()

    def release(self) -> None:
        for lk in self._locks.values():
            lk.release()


@dataclass
class Load:
    """What already runs: tasks per board and per profile (every host), processes on this host."""

    per_board: Counter[str] = field(default_factory=Counter)
    per_profile: Counter[str] = field(default_factory=Counter)
    local: int = 0

    def add(self, board: str, profile: str | None, n: int = 1) -> None:
        self.per_board[board] += n
        if profile:
            self.per_profile[profile] += n


class Planner:
    """Runs passes. Only the pass thread touches it (the dispatcher runs one pass at a time)."""

    def __init__(self, ctx: Context, reaper: Reaper, spawner: Spawner, only_boards: list[str] | None) -> None:
        self.ctx = ctx
        self.reaper = reaper
        self.spawner = spawner
        self.only_boards = only_boards
        self.locks = BoardLocks(ctx.home, enabled=ctx.sqlite)
        #: review runs: started, watched and judged (``.reviewing``)
        self.reviewing = Reviewing(ctx, spawner)
        #: when the promotion safety net last ran
        self.last_promote = 0.0
        #: boards skipped for invalid settings, with the reason last logged
        self.bad_settings: dict[str, str] = {}
        #: triage tasks of auto boards, decomposed on their own threads
        self.auto = AutoDecomposer(ctx)
        #: the supervisor: wakes judged and turned into supervision tasks, goal checks, the sweep
        self.supervising = Supervising(ctx)
        #: workers of spent budgets stopped, budget-blocked tasks released
        self.budgets = BudgetWatch(ctx)
        #: the inbox files of this host's running tasks (only those with new comments are read)
        self.inboxes = boardinbox.Inboxes()
        #: per board, the passes in a row that lost all they chose to other hosts' claims
        self.lost_streak: dict[str, int] = {}

    def run(self, max_spawn: int | None, dry_run: bool) -> tuple[PassReport, float | None]:
        """One pass. Returns its report and the earliest time something will need a pass."""
        return _Pass(self, time.time(), max_spawn, dry_run).run()


class _Pass:
    """One pass: its report, its deadlines and the load it found are its own."""

    def __init__(self, planner: Planner, now: float, max_spawn: int | None, dry_run: bool) -> None:
        self.planner = planner
        self.ctx = planner.ctx
        self.now = now
        self.max_spawn = max_spawn
        self.dry_run = dry_run
        self.report = PassReport(host=self.ctx.host, dry_run=dry_run)
        self.due: float | None = None
        self.load = Load()

    def _due(self, at: float | None) -> None:
        self.due = earliest(self.due, at)

    def run(self) -> tuple[PassReport, float | None]:
        # one read for what every pass needs: our own running tasks and others' lapsed claims
        snap = kd.pass_snapshot(self.ctx.db, self.now, host=self.ctx.host)
        held = self._hold([board_out(r) for r in snap.boards])
        if not held:
            return self.report, self.due
        slugs = {b["slug"] for b in held}
        for r in snap.load:  # every host's running tasks, for the caps
            if r["board"] in slugs:
                self.load.add(r["board"], r["assignee"], int(r["n"]))
        for w in self.ctx.workers.all():  # reap our children
            w.poll()
        self._check_running([r for r in snap.running if r["board"] in slugs],
                            [r for r in snap.reviewing if r["board"] in slugs])
        if not self.dry_run and snap.next_lapse is not None:  # another host's claim: look again as it lapses
            self._due(snap.next_lapse + 0.01)
        self._resume_timed(snap.timed_blocks, slugs)
        if not self.dry_run:
            self._due(self.planner.budgets.check(snap.running, slugs, self.now, snap.budgets_spent))
        self._promote(held)
        self._schedules(slugs, snap.timers_at)
        self._races(slugs, snap.races)
        if not self.dry_run:  # supervision tasks are created before spawning, started like any task
            self._due(self.planner.supervising.run(held, self.now, snap.supervision))
        self._spawn(held, {r["name"]: profile_out(r) for r in snap.profiles})
        if not self.dry_run:  # after spawning, and never waiting for the LLM
            self.planner.auto.schedule(held, self.now)
        if not self.dry_run:
            ends = [v for k, v in snap.cooldowns.items() if k in slugs]
            if ends:
                self._due(min(ends) + 0.01)
        return self.report, self.due

    def _resume_timed(self, ends: dict[str, float], slugs: set[str]) -> None:
        """Tasks blocked for a rate limit whose cool-down has ended go back to the queue (so this
        pass can start them); the next end still ahead is when a pass is due."""
        if self.dry_run:
            return
        due = sorted(b for b, at in ends.items() if b in slugs and at <= self.now)
        if due:
            try:
                self.report.resumed += len(kd.resume_timed_blocks(self.ctx.db, due, self.now))
            except AgentboardError as exc:
                log.warning("resuming rate-limited tasks failed: %s", exc)
            self._due(self.now + 1.0)  # a board may hold later ends too
        later = [at for b, at in ends.items() if b in slugs and at > self.now]
        if later:
            self._due(min(later) + 0.01)

    def _hold(self, boards: list[Row]) -> list[Row]:
        """The boards this pass acts on: the ones asked for whose settings are valid and whose
        lock it holds."""
        only = self.planner.only_boards
        held = []
        locked_out = False
        for b in boards:
            if only is not None and b["slug"] not in only:
                continue
            if not self._settings_ok(b):
                continue
            if self.dry_run or self.planner.locks.acquire(b["slug"]):
                held.append(b)
            else:
                self.report.skipped_boards.append(b["slug"])
                locked_out = True
        if locked_out:
            self.report.skipped_reason = "another dispatcher is running on this home for these boards"
        return held

    def _settings_ok(self, b: Row) -> bool:
        """False (the board skipped, in the report, logged once) when the board's stored settings
        are not valid, as an older version may have stored them: one bad board never stops the
        passes of the others."""
        slug = b["slug"]
        try:
            settings_schema.board_settings(b.get("settings") or {})
        except InvalidInput as exc:
            self.report.skipped_boards.append(slug)
            self.report.skipped.append(Skipped(f"board {slug!r} skipped: {exc.message}; fix it with "
                                               f"PATCH /api/boards/{slug} {{\"settings\": ...}}"))
            if self.planner.bad_settings.get(slug) != exc.message:
                self.planner.bad_settings[slug] = exc.message
                log.warning("board %s skipped until its settings are fixed: %s", slug, exc.message)
            return False
        self.planner.bad_settings.pop(slug, None)
        return True

    # -- running tasks ------------------------------------------------------------------------------

    def _check_running(self, rows: list[Row], reviewing: list[Row]) -> None:
        """Exits, expired claims, timeouts, stale runs; and the load they make (review runs
        included)."""
        ctx, reaper = self.ctx, self.planner.reaper
        current = {r["current_run_id"] for r in rows} | {int(r["id"]) for r in reviewing}
        # -- review runs: a run like any other for the caps
        for board, profile, here in self.planner.reviewing.load(reviewing):
            self.load.add(board, profile)
            self.load.local += int(here)
        if not self.dry_run:
            self.planner.reviewing.check(reviewing, self.now)
        exits: list[FoundExit] = []
        if not self.dry_run:
            exits, due = reaper.check_orphans(current, self.now)
            self._due(due)
        for r in rows:  # (their load is counted from the snapshot's per-board counts)
            # (every worker was reaped as the pass began: an exit since wakes the next pass)
            if ctx.local(r) and ctx.workers.takes_slot(r["current_run_id"], polled=True):
                self.load.local += 1
            if self.dry_run:
                continue
            try:
                check = reaper.check_running(r, self.now, polled=True)
            except AgentboardError as exc:
                log.info("run %s of %s: %s", r["current_run_id"], r["id"], exc)
                continue
            if check.seen is not None:
                self.report.count(check.seen)
            self._due(check.due)
            if check.exit is not None:
                exits.append(check.exit)
        for _ in range(reaper.flush_renewals()):  # the claims found due, in one statement
            self.report.count(Seen.EXTENDED)
        reaper.handle_exits(exits)
        if not self.dry_run and rows:  # comments written while they run reach .board/inbox.md
            try:
                self.planner.inboxes.sync(ctx.db, rows, ctx.local)
            except AgentboardError as exc:
                log.info("inbox files: %s", exc)
        # our own workers whose runs ended but which still run count against the caps
        self.load.local += ctx.workers.running(besides=current)

    def _promote(self, held: list[Row]) -> None:
        """The promotion safety net (every interval, not every pass)."""
        planner, interval = self.planner, float(self.ctx.settings.dispatch_interval)
        if not self.dry_run and self.now - planner.last_promote >= interval:
            planner.last_promote = self.now
            for b in held:
                try:
                    self.report.promoted += len(kd.promote_pending(self.ctx.db, b["slug"]))
                except AgentboardError as exc:
                    log.warning("promotion safety net on %s: %s", b["slug"], exc)
        self._due(planner.last_promote + interval)

    def _races(self, slugs: set[str], under_way: dict[str, list[str]]) -> None:
        """Settle the held boards' races under way (``dispatch.races``; read in the pass's
        snapshot): start ready ones, follow their attempts, stop, finish or pick them. Before
        spawning, so the attempts started here run in this pass."""
        if self.dry_run:
            return
        for slug in sorted(slugs & set(under_way)):
            try:
                races.settle(self.ctx.db, slug, ids=under_way[slug])
            except AgentboardError as exc:
                log.warning("races on %s: %s", slug, exc)

    def _schedules(self, slugs: set[str], timers_at: float | None) -> None:
        """Fire the held boards' due schedules and promote their tasks whose time has come, once
        the first of them has (``timers_at``, read in the pass's snapshot)."""
        if self.dry_run:
            return
        if timers_at is None or timers_at > self.now:
            self._due(timers_at)
            return
        s = self.ctx.settings
        try:
            fired, promoted, due = schedules.tick(self.ctx.db, sorted(slugs), now=self.now, host=self.ctx.host,
                                                  grace=s.schedule_grace, home=self.ctx.home)
        except AgentboardError as exc:
            log.warning("schedules: %s", exc)
            return
        self.report.promoted += len(promoted)
        for f in fired:
            log.info("schedule %s fired: %s", f["schedule"], f.get("tasks") or f.get("error") or "skipped")
        self._due(due)

    # -- spawning -----------------------------------------------------------------------------------

    def _spawn(self, held: list[Row], profiles: dict[str, Row]) -> None:
        room = self.ctx.settings.max_parallel - self.load.local
        if self.max_spawn is not None:
            room = min(room, int(self.max_spawn))
        if room <= 0 or self._memory_low(held):
            return
        failures: list[StartFailure] = []
        for b in held:
            if room <= 0:
                break
            taken, failed = self._spawn_board(b, profiles, room)
            room -= taken
            failures.extend(failed)
        if failures:
            self.report.spawn_failed.extend(self.planner.spawner.apply_failures(failures))

    def _memory_low(self, held: list[Row]) -> bool:
        mem = free_memory_mb()
        floor = self.ctx.settings.min_free_memory_mb
        if mem is None or not floor or mem >= floor:
            return False
        self.report.skipped.append(Skipped(f"free memory {mem} MB is below {floor} MB"))
        if not self.dry_run:
            for b in held:
                self.ctx.notes.note(("memory", b["slug"], int(self.now // 300)), b["slug"], None, "respawn_guarded",
                                    {"reason": f"not spawning: free memory {mem} MB is below the {floor} MB guard"})
        self._due(self.now + MEMORY_RETRY)
        return True

    def _spawn_board(self, b: Row, profiles: dict[str, Row], room: int) -> tuple[int, list[StartFailure]]:
        """Choose and start ready tasks of board ``b``. Returns how many it claimed (or, in a dry
        run, would start) and the workers that failed to start."""
        slug = b["slug"]
        cap = self._board_cap(b)
        if cap is not None:
            room = min(room, cap - self.load.per_board[slug])
        if room <= 0:
            return 0, []
        reviews = 0 if self.dry_run else self._start_reviews(b, profiles, room)
        room -= reviews
        # on PostgreSQL other hosts may claim from the same queue at once: candidates beyond the
        # room fill in for the ones they take (the caps hold for every candidate together)
        spare = room if not self.ctx.sqlite and not self.dry_run else 0
        chosen = self._choose(b, profiles, room, spare) if room > 0 else []
        if not chosen:
            return reviews, []
        if self.dry_run:  # what the claim's budget gate would block is said, not offered
            refused = self.ctx.db.read(lambda tx: kd.budget_refusals_in(tx, [c.task for c in chosen]))
            for c in chosen:
                if c.task["id"] in refused:
                    self.report.skipped.append(Skipped(f"a budget blocks it: {refused[c.task['id']]}", c.task["id"]))
            self.report.would_spawn.extend(
                WouldSpawn(slug, c.task["id"], c.task["title"], c.profile["name"], c.task["priority"])
                for c in chosen if c.task["id"] not in refused)
            return len(chosen) - len(refused), []
        res = self.planner.spawner.spawn_batch(b, chosen, want=room)
        # other hosts' claims wake no one, and a pass that claimed nothing wrote nothing to wake
        # this host: it looks again soon, or what is still ready waits once the winners are full
        streak = self.planner.lost_streak.pop(slug, 0)
        if len(res.claimed) < room and len(chosen) > len(res.claimed) + len(res.refused):
            streak = 0 if res.claimed else streak  # (fewer than room taken: every chosen looked at)
            self._due(time.time() + LOST_CLAIMS_RETRY * 2 ** min(streak, 6))
            if not res.claimed:
                self.planner.lost_streak[slug] = streak + 1
        self.report.budget_blocked.extend(Skipped(why, task) for task, why in res.refused.items())
        for c in res.claimed:
            self.load.add(slug, c.profile["name"])
        self.report.spawned.extend(res.spawned)
        for w in res.stale:  # reclaimed between the claim and the spawn: must not run
            self.planner.reaper.stop_later(w)
        return reviews + len(res.claimed), res.failures

    def _start_reviews(self, b: Row, profiles: dict[str, Row], room: int) -> int:
        """Review runs for tasks of ``b`` in review (they take room like any run)."""
        try:
            started = self.planner.reviewing.start(b, profiles, room, dict(self.load.per_profile))
        except AgentboardError as exc:
            log.warning("starting reviews on %s: %s", b["slug"], exc)
            return 0
        self._due(self.planner.reviewing.wake_at)  # a reviewer's rate limit ends then
        for s in started:
            self.load.add(s.board, s.profile)
        return len(started)

    def _board_cap(self, b: Row) -> int | None:
        cap = (b.get("settings") or {}).get("max_parallel")
        if b.get("default_workdir") and not self.dry_run and not is_git_target(b["default_workdir"]):
            return 1  # one shared, non-git checkout: no parallel writers
        return int(cap) if cap is not None else None

    def _choose(self, b: Row, profiles: dict[str, Row], room: int, spare: int = 0) -> list[Choice]:
        """Up to ``room`` ready tasks of ``b`` to start, by priority then age, and up to ``spare``
        more after them (to claim in place of those another host takes first). The queue is read
        a page at a time, as far as it takes to fill them: a profile found full (or missing, or
        disabled) is left out of the pages that follow, so the tasks of others behind a long
        queue of its own still start (up to :data:`READY_READ_AT_MOST` tasks read per board)."""
        slug, db = b["slug"], self.ctx.db
        want = room + spare
        chosen: list[Choice] = []
        taken: Counter[str] = Counter()
        now = time.time()
        target = b.get("default_workdir")
        busy: dict[str, tuple[str, int | None]] = {}
        if not self.dry_run:
            # a worker of ours still alive holds its folder even once its run closed (it reported
            # and has a grace to exit, or a person closed the run): its .board/ is not another's yet
            for w in self.ctx.workers.all():
                if not w.exited:
                    busy.setdefault(os.path.normpath(str(w.workspace)), (w.task_id, w.run_id))
        #: assignees left out of the next pages: their profile is full, missing or disabled
        skip: set[str] = set()
        after: Row | None = None
        limit, read = want + 8, 0
        while len(chosen) < want and read < READY_READ_AT_MOST:
            batch = kd.ready_batch(db, slug, limit, after=after, skip=sorted(skip))
            read += len(batch)
            if not batch:
                break
            self._choose_from(slug, b, batch, profiles, want, chosen, taken, busy, skip, target, now)
            if len(batch) < limit:
                break
            after, limit = batch[-1], min(limit * 2, READY_READ_AT_MOST)
        return chosen

    def _choose_from(self, slug: str, b: Row, batch: list[Row], profiles: dict[str, Row], want: int,
                     chosen: list[Choice], taken: Counter[str], busy: dict[str, tuple[str, int | None]],
                     skip: set[str], target: str | None, now: float) -> None:
        """One page of the ready queue (see :meth:`_choose`): append what may start to ``chosen``."""
        db = self.ctx.db
        prev = kd.last_runs(db, [c["last_run_id"] for c in batch if c.get("last_run_id")])
        shared_target = (os.path.normpath(str(target)) if target and not self.dry_run
                         and any((c.get("workspace_kind") or "scratch") == "scratch" for c in batch)
                         and not is_git_target(target) else None)
        folders = {c["id"]: f for c in batch if (f := _shared_folder(c, shared_target)) is not None}
        unseen = sorted({f for f in folders.values() if f not in busy})
        if unseen:
            for where, who in kd.folders_in_use(db, unseen).items():
                busy.setdefault(where, who)
        for c in batch:
            if len(chosen) >= want:
                break
            p = self._profile_of(slug, c, profiles)
            if p is None:
                if c["assignee"]:
                    skip.add(c["assignee"])
                continue
            limit = p.get("max_concurrency")
            if limit and self.load.per_profile[p["name"]] + taken[p["name"]] >= int(limit):
                if c["assignee"] == p["name"]:
                    skip.add(p["name"])
                continue
            if self._guarded(slug, c, profiles, now):
                continue
            last = prev.get(int(c["last_run_id"])) if c.get("last_run_id") else None
            if last is not None and not self.dry_run and self.planner.reaper.previous_worker_alive(c, last):
                self.report.skipped.append(Skipped("stopping the worker of its previous run first", c["id"]))
                continue
            folder = folders.get(c["id"])
            if folder is not None:
                holder = busy.get(folder)
                if holder is not None and holder[0] != c["id"]:
                    run = f" (run {holder[1]})" if holder[1] is not None else ""
                    self._skip(("busy", c["id"], folder, holder[0]), slug, c["id"], "workspace_busy",
                               f"its workspace dir:{folder} is in use by task {holder[0]}{run}: a shared folder "
                               "runs one worker at a time, so each run has the folder's .board/ to itself")
                    continue
                busy[folder] = (c["id"], None)
            chosen.append(Choice(c, p))
            taken[p["name"]] += 1

    def _profile_of(self, slug: str, c: Row, profiles: dict[str, Row]) -> Row | None:
        """The enabled profile that runs ready task ``c``; None (and a skip) when there is none."""
        name = c["assignee"] or c.get("default_assignee")
        if not name:
            self._skip(("noassignee", c["id"]), slug, c["id"], "profile_skipped",
                       "no assignee and no default_assignee is configured")
            return None
        p = profiles.get(name)
        if p is None:
            self._skip(("noprofile", c["id"], name), slug, c["id"], "profile_skipped",
                       f"profile {name!r} does not exist; add it with `agentboard profiles add {name} --command ...` "
                       "or assign another profile")
            return None
        if not p["enabled"]:
            self._skip(("disabled", c["id"], name), slug, c["id"], "profile_skipped", f"profile {name!r} is disabled")
            return None
        return p

    def _guarded(self, slug: str, c: Row, profiles: dict[str, Row], now: float) -> bool:
        """A respawn guard holds ready task ``c`` back (see :func:`.breaker.guard`)."""
        db = self.ctx.db
        why = breaker.guard(
            c, profiles=set(profiles),
            comments=lambda tid, since: kd.recent_comments(db, tid, since),
            reopened=lambda tid: kd.last_event_of(db, tid, "reopened"), now=now)
        if why:
            self._skip(("guard", c["id"], why[:40]), slug, c["id"], "respawn_guarded", why)
            return True
        return False

    def _skip(self, key: tuple[str, ...], board: str, task_id: str, kind: str, reason: str) -> None:
        """A ready task not started: in the report, and (once per key) as an event."""
        self.report.skipped.append(Skipped(reason, task_id))
        if not self.dry_run:
            self.ctx.notes.note(key, board, task_id, kind, {"reason": reason})


def _shared_folder(c: Row, shared_target: str | None) -> str | None:
    """The shared folder ready task ``c`` would run in: its ``dir:`` workspace, or the board's
    non-git target directory (``shared_target``) for a scratch task that is not the supervisor's;
    None for a per-task workspace (scratch, worktree)."""
    kind = c.get("workspace_kind") or "scratch"
    if kind == "dir" and c.get("workspace_path"):
        return os.path.normpath(str(c["workspace_path"]))
    if kind == "scratch" and shared_target and c.get("purpose") != "supervision":
        return shared_target
    return None
