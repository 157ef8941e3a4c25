"""the writing transaction's id on each event (PostgreSQL writers need no global lock), and
task counts a large PostgreSQL board reads without counting

Revision ID: 0013
Revises: 0011
Create Date: 2026-11-30

- ``task_events.xid``: on PostgreSQL ``pg_current_xact_id()`` of the transaction that wrote the
  event (its default; events written before this revision get 0, they committed in id order under
  the old write lock). Followers read events ordered by ``(xid, id)`` and only below the oldest
  transaction still running, so event ids no longer need to commit in order and writers stop
  taking one installation-wide lock. On SQLite the column stays 0 (one writer at a time: ids
  already commit in order).
- ``ix_events_xid`` (PostgreSQL only): ``(xid, id)``, the followers' order.
- ``task_count_deltas`` (PostgreSQL only): +1 / -1 per board and status, appended by triggers on
  ``tasks`` whenever a task is inserted, deleted or changes status or board; the board view sums
  them instead of counting a million rows. Appending never makes two writers wait for each other
  (a counter row per status would); readers fold the rows of a board into one per status when
  they pile up (``kernel.maintenance.compact_task_counts``). Seeded from the existing tasks.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a constant default first: no table rewrite, existing rows read as 0
    op.add_column("task_events", sa.Column("xid", sa.BigInteger, nullable=False, server_default="0"))
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE task_events ALTER COLUMN xid SET DEFAULT (pg_current_xact_id()::text::bigint)")
        op.create_index("ix_events_xid", "task_events", ["xid", "id"])
        op.execute(
            "CREATE TABLE task_count_deltas (id BIGSERIAL PRIMARY KEY, board VARCHAR(64) NOT NULL, "
            "status VARCHAR(16) NOT NULL, d BIGINT NOT NULL)"
        )
        op.execute("CREATE INDEX ix_count_deltas_board ON task_count_deltas (board, status)")
        op.execute(
            "INSERT INTO task_count_deltas (board, status, d) "
            "SELECT board, status, COUNT(*) FROM tasks GROUP BY board, status"
        )
        op.execute(_COUNT_FUNCTION)
        op.execute("CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks FOR EACH ROW "
                   "EXECUTE FUNCTION agentboard_task_counts()")
        op.execute("CREATE TRIGGER tasks_count_delete AFTER DELETE ON tasks FOR EACH ROW "
                   "EXECUTE FUNCTION agentboard_task_counts()")
        op.execute("CREATE TRIGGER tasks_count_update AFTER UPDATE OF status, board ON tasks FOR EACH ROW "
                   "WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.board IS DISTINCT FROM NEW.board) "
                   "EXECUTE FUNCTION agentboard_task_counts()")


_COUNT_FUNCTION = """
CREATE FUNCTION agentboard_task_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO task_count_deltas (board, status, d) VALUES (NEW.board, NEW.status, 1);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO task_count_deltas (board, status, d) VALUES (OLD.board, OLD.status, -1);
    ELSE
        INSERT INTO task_count_deltas (board, status, d)
        VALUES (OLD.board, OLD.status, -1), (NEW.board, NEW.status, 1);
    END IF;
    RETURN NULL;
END
$$
"""


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for trigger in ("tasks_count_insert", "tasks_count_delete", "tasks_count_update"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger} ON tasks")
        op.execute("DROP FUNCTION IF EXISTS agentboard_task_counts()")
        op.execute("DROP TABLE IF EXISTS task_count_deltas")
        op.drop_index("ix_events_xid", table_name="task_events")
    with op.batch_alter_table("task_events") as batch:
        batch.drop_column("xid")
