"""a partial index over the tasks a pass acts on without a worker of its own

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-03

A dispatcher woken by a commit first glances at the board (``kernel.dispatching.glance``) to
learn whether a pass could do anything. The glance counts the tasks in review or triage and the
races under way, and reads the latest change among them. No index held them, so both read every
row of ``tasks``: about 1 ms per glance at 3,000 tasks on PostgreSQL, growing with the board's
history, and with eight hosts woken by each other's claims during a burst of 1,000 tasks it
was most of the server's work. ``ix_tasks_waiting (updated_at) WHERE status IN ('review',
'triage') OR (status = 'running' AND race_until IS NOT NULL)`` holds only them (its predicate is
``store.engine.WAITING``, word for word in the glance, which SQLite's planner needs); a task
that never goes to review, triage or a race never has an entry.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

_WAITING = sa.text("status IN ('review', 'triage') OR (status = 'running' AND race_until IS NOT NULL)")


def upgrade() -> None:
    op.create_index("ix_tasks_waiting", "tasks", ["updated_at"], sqlite_where=_WAITING, postgresql_where=_WAITING)


def downgrade() -> None:
    op.drop_index("ix_tasks_waiting", table_name="tasks")
