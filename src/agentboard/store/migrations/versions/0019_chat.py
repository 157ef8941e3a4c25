"""the board from chat: who may act from a chat platform, and the thread a task came from

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01

- ``chat_links``: a chat user (``platform``, ``user_id``) mapped to a role (admin, member,
  viewer) and optionally one board, as an API token is.
- ``chat_threads``: the chat thread a task was created from (platform, channel, thread id);
  its notifications are posted back there.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chat_links",
        sa.Column("platform", sa.String(16), primary_key=True),
        sa.Column("user_id", sa.String(64), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("board", sa.String(64)),
        sa.Column("created_by", sa.Text),
        sa.Column("created_at", sa.Double(), nullable=False),
    )
    op.create_table(
        "chat_threads",
        sa.Column("task_id", sa.String(64), primary_key=True),
        sa.Column("board", sa.String(64), nullable=False),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("channel", sa.String(128), nullable=False),
        sa.Column("thread", sa.String(256), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("chat_threads")
    op.drop_table("chat_links")
