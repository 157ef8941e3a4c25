"""partial indexes over the few tasks a pass times or settles: cooldowns, timed blocks, races, start times

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-04

Every dispatcher pass starts from one snapshot (``kernel.dispatching.pass_snapshot``). Three of
its reads had no index of their own:

- the earliest end of a ready task's cooldown, per board (``status = 'ready' AND
  cooldown_until > :now``): every ready task read;
- the earliest end of a timed block, per board (``status = 'blocked' AND block_kind =
  'rate_limited'``): every row of ``tasks`` read (a whole-table scan), so the pass grew with
  every task the board ever finished;
- the races under way (``status = 'ready' AND race_until IS NOT NULL``): every ready task read;
- the earliest start time of a task waiting in todo (``status = 'todo' AND not_before IS NOT
  NULL``): every todo task read.

On PostgreSQL the snapshot took 14 ms at 100,000 done tasks, 42 ms at 100,000 ready ones and
14–26 ms at 100,000 in todo (2.7 ms for a whole pass at a few hundred). Each index holds only
the rows it is for (a task in a cooldown, a rate-limited block, a race, a start time), so a
write to any other task only checks their predicates. The predicates are the reads' own terms (SQLite's planner uses a partial index only
for a query whose condition contains them, ``cooldown_until > :now`` standing for
``cooldown_until IS NOT NULL``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

#: name → (columns, predicate); ``store.schema`` declares the same
INDEXES = {
    "ix_tasks_cooldown": (["board", "cooldown_until"], "status = 'ready' AND cooldown_until IS NOT NULL"),
    "ix_tasks_timed_block": (["board", "cooldown_until"], "status = 'blocked' AND block_kind = 'rate_limited'"),
    "ix_tasks_ready_race": (["board"], "status = 'ready' AND race_until IS NOT NULL"),
    "ix_tasks_not_before": (["board", "not_before"], "status = 'todo' AND not_before IS NOT NULL"),
}


def upgrade() -> None:
    for name, (columns, where) in INDEXES.items():
        op.create_index(name, "tasks", columns, sqlite_where=sa.text(where), postgresql_where=sa.text(where))


def downgrade() -> None:
    for name in INDEXES:
        op.drop_index(name, table_name="tasks")
