"""indexes for the hot writes and the board view

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

- ``ix_tasks_board_status`` and ``ix_tasks_board_assignee`` end in the display order
  (``priority DESC, created_at, id``): the first cards of a board-view column and a filtered list
  come straight from the index, with no sort of the whole column (100,000-task boards).
- ``ix_tasks_goal``, ``ix_tasks_running_host`` and ``ix_runs_open`` become partial (only tasks
  with a goal, running tasks, open runs): most writes no longer touch them, which keeps the pages
  a commit writes few.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_tasks_board_status", table_name="tasks")
    op.drop_index("ix_tasks_board_assignee", table_name="tasks")
    op.drop_index("ix_tasks_goal", table_name="tasks")
    op.drop_index("ix_tasks_running_host", table_name="tasks")
    op.drop_index("ix_runs_open", table_name="task_runs")
    op.create_index(
        "ix_tasks_board_status", "tasks",
        ["board", "status", sa.text("priority DESC"), "created_at", "id"],
    )
    op.create_index(
        "ix_tasks_board_assignee", "tasks",
        ["board", "assignee", "status", sa.text("priority DESC"), "created_at", "id"],
    )
    op.create_index(
        "ix_tasks_goal", "tasks", ["goal_id"],
        sqlite_where=sa.text("goal_id IS NOT NULL"), postgresql_where=sa.text("goal_id IS NOT NULL"),
    )
    op.create_index(
        "ix_tasks_running_host", "tasks", ["worker_host"],
        sqlite_where=sa.text("status = 'running'"), postgresql_where=sa.text("status = 'running'"),
    )
    op.create_index(
        "ix_runs_open", "task_runs", ["worker_host"],
        sqlite_where=sa.text("status = 'open'"), postgresql_where=sa.text("status = 'open'"),
    )


def downgrade() -> None:
    for name, table in (("ix_tasks_board_status", "tasks"), ("ix_tasks_board_assignee", "tasks"),
                        ("ix_tasks_goal", "tasks"), ("ix_tasks_running_host", "tasks"),
                        ("ix_runs_open", "task_runs")):
        op.drop_index(name, table_name=table)
    op.create_index("ix_tasks_board_status", "tasks", ["board", "status", "priority", "created_at"])
    op.create_index("ix_tasks_board_assignee", "tasks", ["board", "assignee", "status"])
    op.create_index("ix_tasks_goal", "tasks", ["goal_id"])
    op.create_index("ix_tasks_running_host", "tasks", ["status", "worker_host"])
    op.create_index("ix_runs_open", "task_runs", ["status", "worker_host"])
