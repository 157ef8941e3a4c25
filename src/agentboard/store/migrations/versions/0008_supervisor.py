"""the supervisor: persisted, coalesced wakes; block targets; goals that verify

Revision ID: 0008
Revises: 0014
Create Date: 2026-11-30

- ``supervisor_wakes`` gains what a wake needs to be coalesced, judged and audited: ``detail``
  (JSON), ``attempt`` (a wake that expired re-fires once), ``task_id`` (the supervision task that
  took it), ``updated_at`` and ``note`` (why it was closed). One pending wake per
  ``(board, reason, subject)`` (a partial unique index); an index on ``(status, board)`` for the
  pass and the panel.
- ``tasks.purpose`` (``supervision`` for the supervisor's own tasks), ``tasks.block_on`` (the task
  a ``dependency`` block waits for) and ``tasks.block_to`` (the person a ``needs_input`` block is
  addressed to).
- ``goals.verify`` (the goal's acceptance commands, JSON) and ``goals.evidence`` (what closed it).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("supervisor_wakes", sa.Column("detail", sa.Text, nullable=False, server_default="{}"))
    op.add_column("supervisor_wakes", sa.Column("attempt", sa.Integer, nullable=False, server_default="1"))
    op.add_column("supervisor_wakes", sa.Column("task_id", sa.String(16)))
    op.add_column("supervisor_wakes", sa.Column("updated_at", sa.Double()))
    op.add_column("supervisor_wakes", sa.Column("note", sa.Text))
    op.create_index(
        "ux_wakes_pending", "supervisor_wakes", ["board", "reason", "subject"], unique=True,
        sqlite_where=sa.text("status = 'pending'"), postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index("ix_wakes_status", "supervisor_wakes", ["status", "board"])
    op.create_index("ix_wakes_task", "supervisor_wakes", ["task_id"])
    op.add_column("tasks", sa.Column("purpose", sa.String(16)))
    op.add_column("tasks", sa.Column("block_on", sa.String(16)))
    op.add_column("tasks", sa.Column("block_to", sa.Text))
    op.add_column("goals", sa.Column("verify", sa.Text, nullable=False, server_default="[]"))
    op.add_column("goals", sa.Column("evidence", sa.Text))


def downgrade() -> None:
    op.drop_index("ix_wakes_task", table_name="supervisor_wakes")
    op.drop_index("ix_wakes_status", table_name="supervisor_wakes")
    op.drop_index("ux_wakes_pending", table_name="supervisor_wakes")
    with op.batch_alter_table("supervisor_wakes") as batch:
        for col in ("note", "updated_at", "task_id", "attempt", "detail"):
            batch.drop_column(col)
    with op.batch_alter_table("tasks") as batch:
        for col in ("block_to", "block_on", "purpose"):
            batch.drop_column(col)
    with op.batch_alter_table("goals") as batch:
        for col in ("evidence", "verify"):
            batch.drop_column(col)
