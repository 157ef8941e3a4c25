"""what two migrations gained after some homes had run them: the todo tasks' start-time index, the
completion function's last body

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-06

Two migrations changed after they had first been released, so a home migrated by the first
release of each is stamped as having them without what they gained since:

- 0031 first created three of the pass's partial indexes; ``ix_tasks_not_before`` (the todo tasks
  waiting for a start time, ``status = 'todo' AND not_before IS NOT NULL``) joined it later. A
  home without it has every pass read the board's todo tasks, and downgrading 0031 failed on the
  missing index.
- 0035's completion function (PostgreSQL) gained its probes for budgets and children later.

This migration creates the index where it is missing and writes the function's current body again
(``CREATE OR REPLACE``: the same arguments and answers), on every home: a home that has both
already is left as it was. Its downgrade removes nothing (both belong to their own migrations).
"""

from __future__ import annotations

import importlib

from alembic import op

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None

_0031 = importlib.import_module("agentboard.store.migrations.versions.0031_pass_timer_indexes")
_0035 = importlib.import_module("agentboard.store.migrations.versions.0035_pg_completion_checks_first")


def upgrade() -> None:
    columns, where = _0031.INDEXES["ix_tasks_not_before"]
    op.execute(f"CREATE INDEX IF NOT EXISTS ix_tasks_not_before ON tasks ({', '.join(columns)}) WHERE {where}")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_0035._function())


def downgrade() -> None:
    pass
