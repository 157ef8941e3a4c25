"""a task's git base and what its approval did with its branch

Revision ID: 0011
Revises: 0008
Create Date: 2026-11-30

- ``tasks.base_branch``: the branch a worktree task's branch started from (the board's base
  branch, its single parent's branch, or the integration branch merging its parents).
- ``tasks.integration``: what approval did with the branch (``merged``, ``squashed``,
  ``rebased``, ``pr_opened``, ``refused``, ``left``), shown on the card.
- ``tasks.pr_url``: the pull request opened for the branch (board setting ``integrate = pr``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tasks", sa.Column("base_branch", sa.Text))
    op.add_column("tasks", sa.Column("integration", sa.String(16)))
    op.add_column("tasks", sa.Column("pr_url", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("pr_url")
        batch.drop_column("integration")
        batch.drop_column("base_branch")
