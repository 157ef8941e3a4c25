"""The schema, as SQLAlchemy Core metadata. Migrations in ``migrations/`` must produce exactly this.

Conventions: timestamps are epoch seconds (double precision, UTC); flags are integers 0/1;
JSON documents are stored as text. Everything board-scoped carries ``board`` (the slug).
"""

from __future__ import annotations

import sqlalchemy as sa

from . import rollups as _rollups
from .engine import CLAIMABLE, WAITING


def _partial(name: str, *columns: str, where: str, unique: bool = False) -> sa.Index:
    """An index over the rows that match ``where`` only (on both backends): most writes skip it."""
    return sa.Index(name, *columns, unique=unique, sqlite_where=sa.text(where), postgresql_where=sa.text(where))

metadata = sa.MetaData()

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Ts: sa.Double[float] = sa.Double()

boards = sa.Table(
    "boards",
    metadata,
    sa.Column("slug", sa.String(64), primary_key=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False, server_default=""),
    sa.Column("icon", sa.Text),
    sa.Column("color", sa.Text),
    sa.Column("default_workdir", sa.Text),
    sa.Column("workdir_mode", sa.Text),
    sa.Column("settings", sa.Text, nullable=False, server_default="{}"),
    sa.Column("archived", sa.Integer, nullable=False, server_default="0"),
    sa.Column("archived_path", sa.Text),
    sa.Column("created_at", Ts, nullable=False),
    sa.Column("archived_at", Ts),
)

# PostgreSQL stores the columns of ``tasks`` and ``task_runs`` in another order (migration 0033):
# what a claim, a heartbeat, a worker's start and a completion change, side by side, so that an
# update staying on its page writes only that stretch of the row to the WAL. Readers name columns.
tasks = sa.Table(
    "tasks",
    metadata,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False, server_default=""),
    sa.Column("assignee", sa.Text),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tenant", sa.Text),
    sa.Column("goal_id", sa.String(16)),
    sa.Column("created_by", sa.Text),
    sa.Column("created_at", Ts, nullable=False),
    sa.Column("updated_at", Ts, nullable=False),
    sa.Column("started_at", Ts),
    sa.Column("completed_at", Ts),
    sa.Column("workspace_kind", sa.String(16), nullable=False, server_default="scratch"),
    sa.Column("workspace_path", sa.Text),
    sa.Column("branch_name", sa.Text),
    sa.Column("idempotency_key", sa.Text),
    sa.Column("skills", sa.Text, nullable=False, server_default="[]"),
    sa.Column("max_runtime_seconds", sa.Integer),
    sa.Column("max_retries", sa.Integer),
    sa.Column("review_required", sa.Integer, nullable=False, server_default="0"),
    sa.Column("verify", sa.Text, nullable=False, server_default="[]"),
    sa.Column("consecutive_failures", sa.Integer, nullable=False, server_default="0"),
    sa.Column("protocol_violations", sa.Integer, nullable=False, server_default="0"),
    sa.Column("rework_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_failure_error", sa.Text),
    sa.Column("last_outcome", sa.Text),
    sa.Column("cooldown_until", Ts),
    sa.Column("block_kind", sa.String(32)),
    sa.Column("block_reason", sa.Text),
    sa.Column("current_run_id", BigId),
    sa.Column("claim_lock", sa.Text),
    sa.Column("claim_expires", Ts),
    sa.Column("worker_pid", sa.Integer),
    sa.Column("worker_host", sa.Text),
    sa.Column("last_heartbeat_at", Ts),
    sa.Column("result", sa.Text),
    sa.Column("workflow_template_id", sa.Text),
    sa.Column("current_step_key", sa.Text),
    sa.Column("not_before", Ts),
    # the supervisor (0008): its own tasks, what a dependency waits for, whom an escalation asks
    sa.Column("purpose", sa.String(16)),
    sa.Column("block_on", sa.String(16)),
    sa.Column("block_to", sa.Text),
    # a worktree task's base branch, what approval did with its branch, its pull request (0011)
    sa.Column("base_branch", sa.Text),
    sa.Column("integration", sa.String(16)),
    sa.Column("pr_url", sa.Text),
    sa.Column("model", sa.String(200)),
    sa.Column("parents_override", sa.Integer, nullable=False, server_default="0"),
    # a race (0017): ``all``/``first-pass`` on the race's task; on an attempt's own task, its race
    sa.Column("race_until", sa.String(16)),
    sa.Column("race_of", sa.String(16)),
    # partial: only the rows that need finding, so most writes skip them (0003)
    _partial("ix_tasks_goal", "goal_id", where="goal_id IS NOT NULL"),
    _partial("ix_tasks_supervision", "board", "status", where="purpose = 'supervision'"),
    # the tasks a spent budget blocks, per board (/metrics; 0020)
    _partial("ix_tasks_budget_blocked", "board", where="status = 'blocked' AND block_kind = 'budget'"),
    # a host's running tasks, and other hosts' lapsed claims, found by a pass without reading
    # every running task; one index, so a claim adds one entry (0025)
    _partial("ix_tasks_running", "worker_host", "claim_expires", where="status = 'running'"),
    # the tasks a pass acts on with no worker of its own, which a woken dispatcher's glance
    # counts: reviews, triage, races under way (0028)
    _partial("ix_tasks_waiting", "updated_at", where=WAITING),
    # the few tasks a pass times or settles, read in its snapshot without reading every ready
    # or todo task or the whole table (0031): a cooldown's end, a timed block's end, a race
    # under way, a start time
    _partial("ix_tasks_cooldown", "board", "cooldown_until",
             where="status = 'ready' AND cooldown_until IS NOT NULL"),
    _partial("ix_tasks_timed_block", "board", "cooldown_until",
             where="status = 'blocked' AND block_kind = 'rate_limited'"),
    _partial("ix_tasks_ready_race", "board", where="status = 'ready' AND race_until IS NOT NULL"),
    _partial("ix_tasks_not_before", "board", "not_before", where="status = 'todo' AND not_before IS NOT NULL"),
    _partial("ix_tasks_race_of", "race_of", where="race_of IS NOT NULL"),
    _partial("ux_tasks_idempotency", "board", "idempotency_key", unique=True,
             where="idempotency_key IS NOT NULL AND status != 'archived'"),
)

