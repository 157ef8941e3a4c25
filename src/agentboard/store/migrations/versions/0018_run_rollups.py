"""insight rollups: per board, day, profile and model, what the runs did

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01

- ``run_rollups``: one row per (board, UTC day, profile, model) with counts, sums and two
  bucketed histograms (run durations, task cycle times); the kernel adds to it in the
  transaction that closes a run, finishes a task or records a review (``store/rollups.py``).
  The upgrade fills it from the runs, tasks and reviews already recorded.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentboard.store import rollups

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_rollups",
        sa.Column("board", sa.String(64), primary_key=True),
        sa.Column("day", sa.Integer, primary_key=True),
        sa.Column("profile", sa.Text, primary_key=True),
        sa.Column("model", sa.Text, primary_key=True),
        *(sa.Column(c, sa.Double if c in ("cost_usd", "duration_s") else sa.BigInteger, nullable=False,
                    server_default="0") for c in rollups.COUNTS),
    )
    bind = op.get_bind()
    rollups.rebuild(bind, bind.dialect.name)


def downgrade() -> None:
    op.drop_table("run_rollups")
