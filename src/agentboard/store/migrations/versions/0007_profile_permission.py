"""what a profile's claude/codex agents may do without asking

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30

- ``profiles.permission``: ``edit`` (the default: edit files and run commands in the
  workspace), ``full`` (no permission checks, no sandbox) or ``read`` (read-only).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("profiles", sa.Column("permission", sa.String(16), nullable=False, server_default="edit"))


def downgrade() -> None:
    with op.batch_alter_table("profiles") as batch:
        batch.drop_column("permission")
