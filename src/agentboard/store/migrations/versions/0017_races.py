"""races: several attempts at one task, each on its own branch, one picked

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01

- ``tasks.race_until``: NULL for a task that is no race; ``all`` or ``first-pass`` for one.
- ``tasks.race_of``: on an attempt's own task (``purpose = 'attempt'``), the race it runs for.
- ``attempts``: one row per entry of a race (``task_id``, ``n``): its profile, model, branch,
  state, outcome, verification, whether it was picked, its times, usage and summary, and the
  task that runs it (``attempt_task_id``).
- ``task_runs.race_attempt``: the attempt a run belongs to (``task_runs.attempt`` already counts
  a task's own runs).
- ``ix_tasks_race_of``, ``ix_attempts_board_state``: an attempt's race, a board's races under way.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tasks", sa.Column("race_until", sa.String(16), nullable=True))
    op.add_column("tasks", sa.Column("race_of", sa.String(16), nullable=True))
    op.add_column("task_runs", sa.Column("race_attempt", sa.Integer, nullable=True))
    op.create_index("ix_tasks_race_of", "tasks", ["race_of"],
                    sqlite_where=sa.text("race_of IS NOT NULL"), postgresql_where=sa.text("race_of IS NOT NULL"))
    op.create_table(
        "attempts",
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
        sa.Column("started_at", sa.Double),
        sa.Column("finished_at", sa.Double),
        sa.Column("input_tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Double, nullable=False, server_default="0"),
        sa.Column("summary", sa.Text),
        sa.Column("run_id", sa.BigInteger),
        sa.Column("attempt_task_id", sa.String(16)),
        sa.Column("runs", sa.Integer, nullable=False, server_default="0"),
        sa.Column("error", sa.Text),
    )
    op.create_index("ix_attempts_board_state", "attempts", ["board", "state"])


def downgrade() -> None:
    op.drop_index("ix_attempts_board_state", table_name="attempts")
    op.drop_table("attempts")
    op.drop_index("ix_tasks_race_of", table_name="tasks")
    with op.batch_alter_table("task_runs") as batch:
        batch.drop_column("race_attempt")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("race_of")
        batch.drop_column("race_until")
