"""the supervisor's tasks, found without reading a board's others

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01

- ``ix_tasks_supervision``: a partial index on ``(board, status)`` of the tasks whose
  ``purpose`` is ``supervision``. The board view leaves them out of its columns by default and
  takes their counts from it (on PostgreSQL the other counts come from the running totals).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_tasks_supervision", "tasks", ["board", "status"],
                    sqlite_where=sa.text("purpose = 'supervision'"),
                    postgresql_where=sa.text("purpose = 'supervision'"))


def downgrade() -> None:
    op.drop_index("ix_tasks_supervision", table_name="tasks")
