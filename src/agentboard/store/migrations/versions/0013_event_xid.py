"""the writing transaction's id on each event, so PostgreSQL writers need no global lock

Revision ID: 0013
Revises: 0007
Create Date: 2026-11-30

- ``task_events.xid``: on PostgreSQL ``pg_current_xact_id()`` of the transaction that wrote the
  event (its default; events written before this revision get 0, they committed in id order under
  the old write lock). Followers read events ordered by ``(xid, id)`` and only below the oldest
  transaction still running, so event ids no longer need to commit in order and writers stop
  taking one installation-wide lock. On SQLite the column stays 0 (one writer at a time: ids
  already commit in order).
- ``ix_events_xid`` (PostgreSQL only): ``(xid, id)``, the followers' order.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a constant default first: no table rewrite, existing rows read as 0
    op.add_column("task_events", sa.Column("xid", sa.BigInteger, nullable=False, server_default="0"))
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE task_events ALTER COLUMN xid SET DEFAULT (pg_current_xact_id()::text::bigint)")
        op.create_index("ix_events_xid", "task_events", ["xid", "id"])


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_events_xid", table_name="task_events")
    with op.batch_alter_table("task_events") as batch:
        batch.drop_column("xid")
