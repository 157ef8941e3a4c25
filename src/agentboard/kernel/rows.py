"""The rows of the read model, typed: what the kernel's reads return and the API answers with.

Over 600 lines on purpose: declarations only, one shape per read, kept together so the API and the
client import every row from one place.

Each is a ``TypedDict`` over the row the kernel builds (a database row, JSON columns decoded,
flags as booleans), so the shapes are written once: the REST routes declare them as their
response models (``api/answers.py``) and the OpenAPI document shows them. A key present only
in some answers is ``NotRequired``. Timestamps are epoch seconds.
"""

from __future__ import annotations

from typing import Any, NotRequired

# pydantic (which reads these for the OpenAPI document) needs typing_extensions' TypedDict
# before Python 3.12
from typing_extensions import TypedDict


class TaskRow(TypedDict):
    """A task, every column (what the verbs on a task return)."""

    id: str
    board: str
    title: str
    body: str
    assignee: str | None
    status: str
    priority: int
    tenant: str | None
    goal_id: str | None
    created_by: str | None
    created_at: float
    updated_at: float
    started_at: float | None
    completed_at: float | None
    workspace_kind: str
    workspace_path: str | None
    branch_name: str | None
    idempotency_key: str | None
    skills: list[str]
    max_runtime_seconds: int | None
    max_retries: int | None
    review_required: bool
    verify: list[str]
    consecutive_failures: int
    protocol_violations: int
    rework_count: int
    last_failure_error: str | None
    last_outcome: str | None
    cooldown_until: float | None
    block_kind: str | None
    block_reason: str | None
    current_run_id: int | None
    claim_lock: str | None
    claim_expires: float | None
    worker_pid: int | None
    worker_host: str | None
    last_heartbeat_at: float | None
    result: str | None
    workflow_template_id: str | None
    current_step_key: str | None
    not_before: float | None
    purpose: str | None
    block_on: str | None
    block_to: str | None
    base_branch: str | None
    integration: str | None
    pr_url: str | None
    model: str | None
    parents_override: int
    #: a race's ``all``/``first-pass``; on an attempt's own task, the race it belongs to
    race_until: str | None
    race_of: str | None
    #: what a verb adds: the run it closed or started, the children it promoted
    closed_run_id: NotRequired[int]
    run_id: NotRequired[int | None]
    promoted: NotRequired[list[str]]


class CreatedAttempt(TypedDict):
    """An attempt of a race as its creation returns it."""

    n: int
    profile: str
    model: str | None
    branch: str
    state: str


class CreatedTask(TypedDict):
    """A task as its creation returns it (the columns creation sets)."""

    id: str
    board: str
    title: str
    body: str
    assignee: str | None
    status: str
    priority: int
    tenant: str | None
    goal_id: str | None
    created_by: str | None
    created_at: float
    updated_at: float
    workspace_kind: str
    workspace_path: str | None
    branch_name: str | None
    idempotency_key: str | None
    skills: list[str]
    max_runtime_seconds: int | None
    max_retries: int | None
    review_required: bool
    verify: list[str]
    model: str | None
    current_run_id: int | None
    consecutive_failures: int
    not_before: float | None
    #: the assignee names no profile: the dispatcher will not start the task until one is added
    warnings: NotRequired[list[str]]
    #: a race: when it ends and its attempts
    race_until: NotRequired[str]
    attempts: NotRequired[list[CreatedAttempt]]


class ExistingTask(TaskRow):
    """What a creation answers when its idempotency key found the task made before."""

    existing: bool


class TaskCard(TypedDict):
    """A task in a list (``GET /api/tasks``): the columns a card shows."""

    id: str
    board: str
    title: str
    assignee: str | None
    status: str
    priority: int
    tenant: str | None
    goal_id: str | None
    created_at: float
    updated_at: float
    started_at: float | None
    completed_at: float | None
    block_kind: str | None
    block_reason: str | None
    result: str | None
    review_required: bool
    consecutive_failures: int
    current_run_id: int | None
    worker_host: str | None
    last_heartbeat_at: float | None
    last_outcome: str | None
    workspace_kind: str
    branch_name: str | None
    integration: str | None
    pr_url: str | None
    model: str | None
    cooldown_until: float | None
    purpose: str | None
    race_until: str | None
    #: a race's attempts and badge (``kernel.attempts.race_cards``)
    race: NotRequired[RaceCard]


class RaceAttemptCard(TypedDict):
    """One attempt of a race as its card shows it."""

    n: int
    profile: str
    model: str | None
    state: str
    outcome: str | None
    verification: str | None
    cost_usd: float | None
    picked: bool


class RaceCard(TypedDict):
    """A race's attempts and its badge (``race 1/3 passed``)."""

    attempts: list[RaceAttemptCard]
    badge: str


class DecomposeBackoff(TypedDict):
    """Why a triage card's specify or decompose waits: its failed attempts and when it retries."""

    attempts: int
    retry_at: float
    error: str | None


