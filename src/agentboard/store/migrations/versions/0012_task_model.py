"""a task's own model, overriding its profile's for the runs of that task

Revision ID: 0012
Revises: 0013
Create Date: 2026-11-30

- ``tasks.model``: the model name handed to whichever agent CLI runs the task (``--model``);
  NULL uses the profile's ``model``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tasks", sa.Column("model", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("model")
