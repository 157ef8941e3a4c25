"""the assignee index holds only the ready tasks, on both backends

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-03

``ix_tasks_board_assignee`` becomes ``(board, assignee, priority DESC, created_at, id) WHERE
status = 'ready'``: what a claim of the next task by assignee reads, in the order it claims.

- SQLite had the whole index (all statuses, ``status`` in the key). A completion (running → done)
  moved the task's entry, and the promotion of its child (todo → ready) moved the child's from
  the todo part of the index to the ready part: two or three pages written to the log per
  completion. Now a completion writes none for its own task and one for the promoted child, and
  a claim only removes the task's entry.
- PostgreSQL had it over ``status IN ('todo', 'ready')`` (0025); a task created in todo (one
  with parents) no longer adds an entry either.
- A query meant to read it has the term ``status = 'ready'`` word for word
  (``store.engine.CLAIMABLE``): SQLite's planner uses a partial index only then. A list by
  assignee in another status reads the board's status index (``ix_tasks_board_status``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

_READY = sa.text("status = 'ready'")
_BEFORE = ["board", "assignee", "status", sa.text("priority DESC"), "created_at", "id"]


def upgrade() -> None:
    op.drop_index("ix_tasks_board_assignee", table_name="tasks")
    op.create_index("ix_tasks_board_assignee", "tasks",
                    ["board", "assignee", sa.text("priority DESC"), "created_at", "id"],
                    sqlite_where=_READY, postgresql_where=_READY)


def downgrade() -> None:
    op.drop_index("ix_tasks_board_assignee", table_name="tasks")
    if op.get_bind().dialect.name == "postgresql":
        op.create_index("ix_tasks_board_assignee", "tasks", _BEFORE,
                        postgresql_where=sa.text("status IN ('todo', 'ready')"))
    else:
        op.create_index("ix_tasks_board_assignee", "tasks", _BEFORE)