class BoardTask(TaskCard):
    """A card on the board view, with the counts its badges show."""

    comment_count: int
    parent_count: int
    child_count: int
    children_done: int
    #: set when the assignee names no profile (nothing will run it)
    assignee_unknown: NotRequired[bool]
    decompose_backoff: NotRequired[DecomposeBackoff]
    #: a running card's current attempt: when its run started (``started_at`` is the first attempt's)
    run_started_at: NotRequired[float]
    #: a done card without a one-line ``result``: the first line of its last run's summary
    summary_line: NotRequired[str]


class RunReview(TypedDict):
    """A review verdict as a run carries it."""

    reviewer: str
    verdict: str
    score: int | None
    summary: str | None
    findings: list[Any]


class RunRow(TypedDict):
    """One attempt at a task (``metadata`` and ``review`` decoded)."""

    id: int
    task_id: str
    board: str
    profile: str | None
    attempt: int
    status: str
    outcome: str | None
    claim_lock: str | None
    claim_expires: float | None
    worker_pid: int | None
    worker_host: str | None
    started_at: float
    ended_at: float | None
    last_heartbeat_at: float | None
    summary: str | None
    metadata: dict[str, Any] | None
    error: str | None
    exit_code: int | None
    log_path: str | None
    workspace_path: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    review: RunReview | None
    synthetic: bool
    pending_report: str | None
    inbox_seen: int | None
    nudged: int
    #: the race attempt this run belongs to
    race_attempt: int | None


class EventRow(TypedDict):
    """One event of the log (``payload`` decoded: its keys depend on the kind)."""

    id: int
    board: str
    task_id: str | None
    run_id: int | None
    kind: str
    payload: dict[str, Any]
    actor: str | None
    created_at: float


class CommentRow(TypedDict):
    id: int
    task_id: str
    author: str | None
    body: str
    kind: str
    created_at: float
    #: what posting it did: the tasks its @mentions created, the mentions that named no profile
    spawned_subtasks: NotRequired[list[str]]
    skipped_mentions: NotRequired[list[str]]


class AttachmentRow(TypedDict):
    id: int
    task_id: str
    board: NotRequired[str]
    name: str
    path: str
    size: int
    sha256: str
    created_by: NotRequired[str | None]
    created_at: float


class ReviewRow(TypedDict):
    id: int
    task_id: str
    board: str
    run_id: int | None
    reviewer: str
    verdict: str
    score: int | None
    summary: str | None
    findings: list[Any]
    created_at: float


class ParentLink(TypedDict):
    id: str
    title: str
    status: str
    assignee: str | None
    result: str | None
    handoff: RunRow | None


class ChildLink(TypedDict):
    id: str
    title: str
    status: str
    assignee: str | None


class DetailComment(TypedDict):
    id: int
    author: str | None
    body: str
    kind: str
    created_at: float


class DetailEvent(TypedDict):
    id: int
    task_id: str | None
    run_id: int | None
    kind: str
    payload: dict[str, Any]
    actor: str | None
    created_at: float


class DetailAttachment(TypedDict):
    id: int
    name: str
    path: str
    size: int
    sha256: str
    created_at: float


class TaskGoal(TypedDict):
    id: str
    title: str
    status: str
    body: str
    acceptance: list[str]


class TaskDetail(TaskRow):
    """A task with its surroundings (``queries.task_detail``): links, comments, events, runs,
    attachments, reviews, and its goal."""

    parents: list[ParentLink]
    children: list[ChildLink]
    comments: list[DetailComment]
    events: list[DetailEvent]
    runs: list[RunRow]
    attachments: list[DetailAttachment]
    reviews: list[ReviewRow]
    #: a race's attempts and badge
    race: NotRequired[RaceCard]
    #: None when the goal is on another board
    goal: NotRequired[TaskGoal | None]


class GitFacts(TypedDict):
    """A worktree task's branch as a reviewer sees it."""

    branch: str | None
    base: str | None
    ahead: int | None
    behind: int | None
    files: int
    insertions: int
    deletions: int
    exists: bool
    uncommitted: int
    note: str | None
    #: how the branch landed on the base (merged, squashed, rebased): the counts are what landed
    landed: NotRequired[str | None]
    summary: str
    integration: str | None
    pr_url: str | None


class TaskDetailWithGit(TaskDetail):
    """A task's detail with its branch facts (``dispatch.diffs.with_git``: None unless a worktree task)."""

    git: NotRequired[GitFacts | None]


class GoalBlocker(TypedDict):
    """A blocked task holding a goal back."""

    id: str
    title: str
    kind: str | None
    reason: str | None


class GoalRow(TypedDict):
    """A goal, with its progress when listed or shown."""

    id: str
    board: str
    title: str
    body: str
    acceptance: list[str]
    status: str
    priority: int
    created_by: str | None
    created_at: float
    completed_at: float | None
    verify: list[str]
    evidence: str | None
    counts: NotRequired[dict[str, int]]
    blocked: NotRequired[list[GoalBlocker]]
    runs: NotRequired[int]
    cost_usd: NotRequired[float]
    tokens: NotRequired[int]
    total: NotRequired[int]
    done: NotRequired[int]


