"""budgets: limits per task, goal, board and profile, and the usage ledger they are checked against

Revision ID: 0009
Revises: 0012
Create Date: 2026-11-30

- ``budgets``: one row per scope (``task``, ``goal``, ``board``, ``profile`` + its id) with its
  limits (runs, runtime seconds, tokens, cost in USD), an optional window (``day``/``month``), the
  configured expected cost of one run, and the window in which its 80% warning and its 100%
  event were last written (so each is written once per window).
- ``budget_usage``: what each closed run and each LLM helper call spent, with the task, goal,
  board and profile it counts against, written in the transaction that closes the run
  (``pending`` while the worker's exit, which brings an agent's usage, is not processed yet).
  Runs closed before this revision are copied in.
- ``budget_totals``: what each budgeted scope spent per window (``all``, a day, a month), kept
  up to date with the ledger in the same transactions, so a check reads one row.
- ``tasks.parents_override``: 1 when a person promoted the task over unfinished parents
  (``agentboard promote --force``): the claim no longer sends it back to todo for them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0012"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.add_column("tasks", sa.Column("parents_override", sa.Integer, nullable=False, server_default="0"))
    op.create_table(
        "budgets",
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
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
        sa.UniqueConstraint("scope", "ref", name="ux_budgets_scope_ref"),
    )
    op.create_table(
        "budget_usage",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("board", sa.String(64), nullable=False),
        sa.Column("task_id", sa.String(16)),
        sa.Column("goal_id", sa.String(16)),
        sa.Column("profile", sa.Text),
        sa.Column("run_id", sa.BigInteger),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("at", sa.Double, nullable=False),
        sa.Column("runs", sa.Integer, nullable=False, server_default="0"),
        sa.Column("runtime", sa.Double, nullable=False, server_default="0"),
        sa.Column("tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Double, nullable=False, server_default="0"),
        sa.Column("pending", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_table(
        "budget_totals",
        sa.Column("scope", sa.String(16), primary_key=True),
        sa.Column("ref", sa.String(64), primary_key=True),
        sa.Column("win", sa.String(16), primary_key=True),
        sa.Column("runs", sa.Integer, nullable=False, server_default="0"),
        sa.Column("runtime", sa.Double, nullable=False, server_default="0"),
        sa.Column("tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Double, nullable=False, server_default="0"),
    )
    op.create_index("ix_budget_usage_board", "budget_usage", ["board", "at"])
    op.create_index("ix_budget_usage_task", "budget_usage", ["task_id"])
    op.create_index("ix_budget_usage_run", "budget_usage", ["run_id"])
    op.create_index("ix_budget_usage_profile", "budget_usage", ["profile", "at"])
    op.create_index("ix_budget_usage_pending", "budget_usage", ["at"],
                    sqlite_where=sa.text("pending = 1"), postgresql_where=sa.text("pending = 1"))
    op.create_index("ix_budget_usage_goal", "budget_usage", ["goal_id"],
                    sqlite_where=sa.text("goal_id IS NOT NULL"), postgresql_where=sa.text("goal_id IS NOT NULL"))
    op.execute(
        "INSERT INTO budget_usage (board, task_id, goal_id, profile, run_id, source, at, runs, runtime, tokens, "
        "cost_usd) SELECT r.board, r.task_id, t.goal_id, r.profile, r.id, 'run', COALESCE(r.ended_at, r.started_at), "
        "1, CASE WHEN r.ended_at > r.started_at THEN r.ended_at - r.started_at ELSE 0 END, "
        "COALESCE(r.input_tokens, 0) + COALESCE(r.output_tokens, 0), COALESCE(r.cost_usd, 0) "
        "FROM task_runs r LEFT JOIN tasks t ON t.id = r.task_id WHERE r.status = 'closed' AND r.synthetic = 0"
    )


def downgrade() -> None:
    op.drop_table("budget_totals")
    op.drop_table("budget_usage")
    op.drop_table("budgets")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("parents_override")
