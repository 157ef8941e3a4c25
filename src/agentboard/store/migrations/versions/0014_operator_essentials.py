"""schedules, tasks that wait for a time, and what a running worker has read

Revision ID: 0014
Revises: 0010
Create Date: 2026-11-30

- ``tasks.not_before``: a task stays in todo until this time (epoch seconds), then is promoted.
- ``schedules``: recurring tasks, from a template or a task to clone, on a cron expression (UTC),
  with a policy for occurrences missed while no dispatcher ran (``skip`` or ``once``).
- ``schedule_fires``: one row per fired occurrence; the unique (schedule, occurrence) pair makes
  two dispatchers fire an occurrence once.
- ``task_runs.inbox_seen``: the last comment id a running worker was given (its inbox cursor);
  ``task_runs.nudged``: the worker was nudged once after stopping without a report.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0010"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.add_column("tasks", sa.Column("not_before", sa.Double(), nullable=True))
    op.add_column("task_runs", sa.Column("inbox_seen", sa.BigInteger(), nullable=True))
    op.add_column("task_runs", sa.Column("nudged", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "schedules",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("board", sa.String(64), nullable=False),
        sa.Column("cron", sa.Text(), nullable=False),
        sa.Column("template", sa.Text(), nullable=True),
        sa.Column("template_values", sa.Text(), nullable=False, server_default="{}"),
        sa.Column("clone_task_id", sa.String(16), nullable=True),
        sa.Column("missed", sa.String(8), nullable=False, server_default="skip"),
        sa.Column("enabled", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("next_at", sa.Double(), nullable=False),
        sa.Column("last_fired_at", sa.Double(), nullable=True),
        sa.Column("created_by", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
    )
    op.create_index("ix_schedules_due", "schedules", ["enabled", "next_at"])
    op.create_table(
        "schedule_fires",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("schedule_id", sa.BigInteger(), nullable=False),
        sa.Column("board", sa.String(64), nullable=False),
        sa.Column("occurrence_at", sa.Double(), nullable=False),
        sa.Column("fired_at", sa.Double(), nullable=False),
        sa.Column("host", sa.Text(), nullable=True),
        sa.Column("task_ids", sa.Text(), nullable=False, server_default="[]"),
        sa.UniqueConstraint("schedule_id", "occurrence_at", name="ux_schedule_fires_occurrence"),
    )


def downgrade() -> None:
    op.drop_table("schedule_fires")
    op.drop_index("ix_schedules_due", table_name="schedules")
    op.drop_table("schedules")
    with op.batch_alter_table("task_runs") as batch:
        batch.drop_column("nudged")
        batch.drop_column("inbox_seen")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("not_before")
