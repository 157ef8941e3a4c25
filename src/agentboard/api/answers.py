"""What the routes answer: the response models the OpenAPI document shows (every route declares
one; ``tests/api/test_openapi.py`` checks each read route's real answer against it).

The rows of the read model come from :mod:`agentboard.kernel.rows`; this module adds the
shapes only the API builds (the board view, a task's detail, the supervisor's panel, …). They
are ``TypedDict`` s over the plain JSON the routes already send: declaring them changes no
answer. A payload that is open by nature (an event's payload, settings) is a ``dict``; an
answer whose keys grow with the component behind it is marked ``extra="allow"``.
"""

from __future__ import annotations

from typing import Any, NotRequired

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from ..kernel.rows import (
    AssigneeRow,
    AttachmentRow,
    BoardColumn,
    BoardRow,
    BoardStats,
    BoardView,
    CommentRow,
    CreatedTask,
    EventRow,
    ExistingTask,
    GitFacts,
    GoalBlocker,
    GoalDetail,
    GoalRow,
    RunRow,
    SupervisorLogEntry,
    SupervisorOverview,
    SupervisorPanel,
    SupervisorStatus,
    TaskCard,
    TaskDetail,
    TaskDetailWithGit,
    TaskRow,
    TenantRow,
    WakeRow,
    WikiPage,
)

# -- a task ---------------------------------------------------------------------------------------


class Move(TypedDict):
    """A status the task may be moved to, and the verb that does it."""

    status: str
    verb: str


class TaskDetailView(TaskDetailWithGit):
    """``GET /api/tasks/{id}``: the task's detail, with its branch facts and the moves it allows."""

    moves: NotRequired[list[Move]]


class DiffFile(TypedDict):
    path: str
    old_path: str | None
    status: str
    additions: int
    deletions: int
    binary: bool
    uncommitted: bool


class DiffShown(DiffFile):
    diff: str
    truncated: bool
    size: int


class TaskDiff(TypedDict):
    """``GET /api/tasks/{id}/diff``: the task's work split per file, one page of it shown."""

    task: str
    how: str
    git: GitFacts | None
    files: list[DiffFile]
    shown: list[DiffShown]
    page: int
    pages: int
    per_page: int
    total_files: int
    additions: int
    deletions: int


class WorkerLog(TypedDict):
    task_id: str
    run_id: int | None
    path: str | None
    size: int
    truncated: bool
    text: str


class TaskContext(TypedDict):
    task_id: str
    board: str
    markdown: str


class BulkResult(TypedDict):
    id: str
    ok: bool
    status: NotRequired[str]
    task: NotRequired[TaskRow]
    #: why the id was refused: ``code`` and ``message`` as an error answer carries them
    error: NotRequired[dict[str, str]]


class BulkAnswer(TypedDict):
    results: list[BulkResult]
    ok: int
    failed: int


@with_config(ConfigDict(extra="allow"))
class LlmOutcome(TypedDict):
    """What one specify or decompose call did (``task``, ``children`` when it worked)."""

    ok: bool
    task_id: str
    reason: NotRequired[str]
    task: NotRequired[dict[str, Any]]
    children: NotRequired[list[dict[str, Any]]]
    fanout: NotRequired[bool]
    model: NotRequired[str]
    error: NotRequired[dict[str, str]]


class LlmBulkAnswer(TypedDict):
    ok: bool
    reason: NotRequired[str]
    results: list[LlmOutcome]
    done: NotRequired[int]
    failed: NotRequired[int]


class LinkRow(TypedDict):
    parent_id: str
    child_id: str


class Worker(TypedDict):
    pid: int
    host: str | None


class PurgedWorkspace(TypedDict):
    """Where the purged task worked: its workspace kind and path, and its branch."""

    kind: str | None
    path: str | None
    branch: str | None


class RemovedBranch(TypedDict):
    repo: str
    branch: str


class KeptLeftover(TypedDict):
    """What a purge left on disk: the path (and the branch), why, and the commands that remove it."""

    path: str
    branch: NotRequired[str]
    why: str
    how: str


class PurgedTask(TypedDict):
    id: str
    board: str
    purged: bool
    title: str
    status: str
    removed: dict[str, int]
    promoted: list[str]
    worker: Worker | None
    worker_stopped: bool | None
    workspace: PurgedWorkspace
    #: the worker logs, exit files, scratch workspace and worktree removed
    files_removed: list[str]
    branches_removed: list[RemovedBranch]
    kept: list[KeptLeftover]


