"""Spawning: from chosen ready tasks to running, recorded workers.

One path starts every worker process, a task's own worker and a repair attempt alike:

1. **claim** (a task's own worker): the chosen tasks of a board in the queue's order,
   :data:`FIRST_CLAIM` first, then :data:`CLAIM_BATCH`, then twice the group before up to
   :data:`CLAIM_BATCH_MAX` (2, 8, 16, 32, 64, 64, ...), each group in one transaction
   (``kernel.dispatching.claim_batch``, which blocks those a budget cannot afford) and taken
   through steps 2–5 before the next is claimed: the first workers of a big pass start (and are
   recorded) at once, not after all of them (each later group's starts overlap the claim of the
   one after it). A claim takes the first still-ready tasks among the next few chosen, passing
   over those another host is claiming at that moment (``SKIP LOCKED``) or took already; on
   PostgreSQL a pass chooses up to twice its room, so the ones after fill in and a host fills
   its room in one pass while other hosts claim from the same queue;
2. **prepare** (a task's own worker): the workspace and the ``.board/`` files
   (``protocol.lifecycle.prepare``; what they need is read for the whole group by its claim,
   ``kernel.dispatching.claim_to_start``, which also issues the group's run tokens). A repair
   attempt reuses its run's workspace and gets the repair prompt instead;
3. **launch**: the run token, the environment and the command line (:mod:`.adapters`);
4. **start**: the process (:func:`.spawn.start`), watched so that its exit wakes the dispatcher;
5. **record**: the group's pids in one transaction as soon as its processes have started
   (``kernel.dispatching.record_spawns``); a run reclaimed meanwhile comes back as stale, its
   worker to be stopped.

Preparing and starting workers is mostly waiting, so a batch runs it on a few threads (with no
database connection); they return what they started, and the pass thread registers the workers.
While they start one group, the pass thread claims the next, then records the first.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..domain.errors import AgentboardError
from ..domain.worker_env import WorkerEnv
from ..kernel import boards as kboards
from ..kernel import branches as kbranches
from ..kernel import dispatching as kd
from ..kernel import runs as kr
from ..kernel import tasks as ktasks
from ..kernel.worker_protocol import PrepareInputs
from ..observe import logs, metrics
from ..protocol import boarddir, lifecycle, verify
from ..protocol import inbox as boardinbox
from ..store.engine import Row
from . import adapters, branches, breaker, diffs, gitutil, isolation, spawn, workspaces
from .report import Spawned, SpawnFailed
from .runtime import Context, Pool

log = logging.getLogger("agentboard.dispatch")

#: threads preparing the workspaces and .board/ files of the tasks claimed in one pass
PREPARE_THREADS = 8
#: the first claim of a pass is small: its workers start and are recorded soonest
FIRST_CLAIM = 2
#: the second claim's size; each claim after it takes twice the one before, up to
#: :data:`CLAIM_BATCH_MAX`: a claim, its reads and its record cost about the same for 8 tasks as
#: for 32, so a big pass spends less of the machine per worker in fewer, larger groups
CLAIM_BATCH = 8
CLAIM_BATCH_MAX = 64
#: a claim of n tasks looks at the next n * CLAIM_WINDOW candidates (others may take some)
CLAIM_WINDOW = 4
#: seconds between SIGTERM and SIGKILL when stopping a worker
STOP_GRACE = 5.0


class SpawnError(Exception):
    """A worker could not be started. ``str()`` is the text shown on the task; ``cause`` the
    error underneath."""

    def __init__(self, text: str, cause: BaseException) -> None:
        super().__init__(text)
        self.cause = cause


@dataclass(frozen=True)
class Choice:
    """A ready task chosen to start, with the profile that runs it."""

    task: Row
    profile: Row


@dataclass(frozen=True)
class Attempt:
    """One worker to start for a run: the task's own (``number`` 0) or its N-th repair attempt."""

    board: str
    task: Row
    profile: Row
    run_id: int
    workspace: workspaces.Workspace
    number: int = 0
    #: a repair attempt is stopped after this many seconds
    deadline_seconds: float | None = None
    #: the OS user and sandbox the worker runs in (the profile's ``isolation``)
    confinement: isolation.Confinement = isolation.NONE
    #: a review run: a reviewer profile judging the task's work (``.reviewing``)
    review: bool = False
    #: the board (its target directory and settings name the project's virtualenv)
    board_row: Mapping[str, Any] | None = None
    #: the one reminder of a worker that stopped without reporting (a nudge), not a repair
    reminder: bool = False

    @property
    def task_id(self) -> str:
        return str(self.task["id"])


