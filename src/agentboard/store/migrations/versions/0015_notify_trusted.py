"""notification targets remember whether an administrator subscribed them

Revision ID: 0015
Revises: 0009
Create Date: 2026-12-01

- ``notify_subscriptions.trusted``: 1 when an unscoped administrator token, the local CLI or
  ``notify_default`` subscribed the target (delivered to any address); 0 when a member did (it
  reaches public addresses and the ``notify_allow_hosts`` setting only). Subscriptions made before
  this revision are 0: nobody recorded who made them, so they get the member's rule until an
  administrator subscribes them again or allows their host.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("notify_subscriptions", sa.Column("trusted", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("notify_subscriptions") as batch:
        batch.drop_column("trusted")
