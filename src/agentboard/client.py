"""The Python API: ``agentboard.connect(url_or_home)`` → :class:`Client` → :class:`Board`.

A thin, typed layer over the kernel functions, for scripts, tests and the benchmarks. Every
method is one kernel call (one transaction); rows come back as plain dicts::

    import agentboard
    ab = agentboard.connect("/tmp/myhome")
    board = ab.board()                      # the default board
    t = board.create("write the report", assignee="writer")
    run = board.claim(t["id"])
    board.complete(t["id"], summary="done", run_id=run["run_id"])

The settings of the home (``config.toml``, ``AGENTBOARD_*``, the keyword overrides given to
:func:`connect`) travel with the database: ``ab.settings is ab.db.settings``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Unpack

from . import config as _config
from .domain import model
from .domain.errors import InvalidInput
from .domain.task_fields import NewTaskFields
from .kernel import (
    attachments,
    boards,
    comments,
    goals,
    links,
    maintenance,
    profiles,
    queries,
    runs,
    tasks,
)
from .kernel.rows import (
    BoardRow,
    BoardStats,
    BoardView,
    EventRow,
    GoalRow,
    RunRow,
    TaskCard,
    TaskDetail,
)
from .store.engine import Database, Row
from .store.migrate import open_database

#: several rows (spelled once here: inside :class:`Board`, ``list`` is a method)
Rows = list[Row]
TaskCards = list[TaskCard]
RunRows = list[RunRow]
EventRows = list[EventRow]
GoalRows = list[GoalRow]
BoardRows = list[BoardRow]


class Board:
    """The verbs and read models of one board (see ``docs/kernel.md`` for what each verb may do)."""

    def __init__(self, client: Client, slug: str) -> None:
        self.client = client
        self.db = client.db
        self.slug = slug
        self._seen = False

    def _existing(self) -> str:
        """The board's slug once it is known to exist: a read of a board that does not exist
        raises ``NotFound`` (a mistyped slug never reads as an empty board); writes check it in
        their own transaction."""
        if not self._seen:
            boards.get(self.db, self.slug)
            self._seen = True
        return self.slug

    # -- tasks ----------------------------------------------------------------------------------

    def create(self, title: str, *, actor: str | None = None, **fields: Unpack[NewTaskFields]) -> Row:
        """Create a task: ``ready`` when it has an assignee and every parent is done, else ``todo``
        (``triage=True``: ``triage``). With an ``idempotency_key`` already in use by a task that
        is not archived, that task comes back with ``existing: True``. ``fields``: those of
        :data:`agentboard.domain.task_fields.FIELDS` (``body``, ``assignee``, ``parents``,
        ``priority``, ``workspace``, ``branch``, ``max_retries``, ``verify``, ``model``, ...), with
        their limits; a value over one raises ``InvalidInput``."""
        return tasks.create(self.db, self.slug, title, actor=actor, **fields)

    def release(self, task_id: str, *, actor: str | None = None) -> Row:
        """Move a ``triage`` task into the queue (``ready`` or ``todo``)."""
        return tasks.release(self.db, self.slug, task_id, actor=actor)

    def edit(self, task_id: str, *, actor: str | None = None, **fields: Any) -> Row:
        """Change fields of a task: ``title``, ``body``, ``priority``, ``tenant``, ``result``,
        ``max_runtime_seconds``, ``max_retries``, ``review_required``, ``verify``, ``skills``,
        ``branch_name``, ``goal_id``, ``model`` (an empty ``tenant``, ``goal_id`` or ``model``
        clears it)."""
        return tasks.edit(self.db, self.slug, task_id, actor=actor, **fields)

    def assign(self, task_id: str, assignee: str | None, *, reclaim: bool = False, actor: str | None = None) -> Row:
        """Give a task to a profile (None unassigns); a running task needs ``reclaim=True``."""
        return tasks.assign(self.db, self.slug, task_id, assignee, reclaim=reclaim, actor=actor)

    def update(
        self,
        task_id: str,
        *,
        fields: dict[str, Any] | None = None,
        assign: bool = False,
        assignee: str | None = None,
        status: str | None = None,
        reason: str | None = None,
        actor: str | None = None,
    ) -> Row:
        """Edit ``fields``, reassign (with ``assign=True``) and move to ``status`` in one
        transaction: a refused step leaves the task as it was. Done passes the review and
        verification gates and integrates the task's branch when the board says so."""
        from .dispatch import finish

        return finish.update(self.db, self.slug, task_id, fields=fields, assign=assign, assignee=assignee,
                             status=status, reason=reason, actor=actor)

    def set_status(self, task_id: str, status: str, *, reason: str | None = None, actor: str | None = None) -> Row:
        """Move a task to ``status`` through the verb that reaches it (the dashboard's drag). Done
        on a task in review is its approval (which integrates its branch); on another task it
        passes the review and verification gates (a 409-style ``Conflict`` says why not)."""
        from .dispatch import finish

        return finish.set_status(self.db, self.slug, task_id, status, reason=reason, actor=actor)

    def block(
        self, task_id: str, reason: str, *, kind: str = "manual", run_id: int | None = None,
        on: str | None = None, actor: str | None = None,
    ) -> Row:
        """Block a task with a reason (a running one closes its run). ``kind="dependency"`` with
        ``on=TASK_ID``: it waits in todo and resumes by itself when that task is done."""
        return tasks.block(self.db, self.slug, task_id, reason, kind=kind, run_id=run_id, on=on, actor=actor)

    def unblock(self, task_id: str, *, actor: str | None = None) -> Row:
        """Return a blocked task to the queue and reset its failure counter."""
        return tasks.unblock(self.db, self.slug, task_id, actor=actor)

    def archive(self, task_id: str, *, actor: str | None = None) -> Row:
        """Archive a task (from any status); its children count it as satisfied."""
        return tasks.archive(self.db, self.slug, task_id, actor=actor)

    def restore(self, task_id: str, *, actor: str | None = None) -> Row:
        """Bring an archived task back into the queue."""
        return tasks.restore(self.db, self.slug, task_id, actor=actor)

    def reopen(self, task_id: str, *, reason: str | None = None, actor: str | None = None) -> Row:
        """Reopen a done task (its ready children go back to todo)."""
        return tasks.reopen(self.db, self.slug, task_id, reason=reason, actor=actor)

    # -- runs -----------------------------------------------------------------------------------

    def claim(
        self, task_id: str, *, ttl: int | None = None, host: str | None = None, pid: int | None = None,
        lock: str | None = None, actor: str | None = None,
    ) -> Row:
        """Claim a ready task; the result carries the new ``run_id`` (the claim lasts ``ttl``
        seconds, default the ``claim_ttl`` setting)."""
        return runs.claim(self.db, self.slug, task_id, ttl=ttl, host=host, pid=pid, lock=lock, actor=actor)

    def claim_next(
        self, *, limit: int = 1, assignees: list[str] | None = None, ttl: int | None = None,
        host: str | None = None, actor: str | None = None,
    ) -> Rows:
        """Claim up to ``limit`` ready tasks, highest priority first, then oldest."""
        return runs.claim_next(self.db, self.slug, limit=limit, assignees=assignees, ttl=ttl, host=host,
                               actor=actor)

    def heartbeat(
        self, task_id: str, *, run_id: int | None = None, note: str | None = None, ttl: int | None = None,
        actor: str | None = None,
    ) -> Row:
        """Renew a running task's claim (and leave an optional progress note)."""
        return runs.heartbeat(self.db, self.slug, task_id, run_id=run_id, note=note, ttl=ttl, actor=actor)

    def complete(
        self,
        task_id: str,
        *,
        summary: str | None = None,
        metadata: dict[str, Any] | None = None,
        result: str | None = None,
        usage: dict[str, Any] | None = None,
        run_id: int | None = None,
        actor: str | None = None,
    ) -> Row:
        """Finish a task: with ``run_id``, a worker's report on its run (running → done, or
        review when it requires one; held for verification and integration); without, a person
        closing a task: a task in review is approved, another passes the review and
        verification gates, and the branch is integrated when the board says so."""
        from .dispatch import finish

        return finish.complete(self.db, self.slug, task_id, summary=summary, metadata=metadata, result=result,
                               usage=usage, run_id=run_id, actor=actor)

    def request_review(
        self, task_id: str, *, summary: str | None = None, run_id: int | None = None, actor: str | None = None,
    ) -> Row:
        """Hand a running task to review."""
        return runs.request_review(self.db, self.slug, task_id, summary=summary, run_id=run_id, actor=actor)

    def review(
        self, task_id: str, verdict: str, text: str = "", *, reviewer: str | None = None,
        score: int | None = None, findings: list[Any] | None = None, actor: str | None = None,
    ) -> Row:
        """Apply a verdict to a task in review: ``approved``, ``changes_requested`` or ``rejected``."""
        from .dispatch import finish

        return finish.review(self.db, self.slug, task_id, verdict, text, reviewer=reviewer, score=score,
                                findings=findings, actor=actor)

    def approve(self, task_id: str, *, text: str = "", actor: str | None = None) -> Row:
        """Approve a task in review (it becomes done)."""
        return self.review(task_id, "approved", text, actor=actor)

    def request_changes(self, task_id: str, feedback: str, *, actor: str | None = None) -> Row:
        """Send a task in review back to the queue with feedback."""
        return runs.request_changes(self.db, self.slug, task_id, feedback, actor=actor)

    def reject(self, task_id: str, reason: str, *, actor: str | None = None) -> Row:
        """Reject a task in review (it is blocked with kind ``rejected``)."""
        return runs.reject(self.db, self.slug, task_id, reason, actor=actor)

    def reclaim(self, task_id: str, *, reason: str | None = None, actor: str | None = None) -> Row:
        """Force a running task back to the queue (resets its failure counter)."""
        return runs.reclaim(self.db, self.slug, task_id, reason=reason, actor=actor)

    def fail(
        self,
        task_id: str,
        outcome: str,
        *,
        run_id: int | None = None,
        error: str | None = None,
        exit_code: int | None = None,
        count_failure: bool | None = None,
        cooldown_seconds: float | None = None,
        payload: dict[str, Any] | None = None,
        actor: str | None = "dispatcher",
    ) -> Row:
        """Record a dispatcher outcome (``crashed``, ``timed_out``, ...) and return the task to the
        queue; at the failure limit the task is blocked (``gave_up``)."""
        return runs.fail(self.db, self.slug, task_id, outcome, run_id=run_id, error=error, exit_code=exit_code,
                         count_failure=count_failure, cooldown_seconds=cooldown_seconds, payload=payload,
                         actor=actor)

    def give_up(self, task_id: str, reason: str, *, run_id: int | None = None, actor: str | None = "dispatcher") -> Row:
        """Block a task at once with kind ``gave_up``."""
        return runs.give_up(self.db, self.slug, task_id, reason, run_id=run_id, actor=actor)

    def record_spawn(
        self, task_id: str, run_id: int, *, pid: int, host: str | None = None, log_path: str | None = None,
        workspace: str | None = None, extra: dict[str, Any] | None = None,
    ) -> None:
        """Record the worker process started for a run."""
        runs.record_spawn(self.db, self.slug, task_id, run_id, pid=pid, host=host, log_path=log_path,
                          workspace=workspace, extra=extra)

    # -- links, comments, attachments, goals -------------------------------------------------

    def link(self, parent_id: str, child_id: str, *, actor: str | None = None) -> Row:
        """Make ``child_id`` wait for ``parent_id`` (cycles and cross-board links are refused)."""
        return links.link(self.db, self.slug, parent_id, child_id, actor=actor)

    def unlink(self, parent_id: str, child_id: str, *, actor: str | None = None) -> Row:
        """Remove a dependency; the child may become ready."""
        return links.unlink(self.db, self.slug, parent_id, child_id, actor=actor)

    def comment(
        self, task_id: str, body: str, *, author: str | None = None, mentions: bool = True, kind: str = "comment",
    ) -> Row:
        """Comment on a task; each ``@profile`` mentioned gets a follow-up task (``mentions=False``: none)."""
        return comments.comment(self.db, self.slug, task_id, body, author=author, mentions=mentions, kind=kind)

    def attach(
        self, task_id: str, path: str | os.PathLike[str], *, name: str | None = None, data: bytes | None = None,
        actor: str | None = None,
    ) -> Row:
        """Copy a file (or ``data``) next to the task, within the ``attachment_max_bytes`` setting."""
        return attachments.attach(self.db, self.slug, task_id, path, name=name, data=data, actor=actor)

    def attachments(self, task_id: str) -> Rows:
        """A task's attachments, oldest first."""
        return attachments.list_attachments(self.db, self.slug, task_id)

    def goal(
        self, title: str, *, body: str = "", acceptance: list[str] | None = None, priority: int = 0,
        verify: list[str] | None = None, actor: str | None = None,
    ) -> Row:
        """Create a goal on this board (tasks join it with ``goal=``); ``verify``: the commands
        that check its acceptance once all its tasks are done."""
        return goals.create(self.db, self.slug, title, body=body, acceptance=acceptance, priority=priority,
                            verify=verify, actor=actor)

    def goals(self, *, status: str | None = None) -> GoalRows:
        """The board's goals with their progress."""
        return goals.list_goals(self.db, self._existing(), status=status)

    # -- reads ----------------------------------------------------------------------------------

    def list(
        self,
        *,
        assignee: str | None = None,
        status: str | Iterable[str] | None = None,
        tenant: str | None = None,
        goal: str | None = None,
        search: str | None = None,
        include_archived: bool = False,
        limit: int = 200,
        offset: int = 0,
        supervision: bool = False,
    ) -> TaskCards:
        """Tasks matching the filters, highest priority first, then oldest (the supervisor's own
        tasks only with ``supervision``)."""
        return queries.list_tasks(self.db, self._existing(), assignee=assignee, status=status, tenant=tenant, goal=goal,
                                  search=search, include_archived=include_archived, limit=limit, offset=offset,
                                  supervision=supervision)

    def show(self, task_id: str) -> TaskDetail:
        """One task with its surroundings (parents, children, comments, runs, recent events)."""
        return queries.task_detail(self.db, self.slug, task_id)

    def view(
        self,
        *,
        tenant: str | None = None,
        assignee: str | None = None,
        goal: str | None = None,
        search: str | None = None,
        include_archived: bool = False,
        per_column: int = 100,
        lanes: bool = False,
        supervision: bool = False,
    ) -> BoardView:
        """The board as columns of cards, one per status (the supervisor's own tasks only with
        ``supervision``)."""
        return queries.board_view(self.db, self._existing(), tenant=tenant, assignee=assignee, goal=goal, search=search,
                                  include_archived=include_archived, per_column=per_column, lanes=lanes,
                                  supervision=supervision)

    def events(
        self, cursor: int = 0, *, task_id: str | None = None, kinds: Iterable[str] | None = None, limit: int = 500,
    ) -> EventRows:
        """The board's events after ``cursor`` (an event id), oldest first."""
        return queries.events_after(self.db, self._existing(), cursor, task_id=task_id, kinds=kinds, limit=limit)

    def runs(self, task_id: str) -> RunRows:
        """A task's runs, oldest first."""
        return queries.runs(self.db, self.slug, task_id)

    def stats(self) -> BoardStats:
        """Counts by status, by assignee and of recent outcomes."""
        return queries.stats(self.db, self._existing())

    def insights(self, *, by: str = "profile", since: str | int | None = None) -> Row:
        """Per profile or model (``by``), or the board's days (``by="board"``), over the last
        ``since`` days (``7d``; default all time): docs/insights.md."""
        from .kernel import insights

        return insights.read(self.db, self.slug, insights.Query.build(by, since))

    def budgets(self) -> Rows:
        """This board's budgets (its own, its goals' and tasks', every profile's) with their spend."""
        from .kernel import budgets

        return budgets.show(self.db, board=self._existing())

    def set_budget(self, *, max_runs: int | None = None, max_runtime: str | int | None = None,
                   max_tokens: int | None = None, max_cost: float | None = None, per: str | None = None,
                   task: str | None = None, goal: str | None = None, actor: str | None = None) -> Row:
        """Set this board's budget (or, with ``task``/``goal``, that task's or goal's); tasks it
        blocked and now lets through are released. See ``docs/budgets.md``."""
        from .kernel import budgets

        scope, ref = ("task", task) if task else ("goal", goal) if goal else ("board", self.slug)
        limits = budgets.Limits.build(max_runs=max_runs, max_runtime=max_runtime, max_tokens=max_tokens,
                                      max_cost=max_cost, per=per)
        return budgets.set_budget(self.db, scope, ref, limits, actor=actor)

    def diagnostics(self, *, task_id: str | None = None) -> Rows:
        """What is wrong on this board (or with one task), each with the command that fixes it."""
        from .kernel import diagnostics

        return diagnostics.diagnose(self.db, [self._existing()], task_id=task_id, host=self.db.settings.host_id)

    def promote(self, task_id: str, *, force: bool = False, actor: str | None = None) -> Row:
        """todo → ready; ``force`` also over unfinished parents (recorded as an override)."""
        from .kernel import overrides

        return overrides.promote(self.db, self.slug, task_id, force=force, actor=actor)

    def unguard(self, task_id: str, *, actor: str | None = None) -> Row:
        """Lift the respawn guard holding a task back."""
        from .kernel import overrides

        return overrides.unguard(self.db, self.slug, task_id, actor=actor)

    def __repr__(self) -> str:
        return f"<Board {self.slug} at {self.db.url}>"


