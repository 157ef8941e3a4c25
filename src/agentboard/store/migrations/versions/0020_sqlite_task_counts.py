"""running task counts on SQLite too, and budget-blocked tasks found without reading the blocked

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-01

- ``task_counts`` (SQLite only): one row per board and status with its number of tasks, kept by
  triggers on ``tasks`` in the writing transaction (a task inserted, deleted, or changing status
  or board). ``/metrics`` and the board view read it instead of counting a large board's rows.
  SQLite has one writer at a time, so one counter row per status makes no writer wait for
  another; PostgreSQL keeps its append-only ``task_count_deltas`` (0013). Seeded from the
  existing tasks.
- ``ix_tasks_budget_blocked`` (both): a partial index on ``board`` of the tasks blocked by a
  spent budget, so ``agentboard_budget_blocked_tasks`` never reads a large board's other blocked
  tasks.
- ``ix_tasks_running_claims`` (both): a partial index on ``claim_expires`` of the running tasks,
  so a dispatcher pass finds other hosts' lapsed claims with one indexed read instead of
  reading every running task of the fleet.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_UP = "INSERT INTO task_counts (board, status, n) VALUES ({b}, {s}, 1) ON CONFLICT (board, status) DO UPDATE SET n = n + 1;"
_DOWN = "UPDATE task_counts SET n = n - 1 WHERE board = {b} AND status = {s};"


_BUDGET_BLOCKED = "status = 'blocked' AND block_kind = 'budget'"


def upgrade() -> None:
    # what it makes may be there already: a database the first release of this migration (after
    # 0016) stamped runs it again after 0017–0019 (``store.migrate._restamp_branch_0020``)
    op.create_index("ix_tasks_budget_blocked", "tasks", ["board"], sqlite_where=sa.text(_BUDGET_BLOCKED),
                    postgresql_where=sa.text(_BUDGET_BLOCKED), if_not_exists=True)
    op.create_index("ix_tasks_running_claims", "tasks", ["claim_expires"], sqlite_where=sa.text("status = 'running'"),
                    postgresql_where=sa.text("status = 'running'"), if_not_exists=True)
    if op.get_bind().dialect.name != "sqlite":
        return
    if not sa.inspect(op.get_bind()).has_table("task_counts"):
        op.execute("CREATE TABLE task_counts (board VARCHAR(64) NOT NULL, status VARCHAR(16) NOT NULL, "
                   "n INTEGER NOT NULL, PRIMARY KEY (board, status)) WITHOUT ROWID")
        op.execute("INSERT INTO task_counts (board, status, n) SELECT board, status, COUNT(*) FROM tasks "
                   "GROUP BY board, status")
    new = _UP.format(b="NEW.board", s="NEW.status")
    old = _DOWN.format(b="OLD.board", s="OLD.status")
    op.execute(f"CREATE TRIGGER IF NOT EXISTS tasks_count_insert AFTER INSERT ON tasks BEGIN {new} END")
    op.execute(f"CREATE TRIGGER IF NOT EXISTS tasks_count_delete AFTER DELETE ON tasks BEGIN {old} END")
    op.execute("CREATE TRIGGER IF NOT EXISTS tasks_count_update AFTER UPDATE OF status, board ON tasks "
               "WHEN OLD.status IS NOT NEW.status OR OLD.board IS NOT NEW.board "
               f"BEGIN {old} {new} END")


def downgrade() -> None:
    op.drop_index("ix_tasks_budget_blocked", table_name="tasks")
    op.drop_index("ix_tasks_running_claims", table_name="tasks")
    if op.get_bind().dialect.name != "sqlite":
        return
    for trigger in ("tasks_count_insert", "tasks_count_delete", "tasks_count_update"):
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    op.execute("DROP TABLE IF EXISTS task_counts")