# the board view's columns and the filtered list, in display order (priority first, then age),
# so the first cards of a column are read straight from the index without sorting (0003)
sa.Index(
    "ix_tasks_board_status",
    tasks.c.board, tasks.c.status, tasks.c.priority.desc(), tasks.c.created_at, tasks.c.id,
)
# only the tasks ready to be claimed (what a claim of the next task by assignee reads), so a
# completion adds no entry, a claim only removes one and a promotion adds one (0025, 0026)
sa.Index(
    "ix_tasks_board_assignee",
    tasks.c.board, tasks.c.assignee, tasks.c.priority.desc(), tasks.c.created_at, tasks.c.id,
    sqlite_where=sa.text(CLAIMABLE), postgresql_where=sa.text(CLAIMABLE),
)

task_links = sa.Table(
    "task_links",
    metadata,
    sa.Column("parent_id", sa.String(16), primary_key=True),
    sa.Column("child_id", sa.String(16), primary_key=True),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("created_at", Ts, nullable=False),
    sa.Index("ix_links_child", "child_id"),
)

task_comments = sa.Table(
    "task_comments",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.String(16), nullable=False),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("author", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("kind", sa.String(32), nullable=False, server_default="comment"),
    sa.Column("created_at", Ts, nullable=False),
    sa.Index("ix_comments_task", "task_id", "id"),
)

