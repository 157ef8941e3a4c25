"""fewer index entries per task status change

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-03

A task's claim and its completion change its status, so on PostgreSQL its update is never a
HOT update: every index of ``tasks`` whose row it still belongs to gets an entry for its new
version (about 75 bytes of WAL each).

- ``ix_tasks_running (worker_host, claim_expires) WHERE status = 'running'`` replaces
  ``ix_tasks_running_host (worker_host)`` and ``ix_tasks_running_claims (claim_expires)``, both
  over the running tasks: a claim adds one entry, not two. A pass still reads its own host's
  running tasks by the first column, and finds other hosts' lapsed claims in the same (small)
  index by the second.
- ``ix_tasks_board_assignee`` on PostgreSQL holds only the tasks waiting to be claimed
  (``status IN ('todo', 'ready')``): what the dispatcher looks up by assignee. A claim and a
  completion add no entry to it; a list filtered by assignee in another status reads the board's
  status index (``ix_tasks_board_status``) and filters. SQLite keeps the whole index: its planner
  uses a partial index only for a query that repeats the index's condition word for word.
- ``ix_count_deltas_board`` (PostgreSQL) is dropped: every status change appends a count delta,
  and its entry in that index. The deltas are few — a board's are folded into one row per
  status once they pass ``kernel.maintenance.COUNT_DELTAS_FOLD_AT`` — so the board view reads
  them all in one pass, and folds any board's that piled up; a running dispatcher folds them
  now and then too, so a board nobody looks at does not grow them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

_RUNNING = sa.text("status = 'running'")
_ASSIGNEE = ["board", "assignee", "status", sa.text("priority DESC"), "created_at", "id"]


def upgrade() -> None:
    op.create_index("ix_tasks_running", "tasks", ["worker_host", "claim_expires"],
                    sqlite_where=_RUNNING, postgresql_where=_RUNNING)
    op.drop_index("ix_tasks_running_host", table_name="tasks")
    op.drop_index("ix_tasks_running_claims", table_name="tasks")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_tasks_board_assignee", table_name="tasks")
        op.create_index("ix_tasks_board_assignee", "tasks", _ASSIGNEE,
                        postgresql_where=sa.text("status IN ('todo', 'ready')"))
        op.drop_index("ix_count_deltas_board", table_name="task_count_deltas")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_index("ix_count_deltas_board", "task_count_deltas", ["board", "status"])
        op.drop_index("ix_tasks_board_assignee", table_name="tasks")
        op.create_index("ix_tasks_board_assignee", "tasks", _ASSIGNEE)
    op.create_index("ix_tasks_running_claims", "tasks", ["claim_expires"],
                    sqlite_where=_RUNNING, postgresql_where=_RUNNING)
    op.create_index("ix_tasks_running_host", "tasks", ["worker_host"],
                    sqlite_where=_RUNNING, postgresql_where=_RUNNING)
    op.drop_index("ix_tasks_running", table_name="tasks")
