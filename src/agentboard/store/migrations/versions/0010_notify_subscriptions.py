"""notification subscriptions on a task, a goal, a board or a profile's tasks

Revision ID: 0010
Revises: 0007
Create Date: 2026-11-30

The table ``notify_subscriptions`` had no users; it is rebuilt for the notifier:

- ``scope`` (task, goal, board, profile) and ``subject`` (the task id, goal id, board slug or
  profile name) say what a subscription follows; ``kinds`` (a JSON list, empty for the
  default kinds) what it delivers.
- ``target`` is the Apprise URL; ``display`` the same URL with its secrets masked, the only
  form ever shown back.
- ``cursor`` is the last event id handled; ``failures``, ``next_attempt_at``, ``last_error``
  and ``parked_at`` record retries and a parked target; ``lease_owner`` / ``lease_until``
  say which notifier holds the subscription (one host delivers each event).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0007"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.drop_table("notify_subscriptions")
    op.create_table(
        "notify_subscriptions",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("board", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("subject", sa.String(64), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("display", sa.Text(), nullable=False),
        sa.Column("kinds", sa.Text(), server_default="[]", nullable=False),
        sa.Column("cursor", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("failures", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", sa.Double()),
        sa.Column("last_attempt_at", sa.Double()),
        sa.Column("last_sent_at", sa.Double()),
        sa.Column("last_error", sa.Text()),
        sa.Column("parked_at", sa.Double()),
        sa.Column("lease_owner", sa.Text()),
        sa.Column("lease_until", sa.Double()),
        sa.Column("delivered", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("created_by", sa.Text()),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("board", "scope", "subject", "target", name="ux_notify_subject_target"),
    )


def downgrade() -> None:
    op.drop_table("notify_subscriptions")
    op.create_table(
        "notify_subscriptions",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("task_id", sa.String(16), nullable=False),
        sa.Column("board", sa.String(64), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("format", sa.String(16), server_default="json", nullable=False),
        sa.Column("cursor", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("task_id", "target", name="ux_notify_task_target"),
    )