task_runs = sa.Table(
    "task_runs",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.String(16), nullable=False),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("profile", sa.Text),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("status", sa.String(8), nullable=False),
    sa.Column("outcome", sa.String(32)),
    sa.Column("claim_lock", sa.Text),
    sa.Column("claim_expires", Ts),
    sa.Column("worker_pid", sa.Integer),
    sa.Column("worker_host", sa.Text),
    sa.Column("started_at", Ts, nullable=False),
    sa.Column("ended_at", Ts),
    sa.Column("last_heartbeat_at", Ts),
    sa.Column("summary", sa.Text),
    sa.Column("metadata", sa.Text),
    sa.Column("error", sa.Text),
    sa.Column("exit_code", sa.Integer),
    sa.Column("log_path", sa.Text),
    sa.Column("workspace_path", sa.Text),
    sa.Column("input_tokens", sa.BigInteger),
    sa.Column("output_tokens", sa.BigInteger),
    sa.Column("cost_usd", sa.Double),
    sa.Column("review", sa.Text),
    sa.Column("synthetic", sa.Integer, nullable=False, server_default="0"),
    sa.Column("pending_report", sa.Text),
    sa.Column("inbox_seen", sa.BigInteger),
    sa.Column("nudged", sa.Integer, nullable=False, server_default="0"),
    # the race attempt this run belongs to (0017)
    sa.Column("race_attempt", sa.Integer),
    sa.Index("ix_runs_task", "task_id", "id"),
    # a profile's last runs, newest first: the budget gate's expected cost of one run (0024); set
    # when the run starts, so closing a run changes no indexed column (a HOT update on PostgreSQL)
    sa.Index("ix_runs_profile", "profile", "id"),
)

# one row per attempt of a race (0017): what it ran with, how it ended, what it cost
attempts = sa.Table(
    "attempts",
    metadata,
    sa.Column("task_id", sa.String(16), primary_key=True),
    sa.Column("n", sa.Integer, primary_key=True),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("profile", sa.Text, nullable=False),
    sa.Column("model", sa.String(200)),
    sa.Column("branch", sa.Text),
    sa.Column("state", sa.String(16), nullable=False, server_default="pending"),
    sa.Column("outcome", sa.String(32)),
    sa.Column("verification", sa.String(8)),
    sa.Column("picked", sa.Integer, nullable=False, server_default="0"),
    sa.Column("started_at", Ts),
    sa.Column("finished_at", Ts),
    sa.Column("input_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("output_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cost_usd", sa.Double, nullable=False, server_default="0"),
    sa.Column("summary", sa.Text),
    sa.Column("run_id", sa.BigInteger),
    sa.Column("attempt_task_id", sa.String(16)),
    sa.Column("runs", sa.Integer, nullable=False, server_default="0"),
    sa.Column("error", sa.Text),
    sa.Index("ix_attempts_board_state", "board", "state"),
)

task_events = sa.Table(
    "task_events",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("task_id", sa.String(16)),
    sa.Column("run_id", sa.BigInteger),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("payload", sa.Text, nullable=False, server_default="{}"),
    sa.Column("actor", sa.Text),
    sa.Column("created_at", Ts, nullable=False),
    # the writing transaction's id: PostgreSQL's default is pg_current_xact_id() (set by
    # migration 0013); followers read in (xid, id) order below the oldest running transaction
    sa.Column("xid", sa.BigInteger, nullable=False, server_default="0"),
    sa.Index("ix_events_task", "task_id", "id"),
    # PostgreSQL also has ix_events_xid (xid, id), created by migration 0013 only there: SQLite
    # orders by id and would only pay for the index on every insert. PostgreSQL also has the
    # table task_count_deltas (board, status, d, prev), filled by triggers on tasks (0013; one
    # row per status change since 0021), which the board view sums instead of counting. SQLite has the table task_counts (board, status,
    # n), one row per board and status kept by triggers on tasks (0020), read the same way.
    # no sqlite_autoincrement: ids stay increasing because the newest row is never deleted (0004)
)

goals = sa.Table(
    "goals",
    metadata,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False, server_default=""),
    sa.Column("acceptance", sa.Text, nullable=False, server_default="[]"),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
    sa.Column("created_by", sa.Text),
    sa.Column("created_at", Ts, nullable=False),
    sa.Column("completed_at", Ts),
    sa.Column("budget", sa.Text, nullable=False, server_default="{}"),
    sa.Column("verify", sa.Text, nullable=False, server_default="[]"),
    sa.Column("evidence", sa.Text),
    sa.Index("ix_goals_board", "board", "status"),
)