class Client:
    """An open home: its settings and its database (``settings is db.settings``)."""

    def __init__(self, settings: _config.Settings, db: Database) -> None:
        self.settings = settings
        self.db = db
        self.home = settings.home

    def board(self, slug: str | None = None) -> Board:
        """The board ``slug`` (default: ``default``)."""
        return Board(self, model.board_slug(slug or "default"))

    def boards(self, *, include_archived: bool = False) -> BoardRows:
        """Every board, with task counts."""
        return boards.list_boards(self.db, include_archived=include_archived)

    def create_board(
        self,
        slug: str,
        *,
        name: str | None = None,
        description: str = "",
        icon: str | None = None,
        color: str | None = None,
        workdir: str | None = None,
        workdir_mode: str | None = None,
        settings: dict[str, Any] | None = None,
        actor: str | None = None,
        create: bool = False,
    ) -> Row:
        """Create a board; ``settings`` may override ``failure_limit`` and ``default_assignee``;
        ``workdir`` must exist unless ``create`` (then it is made)."""
        return boards.create(self.db, slug, name=name, description=description, icon=icon, color=color,
                             workdir=workdir, workdir_mode=workdir_mode, settings=settings, actor=actor,
                             create_dir=create)

    def add_profile(
        self,
        name: str,
        *,
        command: str | None = None,
        adapter: str = "command",
        description: str = "",
        max_concurrency: int | None = None,
        env: dict[str, str] | None = None,
        skills: list[str] | None = None,
        model_name: str | None = None,
        enabled: bool = True,
        orchestrator: bool = False,
        isolation: str = "none",
        permission: str = "edit",
        actor: str | None = None,
    ) -> Row:
        """Add an agent profile: the command the dispatcher runs for the tasks assigned to ``name``
        (for an agent CLI's ``adapter``, default: the CLI's executable on ``PATH``);
        ``isolation``: ``none``, ``user`` or ``sandbox`` (``docs/security.md``); ``permission``
        (``claude``/``codex``): ``edit``, ``full`` or ``read`` (``docs/dispatcher.md``)."""
        return profiles.add(self.db, name, command=command, adapter=adapter, description=description,
                            max_concurrency=max_concurrency, env=env, skills=skills, model_name=model_name,
                            enabled=enabled, orchestrator=orchestrator, isolation=isolation,
                            permission=permission, actor=actor)

    def profiles(self) -> Rows:
        """Every agent profile."""
        return profiles.list_profiles(self.db)

    def prune_events(self, *, retention_days: int | None = None, board: str | None = None) -> int:
        """Delete old events of finished tasks (default age: the ``event_retention_days`` setting)."""
        return maintenance.prune_events(self.db, retention_days=retention_days, board=board)

    def close(self) -> None:
        """Close the database connections."""
        self.db.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_home(settings: _config.Settings) -> Database:
    """Create the home folders if needed and open (and migrate) its database, which carries
    ``settings`` for the kernel verbs."""
    make_home(settings.home)
    return open_database(settings.url, settings=settings)


