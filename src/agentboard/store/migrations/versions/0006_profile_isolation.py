"""how a profile's workers are isolated from the host

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30

- ``profiles.isolation``: ``none`` (the default: the worker runs as the dispatcher's OS user),
  ``user`` (as the configured worker user) or ``sandbox`` (under bubblewrap).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("profiles", sa.Column("isolation", sa.String(16), nullable=False, server_default="none"))


def downgrade() -> None:
    with op.batch_alter_table("profiles") as batch:
        batch.drop_column("isolation")