profiles = sa.Table(
    "profiles",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("description", sa.Text, nullable=False, server_default=""),
    sa.Column("adapter", sa.String(32), nullable=False, server_default="command"),
    sa.Column("command", sa.Text, nullable=False),
    sa.Column("env", sa.Text, nullable=False, server_default="{}"),
    sa.Column("max_concurrency", sa.Integer),
    sa.Column("skills", sa.Text, nullable=False, server_default="[]"),
    sa.Column("model", sa.Text),
    sa.Column("enabled", sa.Integer, nullable=False, server_default="1"),
    sa.Column("orchestrator", sa.Integer, nullable=False, server_default="0"),
    sa.Column("isolation", sa.String(16), nullable=False, server_default="none"),
    sa.Column("permission", sa.String(16), nullable=False, server_default="edit"),
    sa.Column("created_at", Ts, nullable=False),
    sa.Column("updated_at", Ts, nullable=False),
)

attachments = sa.Table(
    "attachments",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.String(16), nullable=False),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("created_by", sa.Text),
    sa.Column("created_at", Ts, nullable=False),
    sa.Index("ix_attachments_task", "task_id"),
)

tokens = sa.Table(
    "tokens",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("boards", sa.Text, nullable=False, server_default="[]"),
    sa.Column("run_id", sa.BigInteger),
    sa.Column("task_id", sa.String(16)),
    sa.Column("created_at", Ts, nullable=False),
    sa.Column("expires_at", Ts),
    sa.Column("revoked_at", Ts),
    sa.Column("last_used_at", Ts),
    sa.Index("ix_tokens_name", "name"),
)

wiki_pages = sa.Table(
    "wiki_pages",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("slug", sa.String(128), nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("source_task_id", sa.String(16)),
    sa.Column("author", sa.Text),
    sa.Column("created_at", Ts, nullable=False),
    sa.Column("updated_at", Ts, nullable=False),
    sa.UniqueConstraint("board", "slug", name="ux_wiki_board_slug"),
)

reviews = sa.Table(
    "reviews",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.String(16), nullable=False),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("run_id", sa.BigInteger),
    sa.Column("reviewer", sa.Text, nullable=False),
    sa.Column("verdict", sa.String(32), nullable=False),
    sa.Column("score", sa.Integer),
    sa.Column("summary", sa.Text, nullable=False, server_default=""),
    sa.Column("findings", sa.Text, nullable=False, server_default="[]"),
    sa.Column("created_at", Ts, nullable=False),
    sa.Index("ix_reviews_task", "task_id"),
)

