"""one index of the usage ledger for a task's rows and a run's row, so a closed run writes one page fewer

Revision ID: 0022
Revises: 0020
Create Date: 2026-12-01

- ``ix_budget_usage_task_run`` on ``(task_id, run_id)`` replaces ``ix_budget_usage_task``
  (``task_id``) and ``ix_budget_usage_run`` (``run_id``). A task's rows (a task budget's total,
  a purge) are its prefix; a run's row is found by its task and run (the task from the run's
  own row), when the run closes (written once) and when its usage or its worker's exit comes
  in later. Every closed run inserted into both indexes; now into one.
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_budget_usage_task_run", "budget_usage", ["task_id", "run_id"])
    op.drop_index("ix_budget_usage_task", table_name="budget_usage")
    op.drop_index("ix_budget_usage_run", table_name="budget_usage")


def downgrade() -> None:
    op.create_index("ix_budget_usage_task", "budget_usage", ["task_id"])
    op.create_index("ix_budget_usage_run", "budget_usage", ["run_id"])
    op.drop_index("ix_budget_usage_task_run", table_name="budget_usage")