def make_home(home: Path) -> None:
    """Create ``home`` (and its ``boards/``) if needed. A new home is readable by its owner only
    (0700): it holds the database, the serve token and every board's files."""
    try:
        if not home.exists():
            home.mkdir(parents=True, mode=0o700, exist_ok=True)
            os.chmod(home, 0o700)  # whatever the umask
        (home / "boards").mkdir(exist_ok=True)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:  # a full disk: every verb's one message (exit 6)
            raise
        raise InvalidInput(f"cannot make the home {home}: {exc.strerror or exc}; point AGENTBOARD_HOME at a folder "
                           "you can write") from None


def connect(url_or_home: str | os.PathLike[str] | None = None, **overrides: Any) -> Client:
    """Open a home folder (default ``AGENTBOARD_HOME`` or ``~/.agentboard``) or a database URL.

    ``overrides`` set settings by name (``failure_limit=3``, ``default_assignee="worker"``...)
    above ``config.toml`` and the environment.
    """
    target = os.fspath(url_or_home) if url_or_home is not None else None
    if target and "://" in target:
        settings = _config.load(**overrides)
        if target.startswith("sqlite:///"):
            settings.home = Path(target[len("sqlite:///"):]).parent
        settings.database_url = target
    else:
        settings = _config.load(target, **overrides)
    return Client(settings, open_home(settings))
