"""task_events ids without SQLite's AUTOINCREMENT

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

Every write transaction appends an event. With AUTOINCREMENT, SQLite also rewrites the
``sqlite_sequence`` page in each of those transactions, one more page for every commit to write
and sync. Ids stay strictly increasing without it because the kernel never deletes the newest
event row (``prune_events`` and board deletion keep it), so ``max(id) + 1`` never goes back.
PostgreSQL (a sequence) is unchanged.
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _rebuild(autoincrement: bool) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    rows = bind.exec_driver_sql(
        "SELECT type, sql FROM sqlite_master WHERE tbl_name = 'task_events' AND sql IS NOT NULL"
    ).fetchall()
    table_sql = next(sql for kind, sql in rows if kind == "table")
    index_sql = [sql for kind, sql in rows if kind == "index"]
    if autoincrement:
        new_sql = table_sql.replace("PRIMARY KEY", "PRIMARY KEY AUTOINCREMENT", 1)
    else:
        new_sql = table_sql.replace(" AUTOINCREMENT", "", 1)
    if new_sql == table_sql:
        return
    op.execute(new_sql.replace("CREATE TABLE task_events", "CREATE TABLE task_events_rebuild", 1))
    op.execute("INSERT INTO task_events_rebuild SELECT * FROM task_events")
    op.execute("DROP TABLE task_events")
    op.execute("ALTER TABLE task_events_rebuild RENAME TO task_events")
    for sql in index_sql:
        op.execute(sql)


def upgrade() -> None:
    _rebuild(autoincrement=False)


def downgrade() -> None:
    _rebuild(autoincrement=True)