class DeletedWorktree(TypedDict):
    id: str
    path: str | None
    branch: str | None


class DeletedBoard(BoardRow):
    """A board deleted for good (``DELETE /api/boards/{slug}?purge=true``): its row, where its
    worktree tasks worked, and what of that was removed or kept (as for a purged task)."""

    worktrees: list[DeletedWorktree]
    files_removed: list[str]
    branches_removed: list[RemovedBranch]
    kept: list[KeptLeftover]


class RemovedAttachment(AttachmentRow):
    removed: bool


class Heartbeat(TypedDict):
    """A heartbeat's answer: the claim's new expiry, the comments since the worker last looked,
    and ``stop`` when a budget ran out."""

    id: str
    run_id: int
    claim_expires: float
    messages: NotRequired[list[dict[str, Any]]]
    stop: NotRequired[bool]
    stop_reason: NotRequired[str]


@with_config(ConfigDict(extra="allow"))
class InboxAnswer(TypedDict):
    """The messages a run has not seen yet (empty when the task has no running run)."""

    task_id: NotRequired[str]
    run_id: NotRequired[int]
    messages: NotRequired[list[dict[str, Any]]]
    more: NotRequired[bool]


# -- goals ----------------------------------------------------------------------------------------


@with_config(ConfigDict(extra="allow"))
class GoalVerdict(TypedDict):
    """The goal's row after a verdict (its stored columns), with the proposal opened when it failed."""

    id: str
    board: str
    title: str
    status: str
    evidence: str | None
    proposal: str | None


# -- who, settings, tokens, profiles ------------------------------------------------------------------


class Me(TypedDict):
    name: str
    role: str
    boards: list[str] | None
    run_id: int | None
    task_id: str | None
    orchestrator: bool
    supervisor: str | None


class LlmUse(TypedDict):
    available: bool
    reason: str | None


class LlmView(TypedDict):
    configured: bool
    model: str | None
    available: bool
    reason: str | None
    uses: dict[str, LlmUse]


class DispatcherView(TypedDict):
    running: bool


class ConfigView(TypedDict):
    """``GET /api/config``: the version, the settings (secrets masked), the LLM and dispatcher."""

    version: str
    settings: dict[str, Any]
    database: str
    llm: LlmView
    dispatcher: DispatcherView
    me: Me


class TokenRow(TypedDict):
    id: int
    name: str
    role: str
    boards: list[str]
    run_id: int | None
    task_id: str | None
    created_at: float
    expires_at: float | None
    revoked_at: float | None
    last_used_at: float | None
    revoked: bool
    #: the secret, shown once when the token is created
    token: NotRequired[str]


class ProfileRow(TypedDict):
    name: str
    description: str
    adapter: str
    command: str | None
    env: dict[str, str]
    max_concurrency: int | None
    skills: list[str]
    model: str | None
    enabled: bool
    orchestrator: bool
    created_at: float
    updated_at: float
    isolation: str | None
    permission: str | None
    warnings: NotRequired[list[str]]
    #: a removed profile's: the unfinished tasks still assigned to it
    waiting: NotRequired[list[str]]


class ProfileCheckItem(TypedDict):
    name: str
    ok: bool
    warn: bool
    detail: str
    fix: str | None


class ProfileCheck(TypedDict):
    profile: str
    adapter: str
    ok: bool
    checks: list[ProfileCheckItem]


# -- notifications, templates, schedules ---------------------------------------------------------------


class SubscriptionRow(TypedDict):
    id: int
    board: str
    scope: str
    subject: str
    kinds: list[str]
    cursor: int
    failures: int
    next_attempt_at: float | None
    last_attempt_at: float | None
    last_sent_at: float | None
    last_error: str | None
    parked_at: float | None
    delivered: int
    created_by: str | None
    created_at: float
    trusted: bool
    target: str
    default_kinds: bool
    parked: bool


class NotifyTest(TypedDict):
    ok: bool
    target: str
    error: str | None


class TemplateSummary(TypedDict):
    name: str
    path: str
    description: str
    tasks: int
    placeholders: list[str]
    vars: dict[str, str]


@with_config(ConfigDict(extra="allow"))
class TemplateTask(TypedDict):
    """One task of a template as its file writes it (the keys a new task takes)."""

    key: str
    title: str