@dataclass(frozen=True)
class Launch:
    """An attempt ready to start: its command line and environment."""

    attempt: Attempt
    command: adapters.Launch
    env: dict[str, str]


@dataclass(frozen=True)
class Started:
    launch: Launch
    worker: spawn.Worker


@dataclass(frozen=True)
class StartFailure:
    """A claimed task whose worker could not be started (its run is still open)."""

    board: str
    task_id: str
    run_id: int
    error: str
    #: a block kind: ``merge_conflict`` (the parents' branches conflict) or ``needs_input`` (the
    #: board's base branch is missing): the task is blocked, not retried
    kind: str | None = None


@dataclass(frozen=True)
class BatchResult:
    """What spawning one board's chosen tasks did; ``refused``: the chosen tasks a budget blocked
    at their claim (task id → why)."""

    #: the chosen tasks this dispatcher claimed (others were taken meanwhile)
    claimed: list[Choice]
    spawned: list[Spawned]
    failures: list[StartFailure]
    #: workers started whose run was reclaimed before it was recorded: they must be stopped
    stale: list[spawn.Worker]
    refused: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Group:
    """One claim's tasks on their way to running: what was claimed, each with its run, their
    run tokens, what their files need, and the tasks a budget blocked instead (id → why)."""

    claimed: list[Choice]
    todo: list[tuple[Choice, int]]
    tokens: dict[int, str]
    loaded: dict[str, PrepareInputs | AgentboardError]
    refused: dict[str, str]


def _merge(out: BatchResult, res: BatchResult) -> None:
    out.claimed.extend(res.claimed)
    out.spawned.extend(res.spawned)
    out.failures.extend(res.failures)
    out.stale.extend(res.stale)