notify_subscriptions = sa.Table(
    "notify_subscriptions",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("board", sa.String(64), nullable=False),
    # task | goal | board | profile, and the task id, goal id, board slug or profile name
    sa.Column("scope", sa.String(16), nullable=False),
    sa.Column("subject", sa.String(64), nullable=False),
    # the Apprise URL; ``display`` is the same URL with its secrets masked (the only form shown)
    sa.Column("target", sa.Text, nullable=False),
    sa.Column("display", sa.Text, nullable=False),
    sa.Column("kinds", sa.Text, nullable=False, server_default="[]"),
    # the last event id handled: advances only once a delivery succeeded
    sa.Column("cursor", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("failures", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_attempt_at", Ts),
    sa.Column("last_attempt_at", Ts),
    sa.Column("last_sent_at", Ts),
    sa.Column("last_error", sa.Text),
    sa.Column("parked_at", Ts),
    # the notifier holding the subscription (one host delivers each event)
    sa.Column("lease_owner", sa.Text),
    sa.Column("lease_until", Ts),
    sa.Column("delivered", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("created_by", sa.Text),
    sa.Column("created_at", Ts, nullable=False),
    # 1: subscribed by an unscoped administrator, the local CLI or ``notify_default``; 0: it may
    # reach public addresses only (notify/outbound.py)
    sa.Column("trusted", sa.Integer, nullable=False, server_default="0"),
    sa.UniqueConstraint("board", "scope", "subject", "target", name="ux_notify_subject_target"),
)

supervisor_wakes = sa.Table(
    "supervisor_wakes",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("subject", sa.Text),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("created_at", Ts, nullable=False),
    sa.Column("handled_at", Ts),
    # 0008: coalescing, re-firing and auditing
    sa.Column("detail", sa.Text, nullable=False, server_default="{}"),
    sa.Column("attempt", sa.Integer, nullable=False, server_default="1"),
    sa.Column("task_id", sa.String(16)),
    sa.Column("updated_at", Ts),
    sa.Column("note", sa.Text),
    _partial("ux_wakes_pending", "board", "reason", "subject", unique=True, where="status = 'pending'"),
    sa.Index("ix_wakes_status", "status", "board"),
    sa.Index("ix_wakes_task", "task_id"),
)

schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("cron", sa.Text, nullable=False),
    sa.Column("template", sa.Text),
    sa.Column("template_values", sa.Text, nullable=False, server_default="{}"),
    sa.Column("clone_task_id", sa.String(16)),
    sa.Column("missed", sa.String(8), nullable=False, server_default="skip"),
    sa.Column("enabled", sa.Integer, nullable=False, server_default="1"),
    sa.Column("next_at", Ts, nullable=False),
    sa.Column("last_fired_at", Ts),
    sa.Column("created_by", sa.Text),
    sa.Column("created_at", Ts, nullable=False),
    sa.Index("ix_schedules_due", "enabled", "next_at"),
)

schedule_fires = sa.Table(
    "schedule_fires",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("schedule_id", sa.BigInteger, nullable=False),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("occurrence_at", Ts, nullable=False),
    sa.Column("fired_at", Ts, nullable=False),
    sa.Column("host", sa.Text),
    sa.Column("task_ids", sa.Text, nullable=False, server_default="[]"),
    sa.UniqueConstraint("schedule_id", "occurrence_at", name="ux_schedule_fires_occurrence"),
)

budgets = sa.Table(
    "budgets",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("scope", sa.String(16), nullable=False),
    sa.Column("ref", sa.String(64), nullable=False),
    sa.Column("board", sa.String(64)),
    sa.Column("per", sa.String(8), nullable=False, server_default=""),
    sa.Column("max_runs", sa.Integer),
    sa.Column("max_runtime", sa.Integer),
    sa.Column("max_tokens", sa.BigInteger),
    sa.Column("max_cost", sa.Double),
    sa.Column("expected_cost", sa.Double),
    sa.Column("warned_window", sa.Text),
    sa.Column("exhausted_window", sa.Text),
    sa.Column("created_at", Ts, nullable=False),
    sa.Column("updated_at", Ts, nullable=False),
    sa.UniqueConstraint("scope", "ref", name="ux_budgets_scope_ref"),
)

# what each LLM helper call spent, against its task, goal and board (0009); a run's spend is read
# from its row of task_runs, and a run has a row here only as its ``pending`` marker (source
# 'pending', no spend) while a budget covers it and its worker's exit is not recorded (0024)
budget_usage = sa.Table(
    "budget_usage",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("task_id", sa.String(16)),
    sa.Column("goal_id", sa.String(16)),
    sa.Column("profile", sa.Text),
    sa.Column("run_id", sa.BigInteger),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("at", Ts, nullable=False),
    sa.Column("runs", sa.Integer, nullable=False, server_default="0"),
    sa.Column("runtime", sa.Double, nullable=False, server_default="0"),
    sa.Column("tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cost_usd", sa.Double, nullable=False, server_default="0"),
    sa.Column("pending", sa.Integer, nullable=False, server_default="0"),
    sa.Index("ix_budget_usage_board", "board", "at"),
    # a task's rows (a task budget's total, a purge) and a run's marker (0022)
    sa.Index("ix_budget_usage_task_run", "task_id", "run_id"),
    _partial("ix_budget_usage_pending", "at", where="pending = 1"),
    _partial("ix_budget_usage_goal", "goal_id", where="goal_id IS NOT NULL"),
)

# what each budgeted scope spent per window, kept with the ledger (0009)
budget_totals = sa.Table(
    "budget_totals",
    metadata,
    sa.Column("scope", sa.String(16), primary_key=True),
    sa.Column("ref", sa.String(64), primary_key=True),
    sa.Column("win", sa.String(16), primary_key=True),
    sa.Column("runs", sa.Integer, nullable=False, server_default="0"),
    sa.Column("runtime", sa.Double, nullable=False, server_default="0"),
    sa.Column("tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cost_usd", sa.Double, nullable=False, server_default="0"),
)

# the insight rollups (0018): per board, UTC day, profile and model, what its runs did; one
# upsert per closed run, done task and review verdict, in that transaction (store/rollups.py)
run_rollups = sa.Table(
    "run_rollups",
    metadata,
    sa.Column("board", sa.String(64), primary_key=True),
    sa.Column("day", sa.Integer, primary_key=True),
    sa.Column("profile", sa.Text, primary_key=True),
    sa.Column("model", sa.Text, primary_key=True),
    # PostgreSQL: the writing connection's shard (0021), so concurrent writers of one key do not
    # wait on one row; readers sum a key's rows
    sa.Column("shard", sa.SmallInteger, primary_key=True, server_default="0"),
    # PostgreSQL keeps the counts in another physical order (0023): what a closed run adds to
    # side by side, so the WAL of its HOT update holds one short stretch of the row
    *(sa.Column(c, sa.Double if c in ("cost_usd", "duration_s") else sa.BigInteger, nullable=False,
                server_default="0") for c in _rollups.COUNTS),
)

# closed runs not yet added to run_rollups (0029): a run's close appends its row here, one
# narrow insert instead of the update of a wide rollup row; a fold (an insights read, a running
# dispatcher now and then) adds them all in one statement and deletes them (store/rollups.py)
run_rollups_pending = sa.Table(
    "run_rollups_pending",
    metadata,
    sa.Column("run_id", BigId, primary_key=True, autoincrement=False),
    # 1: the close made its task done (its done and cycle time are added with the run)
    sa.Column("done", sa.SmallInteger, nullable=False, server_default="0"),
)

meta = sa.Table(
    "agentboard_meta",
    metadata,
    sa.Column("key", sa.String(128), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

# a chat user (Slack, Discord, Telegram) and what they may do, as an API token (0019)
chat_links = sa.Table(
    "chat_links",
    metadata,
    sa.Column("platform", sa.String(16), primary_key=True),
    sa.Column("user_id", sa.String(64), primary_key=True),
    sa.Column("role", sa.String(16), nullable=False),
    # one board, or NULL: every board
    sa.Column("board", sa.String(64)),
    sa.Column("created_by", sa.Text),
    sa.Column("created_at", Ts, nullable=False),
)

# the chat thread a task was created from: its notifications go back there (0019)
chat_threads = sa.Table(
    "chat_threads",
    metadata,
    sa.Column("task_id", sa.String(64), primary_key=True),
    sa.Column("board", sa.String(64), nullable=False),
    sa.Column("platform", sa.String(16), nullable=False),
    sa.Column("channel", sa.String(128), nullable=False),
    sa.Column("thread", sa.String(256), nullable=False),
    sa.Column("created_at", Ts, nullable=False),
)
