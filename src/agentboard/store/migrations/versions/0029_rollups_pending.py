"""a closed run is added to the insight rollups by a fold, not by its close

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-03

A run's close used to add its facts to ``run_rollups`` in its own transaction: the update of a
row of 77 columns, the busiest row of the installation, in every completion. On PostgreSQL it
was about a sixth of the server's work of a completion (0.08 of 0.50 ms), and on SQLite two of
the ten pages a completion writes.

- ``run_rollups_pending (run_id, done)``: a run's close appends one narrow row (``done``: the
  close made its task done). A fold (``kernel.insights.fold``) adds every pending run in one
  aggregated upsert and deletes them: every insights read folds first, a running dispatcher
  folds now and then, and the hooks that would read a pending run wrongly (a done task leaving
  done, usage learned late) add it themselves first. Empty when created: every run closed
  before this revision is in the rollups already.
- PostgreSQL: ``agentboard_complete_running`` (0027) appends the run to the pending ones instead
  of adding it to the rollups; everything else it does is unchanged.
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

_0027 = importlib.import_module("agentboard.store.migrations.versions.0027_pg_completion_function")
#: the rollup block of 0027's function: from the run's duration to the rollup's insert
_ROLLUP_BLOCK_START = "    -- the run's insight rollup"
_ROLLUP_BLOCK_END = "    IF x.status = 'done' THEN\n        -- the children"
_PENDING = (
    "    -- the run, pending for the insight rollups (kernel.insights.run_closed_in)\n"
    "    INSERT INTO run_rollups_pending (run_id, done) VALUES (p_run, CASE WHEN x.status = 'done' THEN 1 ELSE 0 END);\n\n"
)


def _function() -> str:
    old = _0027._FUNCTION
    start, end = old.index(_ROLLUP_BLOCK_START), old.index(_ROLLUP_BLOCK_END)
    return old[:start] + _PENDING + old[end:]


def upgrade() -> None:
    op.create_table(
        "run_rollups_pending",
        sa.Column("run_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True,
                  autoincrement=False),
        sa.Column("done", sa.SmallInteger, nullable=False, server_default="0"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_function())


def downgrade() -> None:
    from agentboard.store import rollups

    for sql in rollups.fold_statements(op.get_bind().dialect.name):  # the pending runs into the rollups
        op.execute(sql)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_0027._FUNCTION)
    op.drop_table("run_rollups_pending")