class Spawner:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        #: git worktrees and excludes of one repository are prepared one at a time
        self._git_lock = threading.Lock()
        #: its threads end once idle (:class:`.runtime.Pool`)
        self._prep_pool = Pool(PREPARE_THREADS, "agentboard-prepare")
        #: optional, ``on_spawn(board, task_id, run_id, pid, at)`` once a task's own worker starts
        self.on_spawn: Callable[[str, str, int, int, float], None] | None = None

    def drain(self) -> None:
        """Wait for the prepare threads' work."""
        self._prep_pool.drain()

    # -- a batch of first attempts ---------------------------------------------------------------

    def spawn_batch(self, board: Row, chosen: list[Choice], want: int | None = None) -> BatchResult:
        """Claim up to ``want`` (default: all) of the chosen ready tasks of ``board`` in their
        order, start their workers and record them, a group at a time (step 1 at the top): the
        chosen beyond ``want`` fill in for those another host takes first. While one group's
        workers start on the prepare threads, this thread claims the next, then records the first."""
        want = len(chosen) if want is None else min(want, len(chosen))
        left = list(chosen)
        out = BatchResult([], [], [], [])
        taken = 0
        size = FIRST_CLAIM
        first = True
        pending: tuple[_Group, list[Future[Started | SpawnError]]] | None = None
        while left and taken < want:
            n = min(size, want - taken)
            window = left[:n * CLAIM_WINDOW]
            try:
                group = self._claim_group(board, window, n)
            except BaseException:  # the workers started already are registered and recorded first
                if pending is not None:
                    self._finish_group(board, pending[0], [f.result() for f in pending[1]])
                raise
            taken += len(group.claimed)
            out.refused.update(group.refused)
            got = {c.task["id"] for c in group.claimed}
            if len(got) < n:  # nothing more to take in this window
                left = left[len(window):]
            else:  # the ones before the last claimed were taken by others (or not claimable)
                last = max(i for i, c in enumerate(window) if c.task["id"] in got)
                left = left[last + 1:]
            size = CLAIM_BATCH if first else min(size * 2, CLAIM_BATCH_MAX)
            if first or (pending is None and not (left and taken < want)):
                # the pass's first group is started and recorded before the next claim: its
                # workers are seen running at once (the next claims overlap the starts after it)
                _merge(out, self._finish_group(board, group, self._start_all(board, group)))
                first = False
                continue
            started = [self._prep_pool.submit(self._start_one, board, group, item) for item in group.todo]
            if pending is not None:
                _merge(out, self._finish_group(board, pending[0], [f.result() for f in pending[1]]))
            pending = (group, started)
        if pending is not None:
            _merge(out, self._finish_group(board, pending[0], [f.result() for f in pending[1]]))
        return out

    def _claim_group(self, board: Row, chosen: list[Choice], limit: int | None = None) -> _Group:
        """Claim one group of chosen tasks (at most ``limit`` of them) in one transaction; issue
        their run tokens and read what their files need."""
        ctx, slug = self.ctx, board["slug"]
        # tokens kept in the board's own database are issued in the claim's transaction, with the
        # reads the workers' files need (other factories issue each worker's as it starts)
        stored = bool(getattr(ctx.token_factory, "stored", False))
        got = kd.claim_to_start(ctx.db, slug, [c.task["id"] for c in chosen], ttl=ctx.settings.claim_ttl,
                                host=ctx.host, limit=limit, tokens=stored, wiki_on=ctx.settings.wiki_context)
        by_id = {c.task["id"]: c for c in chosen}
        todo = [(Choice({**by_id[cl["id"]].task, **(cl.get("task") or {})}, by_id[cl["id"]].profile),
                 int(cl["run_id"])) for cl in got.claimed]
        return _Group([by_id[cl["id"]] for cl in got.claimed], todo, got.tokens, got.inputs, got.refused)

    def _start_one(self, board: Row, group: _Group, item: tuple[Choice, int]) -> Started | SpawnError:
        """Prepare and start one claimed task's worker (on any thread)."""
        choice, run_id = item
        try:
            return self.start(self.prepare(board, choice, run_id, group.loaded.get(choice.task["id"]),
                                           token=group.tokens.get(run_id)))
        except SpawnError as exc:
            return exc

    def _start_all(self, board: Row, group: _Group) -> list[Started | SpawnError]:
        """Writing the files and starting the processes is mostly waiting: several at once."""
        if len(group.todo) > 1:
            return self._prep_pool.map(lambda item: self._start_one(board, group, item), group.todo)
        return [self._start_one(board, group, t) for t in group.todo]

    def _finish_group(self, board: Row, group: _Group, results: list[Started | SpawnError]) -> BatchResult:
        """Register the group's workers that started and record them in one transaction."""
        slug = board["slug"]
        started: list[Started] = []
        failures: list[StartFailure] = []
        for (choice, run_id), res in zip(group.todo, results, strict=True):
            if isinstance(res, SpawnError):
                kind = ("merge_conflict" if isinstance(res.cause, branches.MergeConflict)
                        else "needs_input" if isinstance(res.cause, branches.BaseMissing) else None)
                failures.append(StartFailure(slug, choice.task["id"], run_id, str(res), kind))
            else:
                self.ctx.workers.add(res.worker)
                started.append(res)
                if (at := res.launch.attempt).number == 0 and not at.review:  # here: one thread, not each starter
                    metrics.spawned(at.profile.get("name"), at.task.get("updated_at"), res.worker.started)
        spawned, stale = self.record(slug, started)
        with logs.batch():
            for s in spawned:
                logs.info(log, "spawned %s (%s) run %s pid %s in %s", s.task, s.profile, s.run_id, s.pid, s.workspace,
                          extra={"board": s.board, "task": s.task, "run": s.run_id})
        return BatchResult(group.claimed, spawned, failures, stale)

    def prepare(self, board: Row, choice: Choice, run_id: int,
                loaded: PrepareInputs | AgentboardError | None = None, *, token: str | None = None) -> Launch:
        """The workspace and ``.board/`` files of a task's own worker, then its launch.

        ``loaded``: this task's entry of the claim's reads (``ClaimedToStart.inputs``), if read
        already; ``token``: the run's token, if issued already (else it is asked for here)."""
        slug, task = board["slug"], choice.task
        confinement = self._confinement(choice.profile)
        ws = self._workspace(board, task, confinement)
        if ws.kind == "scratch" and ws.created:
            self._tip_scratch(slug, task["id"], ws.path)
        try:
            if token is None:
                token = self._token(slug, task["id"], run_id)
            info = {"workspace_kind": ws.kind, "workspace_path": str(ws.path), "branch_name": ws.branch,
                    "base_branch": ws.base}
            at = Attempt(slug, task, choice.profile, run_id, ws, confinement=confinement, board_row=board)
            identity = self.identity(at, token)
            prompt_file = Path(lifecycle.prepare(self.ctx.db, self.ctx.settings, slug, task, run_id, ws.path,
                                                 identity=identity, loaded=loaded, workspace_info=info,
                                                 enrich=diffs.with_new_branch if ws.new_branch else diffs.with_git,
                                                 shell_verbs=adapters.shell_verbs(choice.profile)))
        except Exception as exc:
            raise SpawnError(f"preparing the worker's .board/ files failed: {type(exc).__name__}: {exc}", exc) from exc
        return self.launch(at, prompt_file, token, identity)

    def _confinement(self, profile: Row) -> isolation.Confinement:
        """How the profile's workers are isolated here, or :class:`SpawnError` when that is not
        available (never a worker with less isolation than asked for)."""
        try:
            return isolation.resolve(profile.get("isolation"), self.ctx.settings)
        except isolation.IsolationError as exc:
            raise SpawnError(f"profile {profile.get('name')!r}: {exc}", exc) from exc

    def _workspace(self, board: Row, task: Row, confinement: isolation.Confinement) -> workspaces.Workspace:
        foreign = confinement.separate_user
        try:
            plan = workspaces.plan(self.ctx.home, board, task, isolated=foreign)
            if plan.kind == "scratch":
                return workspaces.prepare(plan, foreign=foreign)
            base = self._base(board, task, plan) if plan.kind == "worktree" else None
            with self._git_lock:  # a confined worker commits in a task repository of its own
                ws = workspaces.prepare(plan, foreign=foreign, base=base, own_repo=confinement.confines)
            if ws.kind == "worktree" and ws.base is None:
                ws.base = task.get("base_branch")
            return ws
        except (branches.MergeConflict, branches.BaseMissing) as exc:
            raise SpawnError(str(exc), exc) from exc
        except workspaces.WorkspaceError as exc:
            raise SpawnError(f"workspace: {exc}", exc) from exc
        except AgentboardError as exc:
            raise SpawnError(str(exc), exc) from exc

    def _base(self, board: Row, task: Row, plan: workspaces.Workspace) -> Callable[[], tuple[str, str]]:
        """How a new worktree branch finds its base (called under the git lock, only when the
        branch does not exist yet): its parents' branches, else the board's base branch."""
        def resolve() -> tuple[str, str]:
            assert plan.repo is not None
            parents = kbranches.parent_branches(self.ctx.db, board["slug"], task["id"])
            try:
                b = branches.resolve(plan.repo, task["id"], board.get("settings") or {}, parents)
            except gitutil.GitError as exc:
                raise workspaces.WorkspaceError(str(exc)) from None
            return b.branch, b.source
        return resolve

    # -- verification ------------------------------------------------------------------------------

    def verifying(self, board: str, task_id: str, run_id: int, profile: Row, workspace: Path) -> verify.Setup:
        """How the checks of a run of ``profile`` run: under the profile's confinement (its
        sandbox showing what the worker's sandbox shows, as its user) with the worker's
        environment without its run token — or, when that confinement is not available here, not
        at all (``unavailable`` says why)."""
        settings = self.ctx.settings
        try:
            task = kd.task(self.ctx.db, board, task_id)
            board_row = kboards.get(self.ctx.db, board)
        except AgentboardError as exc:
            return verify.Setup(None, None, f"the task cannot be read: {exc}")
        identity = WorkerEnv.for_run(board, task, run_id, workspace, profile=profile.get("name"),
                                     branch=task.get("branch_name"))  # no API, no run token
        env = spawn.worker_env(settings, identity, profile=profile, board_row=board_row)
        try:
            conf = isolation.resolve(profile.get("isolation"), settings)
        except isolation.IsolationError as exc:
            return verify.Setup(None, env, f"profile {profile.get('name')!r}: {exc}")
        if conf.bwrap is not None:
            extra = [workspaces.borrowed_objects(workspace)] if workspaces.is_task_repo(workspace) else []
            conf = conf.showing(isolation.needed_paths(["/bin/sh"], env, extra=extra))
        return verify.Setup(conf, env, cgroup=self.ctx.cgroups.folder(run_id))

    # -- a repair attempt ---------------------------------------------------------------------------

    def respawn(self, run: Row, profile: Row, workspace: Path, prompt_file: Path, number: int,
                deadline_seconds: float | None) -> None:
        """Start repair attempt ``number`` of the running task ``run`` (a row of
        ``kernel.dispatching.PassSnapshot.running``) in its worker's workspace, with the repair
        prompt: the same launch, start and record as a first attempt. Raises :class:`SpawnError`."""
        slug, task_id, run_id = run["board"], run["id"], int(run["current_run_id"])
        try:
            task = kd.task(self.ctx.db, slug, task_id)
            board_row = kboards.get(self.ctx.db, slug)
            token = self._token(slug, task_id, run_id)
        except AgentboardError as exc:
            raise SpawnError(str(exc), exc) from exc
        ws = workspaces.Workspace(task.get("workspace_kind") or "scratch", workspace, branch=task.get("branch_name"))
        deadline = deadline_seconds or self.ctx.settings.repair_deadline
        attempt = Attempt(slug, task, profile, run_id, ws, number, deadline, self._confinement(profile),
                          board_row=board_row, reminder=prompt_file.name == boardinbox.NUDGE_PROMPT_FILE)
        started = self.start(self.launch(attempt, prompt_file, token))
        self.ctx.workers.add(started.worker)
        _spawned, stale = self.record(slug, [started])
        for w in stale:  # reclaimed meanwhile
            self.ctx.stop_worker(w.run_id, w.pid, grace=STOP_GRACE, proc=w.proc)

    # -- a review run ------------------------------------------------------------------------------

    def spawn_review(self, board: Row, task: Row, profile: Row, run_id: int,
                     write_files: Callable[[Path], Path]) -> spawn.Worker:
        """Start reviewer ``profile`` for review run ``run_id`` in the task's workspace:
        ``write_files(workspace)`` writes the review context and returns the prompt file; then the
        same launch and start as any worker, recorded on the review run. Raises
        :class:`SpawnError`; a run closed meanwhile stops the worker and raises too."""
        slug = board["slug"]
        confinement = self._confinement(profile)
        ws = self._workspace(board, task, confinement)
        try:
            token = self._token(slug, task["id"], run_id)
            prompt_file = write_files(ws.path)
            at = Attempt(slug, task, profile, run_id, ws, confinement=confinement, review=True, board_row=board)
            boarddir.write_mcp_json(ws.path, self.identity(at, token).to_env(), keep_others=False)
        except Exception as exc:
            raise SpawnError(f"preparing the review context failed: {type(exc).__name__}: {exc}", exc) from exc
        ln = self.launch(at, prompt_file, token)
        w = self.start(ln).worker
        if not kd.record_review_spawn(self.ctx.db, slug, task["id"], run_id, pid=w.pid, host=self.ctx.host,
                                      log_path=str(w.log_path), workspace=str(w.workspace), extra=_event_extra(ln)):
            self.ctx.stop_worker(run_id, w.pid, grace=STOP_GRACE, proc=w.proc)
            raise SpawnError(f"review run {run_id} was closed before its reviewer started", RuntimeError("closed"))
        self.ctx.workers.add(w)
        log.info("spawned reviewer %s for %s run %s pid %s in %s", profile["name"], task["id"], run_id, w.pid,
                 w.workspace)
        return w

    # -- the shared steps -------------------------------------------------------------------------

    def _token(self, board: str, task_id: str, run_id: int) -> str | None:
        factory = self.ctx.token_factory
        return factory(board, task_id, run_id) if factory is not None else None

    def identity(self, at: Attempt, token: str | None) -> WorkerEnv:
        """Who the worker of ``at`` is: the one identity its process environment and its MCP
        server's ``.mcp.json`` both carry (a reviewer answers its review run: ``review_run``)."""
        return WorkerEnv.for_run(at.board, at.task, at.run_id, at.workspace.path, profile=at.profile.get("name"),
                                 branch=at.workspace.branch, api_url=self.ctx.api_url, token=token,
                                 review_run=at.review)

    def launch(self, at: Attempt, prompt_file: Path, token: str | None, identity: WorkerEnv | None = None) -> Launch:
        """The environment and command line of an attempt (a reviewer's: :func:`.adapters.build`)."""
        identity = identity or self.identity(at, token)  # (the caller's, when it has it)
        env = spawn.worker_env(self.ctx.settings, identity, profile=at.profile, board_row=at.board_row)
        try:
            command = adapters.build(at.profile, task_id=at.task_id, run_id=at.run_id, workspace=at.workspace.path,
                                     prompt_file=prompt_file, board=at.board, path_env=env.get("PATH"),
                                     worker_uid=at.confinement.uid, model=None if at.review else at.task.get("model"),
                                     review=at.review, mcp_env=identity.to_env() if at.review else None)
        except adapters.AdapterError as exc:
            raise SpawnError(f"profile {at.profile.get('name')!r}: {exc}", exc) from exc
        env.update({**command.env, **(workspaces.reviewer_git_env(at.workspace) if at.review else {})})
        return Launch(at, command, env)

    def start(self, ln: Launch) -> Started:
        """Start the process (it is watched: its exit wakes the dispatcher)."""
        at, home = ln.attempt, self.ctx.home
        logp = spawn.log_path(home, at.board, at.task_id)
        conf = at.confinement
        try:
            if conf.uid is not None and conf.gid is not None:
                workspaces.hand_over(at.workspace, conf.uid, conf.gid)
            task_repo = at.workspace.kind == "worktree" and workspaces.is_task_repo(at.workspace.path)
            proc, offset = spawn.start(
                ln.command.argv, cwd=at.workspace.path, env=ln.env, log=logp,
                log_max_bytes=self.ctx.settings.log_max_bytes, header=_header(ln),
                exit_file=spawn.exit_path(home, at.board, at.task_id, at.run_id) if self.ctx.one_shot else None,
                confinement=conf, show=[workspaces.borrowed_objects(at.workspace.path)] if task_repo else (),
                cgroup=self.ctx.cgroups.prepare(at.run_id))
        except (workspaces.WorkspaceError, isolation.IsolationError) as exc:
            raise SpawnError(f"profile {at.profile.get('name')!r}: {exc}", exc) from exc
        except OSError as exc:
            raise SpawnError(f"profile {at.profile.get('name')!r}: cannot start {ln.command.argv[0]!r}: "
                             f"{exc.strerror or exc}", exc) from exc
        deadline = time.time() + at.deadline_seconds if at.deadline_seconds is not None else None
        w = spawn.Worker(at.board, at.task_id, at.run_id, proc, at.profile, at.workspace.path, logp, offset,
                         attempt=at.number, deadline=deadline,
                         collect=self._collector(at) if task_repo and at.workspace.branch and not at.review else None)
        if at.number == 0 and not at.review and self.on_spawn is not None:
            self.on_spawn(at.board, at.task_id, at.run_id, proc.pid, w.started)
        self._watch(w)
        return Started(ln, w)

    def _collector(self, at: Attempt) -> Callable[[], None]:
        """What fetches the branch of ``at``'s task repository back into the target once its
        worker exited (``workspaces.collect``): ``git upload-pack`` in the worker's confinement,
        with an empty environment, as the worker's side of the fetch."""
        path, branch = at.workspace.path, str(at.workspace.branch)
        conf = at.confinement.showing(isolation.needed_paths([], {}, extra=[workspaces.borrowed_objects(path)]))
        env_bin = shutil.which("env") or "/usr/bin/env"
        argv = [env_bin, "-i", f"PATH={os.defpath}", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1",
                "GIT_CONFIG_GLOBAL=/dev/null", "git", "upload-pack"]

        def collect() -> None:
            try:
                with self._git_lock:
                    workspaces.collect(path, branch, conf.command(argv, path, switch_in_argv=True),
                                       force=branch == f"ab/{at.task_id}")
            except (workspaces.WorkspaceError, isolation.IsolationError) as exc:
                log.warning("run %s of %s: %s", at.run_id, at.task_id, exc)
        return collect

    def record(self, board: str, started: list[Started]) -> tuple[list[Spawned], list[spawn.Worker]]:
        """Record the pids of workers started on ``board`` (one transaction). Returns the
        spawned ones and the workers whose run is no longer current (to be stopped)."""
        if not started:
            return [], []
        items = [{"task_id": s.worker.task_id, "run_id": s.worker.run_id, "pid": s.worker.pid,
                  "host": self.ctx.host, "log_path": str(s.worker.log_path), "workspace": str(s.worker.workspace),
                  "workspace_kind": s.launch.attempt.workspace.kind if not s.launch.attempt.number else None,
                  "branch": s.launch.attempt.workspace.branch, "base_branch": s.launch.attempt.workspace.base,
                  "extra": _event_extra(s.launch), "started": s.worker.started} for s in started]
        stale_ids = {int(it["run_id"]) for it in kd.record_spawns(self.ctx.db, board, items)}
        spawned = [Spawned(board, s.worker.task_id, s.worker.run_id, s.worker.pid, s.launch.attempt.profile["name"],
                           str(s.worker.workspace)) for s in started if s.worker.run_id not in stale_ids]
        return spawned, [s.worker for s in started if s.worker.run_id in stale_ids]

    def _watch(self, w: spawn.Worker) -> None:
        """Wake the dispatcher the moment a worker exits (one watcher thread for all of them),
        and have the guard end the worker's group if the dispatcher dies (``Context.track``)."""
        self.ctx.track(w)

    def _tip_scratch(self, board: str, task_id: str, path: Path) -> None:
        marker = self.ctx.home / ".tip_scratch_workspace"
        if marker.exists():
            return
        try:
            marker.touch(exist_ok=False)
        except OSError:
            return
        self.ctx.notes.note(("tip",), board, task_id, "tip_scratch_workspace", {
            "workspace": str(path),
            "tip": "scratch workspaces are removed by `agentboard gc` once a task is done; to keep outputs, "
                   "use --workspace dir:<absolute path> or worktree, or attach files to the task",
        })

    # -- failures ------------------------------------------------------------------------------------

    def apply_failures(self, failures: list[StartFailure]) -> list[SpawnFailed]:
        """Record the workers that could not start: three or more failing the same way in one
        pass block their tasks at once (systemic); the others count as one failure each."""
        out: list[SpawnFailed] = []
        metrics.spawn_failed([f.board for f in failures])
        for f in [f for f in failures if f.kind]:  # not worth a retry: a person decides
            try:
                ktasks.block(self.ctx.db, f.board, f.task_id, f.error, kind=f.kind or "needs_input", run_id=f.run_id,
                             actor="dispatcher")
            except AgentboardError:
                pass
            out.append(SpawnFailed(f.task_id, f.error, False))
        failures = [f for f in failures if not f.kind]
        systemic, single = breaker.systemic_groups([(f, f.error) for f in failures])
        for f, err in systemic:
            reason = (f"systemic failure: {len(systemic)} tasks failed to start in one pass with the "
                      f"same error: {err}")
            try:
                kr.give_up(self.ctx.db, f.board, f.task_id, reason, run_id=f.run_id)
            except AgentboardError:
                pass
            out.append(SpawnFailed(f.task_id, err, True))
        for f, err in single:
            try:
                kr.fail(self.ctx.db, f.board, f.task_id, "spawn_failed", run_id=f.run_id, error=err)
            except AgentboardError:
                pass
            out.append(SpawnFailed(f.task_id, err, False))
        return out


def _header(ln: Launch) -> str:
    """The line a run's output starts with in the task's log."""
    at = ln.attempt
    if at.reminder:
        return f"=== run {at.run_id} of {at.task_id}: reminded to report ==="
    if at.number:
        return f"=== run {at.run_id} of {at.task_id}: repair attempt {at.number} ==="
    if at.review:
        return (f"=== review run {at.run_id} of {at.task_id} by {at.profile['name']} ({ln.command.adapter}) at "
                f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} ===")
    return (f"=== run {at.run_id} of {at.task_id} by {at.profile['name']} ({ln.command.adapter}) at "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} ===")


def _event_extra(ln: Launch) -> dict[str, Any]:
    """What the ``spawned`` event adds to pid, host, log and workspace."""
    at = ln.attempt
    if at.number:
        return {"repair_attempt": at.number, "profile": at.profile.get("name")}
    extra = {"profile": at.profile["name"], "adapter": ln.command.adapter, "branch": at.workspace.branch,
             "workspace_kind": at.workspace.kind}
    if at.workspace.base:
        extra.update(base=at.workspace.base, base_source=at.workspace.base_source)
    return extra