class TemplateDetail(TypedDict):
    name: str
    path: str
    description: str
    vars: dict[str, str]
    placeholders: list[str]
    tasks: list[TemplateTask]


class TemplateCreated(TypedDict):
    template: str
    board: str
    tasks: list[CreatedTask]


class ScheduleRow(TypedDict):
    id: int
    board: str
    cron: str
    template: str | None
    template_values: dict[str, str]
    clone_task_id: str | None
    missed: str
    enabled: bool
    next_at: float
    last_fired_at: float | None
    created_by: str | None
    created_at: float
    removed: NotRequired[bool]


# -- supervisor -------------------------------------------------------------------------------------


class SupervisorSet(TypedDict):
    board: str
    supervisor: str | None


# -- budgets, diagnostics, dispatch, meta ---------------------------------------------------------------


class BudgetLine(TypedDict):
    spent: float
    limit: float | None
    ratio: float | None
    text: str


class BudgetPart(TypedDict):
    spent: dict[str, float]
    text: str


class BudgetRow(TypedDict):
    scope: str
    ref: str
    board: str | None
    per: str | None
    window: str | None
    window_start: float | None
    max_runs: int | None
    max_runtime: int | None
    max_tokens: int | None
    max_cost: float | None
    expected_cost: float | None
    spent: dict[str, float]
    lines: dict[str, BudgetLine]
    ratio: float | None
    metric: str | None
    exhausted: bool
    warning: bool
    updated_at: float
    counts: NotRequired[str]
    by: NotRequired[dict[str, BudgetPart]]
    released: NotRequired[list[str]]


class BudgetCleared(TypedDict):
    scope: str
    ref: str
    cleared: bool
    released: list[str]


class FindingAction(TypedDict):
    method: str
    path: str
    body: NotRequired[dict[str, Any] | None]


class Finding(TypedDict):
    """Something wrong on a board, with the command (and, when a route fixes it, the action) to fix it."""

    kind: str
    board: str | None
    message: str
    fix: str | None
    action: FindingAction | None
    task_id: str | None
    severity: str
    facts: dict[str, Any]
    concerns: str | None
    subject: str | None


@with_config(ConfigDict(extra="allow"))
class DispatchPass(TypedDict):
    """What one dispatcher pass did (its report grows with the dispatcher)."""

    host: str
    dry_run: bool
    spawned: list[dict[str, Any]]
    would_spawn: list[dict[str, Any]]
    skipped: list[dict[str, Any]]
    skipped_boards: list[str]
    spawn_failed: list[dict[str, Any]]


class MetaView(TypedDict):
    """The domain's tables the dashboard reads: statuses, allowed moves, verbs, kinds."""

    statuses: list[str]
    hand_targets: list[str]
    moves: dict[str, dict[str, str]]
    verbs: dict[str, list[str]]
    goal_statuses: list[str]
    block_kinds: list[str]
    person_block_kinds: list[str]
    hand_create_statuses: list[str]
    wake_statuses: list[str]
    verdicts: list[str]


#: the answer of ``GET /api/tasks/{id}/attachments/{attachment_id}``: the file's bytes
FILE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
          "description": "the attachment's bytes"}}


__all__ = [
    "AssigneeRow", "AttachmentRow", "BoardColumn", "BoardRow", "DeletedBoard", "BoardStats", "BoardView", "BudgetCleared", "BudgetRow", "BulkAnswer",
    "CommentRow", "ConfigView", "DispatchPass", "EventRow", "ExistingTask", "FILE_RESPONSE", "Finding", "GoalBlocker", "GoalDetail",
    "GoalRow", "GoalVerdict", "Heartbeat", "InboxAnswer", "LinkRow", "LlmBulkAnswer", "LlmOutcome", "Me", "MetaView", "CreatedTask",
    "NotifyTest", "ProfileCheck", "ProfileRow", "PurgedTask", "RemovedAttachment", "RunRow", "ScheduleRow",
    "SubscriptionRow", "SupervisorLogEntry", "SupervisorOverview", "SupervisorPanel", "SupervisorSet",
    "SupervisorStatus", "TaskCard", "TaskContext", "TaskDetail", "TaskDetailView", "TaskDiff", "TaskRow", "TemplateDetail",
    "TemplateCreated", "TemplateSummary", "TenantRow", "TokenRow", "WakeRow", "WikiPage", "WorkerLog",
]
