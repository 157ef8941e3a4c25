"""two indexes no query needs, so claim, complete and every event write fewer pages

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

- ``ix_runs_open``: runs are always found by id or by task; the open runs of a host are found
  through their running tasks (``ix_tasks_running_host``). Every claim inserted into it and every
  close removed from it.
- ``ix_events_board``: the event log is read by cursor (``id > :cursor``, the primary key) and
  filtered by board on the way; the newest id of a board is found scanning back from the end.
  Every event (one or more per write transaction) inserted into it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_runs_open", table_name="task_runs")
    op.drop_index("ix_events_board", table_name="task_events")


def downgrade() -> None:
    op.create_index("ix_events_board", "task_events", ["board", "id"])
    op.create_index(
        "ix_runs_open", "task_runs", ["worker_host"],
        sqlite_where=sa.text("status = 'open'"), postgresql_where=sa.text("status = 'open'"),
    )