class GoalTask(TypedDict):
    id: str
    title: str
    status: str
    assignee: str | None
    priority: int
    block_reason: str | None


class GoalDetail(GoalRow):
    """``GET /api/goals/{id}``: the goal, its progress and its tasks."""

    tasks: list[GoalTask]


class BoardRow(TypedDict):
    slug: str
    name: str
    description: str
    icon: str | None
    color: str | None
    default_workdir: str | None
    workdir_mode: str | None
    settings: dict[str, Any]
    archived: bool
    archived_path: str | None
    created_at: float
    archived_at: float | None
    task_count: NotRequired[int]
    current: NotRequired[bool]


class WikiPage(TypedDict):
    id: int
    board: str
    slug: str
    title: str
    body: str
    status: str
    source_task_id: str | None
    author: str | None
    created_at: float
    updated_at: float


class WakeRow(TypedDict):
    """A supervisor wake (``detail`` decoded)."""

    id: int
    board: str
    reason: str
    subject: str | None
    status: str
    created_at: float
    handled_at: float | None
    detail: dict[str, Any]
    attempt: int
    task_id: str | None
    updated_at: float | None
    note: str | None


class Lane(TypedDict):
    """The running column's cards of one assignee (``lanes=true``)."""

    assignee: str
    tasks: list[BoardTask]


class BoardColumn(TypedDict):
    status: str
    count: int
    tasks: list[BoardTask]
    lanes: NotRequired[list[Lane]]


class BoardView(TypedDict):
    """``GET /api/board``: the columns of the dashboard."""

    board: str
    columns: list[BoardColumn]
    total: int
    hidden_supervision: int


class BoardStats(TypedDict):
    board: str
    by_status: dict[str, int]
    by_assignee: dict[str, dict[str, int]]
    by_goal: dict[str, dict[str, int]]
    total: int
    runs: int
    cost_usd: float
    input_tokens: int
    output_tokens: int
    outcomes: dict[str, int]


class AssigneeRow(TypedDict):
    """An assignee of the board: a profile, or a name tasks carry that no profile has."""

    name: str
    profile: bool
    description: str
    adapter: str | None
    enabled: bool
    counts: dict[str, int]
    total: int


class TenantRow(TypedDict):
    tenant: str
    n: int


class SupervisionTask(TypedDict):
    id: str
    title: str
    status: str


class SupervisorStatus(TypedDict):
    board: str
    enabled: bool
    profile: str | None
    problem: str | None
    wakes: dict[str, int]
    working: list[SupervisionTask]


class SupervisorLogEntry(TypedDict):
    id: int
    task_id: str | None
    kind: str
    payload: dict[str, Any]
    actor: str | None
    created_at: float


class Proposal(TypedDict):
    id: str
    title: str
    goal_id: str | None
    created_by: str | None
    created_at: float


class Escalation(TypedDict):
    id: str
    title: str
    block_reason: str | None
    block_to: str | None
    updated_at: float


class GoalRef(TypedDict):
    id: str
    title: str


class SupervisorPanel(TypedDict):
    proposals: list[Proposal]
    escalations: list[Escalation]
    verifying: list[GoalRef]
    status: SupervisorStatus
    wakes: list[WakeRow]


class OpenTask(TypedDict):
    id: str
    title: str
    status: str
    assignee: str | None
    priority: int
    goal_id: str | None
    block_kind: str | None
    block_reason: str | None
    block_on: str | None
    created_by: str | None


class OpenGoal(TypedDict):
    id: str
    title: str
    status: str
    priority: int


class SupervisorOverview(TypedDict):
    board: str
    counts: dict[str, int]
    blocked: list[OpenTask]
    triage: list[OpenTask]
    goals: list[OpenGoal]


__all__ = [
    "AssigneeRow", "AttachmentRow", "BoardColumn", "BoardRow", "BoardStats", "BoardTask", "BoardView",
    "ChildLink", "CommentRow", "CreatedTask", "DecomposeBackoff", "DetailAttachment", "DetailComment",
    "DetailEvent", "Escalation", "EventRow", "ExistingTask", "GitFacts", "GoalBlocker", "GoalDetail", "GoalRef", "GoalRow",
    "GoalTask", "Lane", "OpenGoal", "OpenTask", "ParentLink", "Proposal", "RaceAttemptCard",
    "RaceCard", "ReviewRow", "RunReview", "RunRow", "SupervisionTask", "SupervisorLogEntry", "SupervisorOverview",
    "SupervisorPanel", "SupervisorStatus", "TaskCard", "TaskDetail", "TaskDetailWithGit", "TaskGoal", "TaskRow", "TenantRow",
    "WakeRow", "WikiPage"
]
