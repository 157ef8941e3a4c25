"""fewer bytes written per task status change on PostgreSQL

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-01

- ``task_count_deltas`` (PostgreSQL only): a task that changes status on its board appends one
  row, ``(board, status, d = 1, prev)``, meaning +1 for ``status`` and -1 for ``prev``, where it
  appended two (-1 for the old status, +1 for the new one). A new task's row and a deleted
  task's row have no ``prev``; a task that moves to another board still appends two. Readers
  count each row for ``status`` and, negated, for ``prev`` (``kernel.maintenance.COUNT_ROWS_PG``).
  The rows lose their ``id`` column and its primary key: nothing reads a delta by id, and every
  status change paid for a sequence value and an index entry of its own.
- ``fillfactor`` (PostgreSQL only): ``tasks`` 90, ``task_runs`` 80, ``run_rollups`` 50, so the
  new version of an updated row finds room on its own page: a run closed by its completion (no
  indexed column changes) is then a HOT update, with no new index entries. Pages written from
  now on keep the room; existing pages fill as before until they are rewritten.
- ``run_rollups.shard`` (both): part of the primary key. A closed run's upsert on PostgreSQL
  adds to the row of its connection's shard (``pg_backend_pid() % 8``), so completions on one
  board, profile and model from several processes no longer wait for each other on one row
  lock until they commit; readers already sum the rows of a key. SQLite (one writer) and the
  rebuild write shard 0.
"""

from __future__ import annotations

import warnings

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

#: room left on each page for the new versions of its rows: a run's close and a rollup's upsert
#: then stay on the page (a HOT update: no index entry), a task's status change too (one page
#: written, not two)
_FILLFACTOR = {"tasks": 90, "task_runs": 80, "run_rollups": 50}

_COUNT_FUNCTION = """
CREATE OR REPLACE FUNCTION agentboard_task_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO task_count_deltas (board, status, d) VALUES (NEW.board, NEW.status, 1);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO task_count_deltas (board, status, d) VALUES (OLD.board, OLD.status, -1);
    ELSIF OLD.board = NEW.board THEN
        INSERT INTO task_count_deltas (board, status, d, prev) VALUES (NEW.board, NEW.status, 1, OLD.status);
    ELSE
        INSERT INTO task_count_deltas (board, status, d)
        VALUES (OLD.board, OLD.status, -1), (NEW.board, NEW.status, 1);
    END IF;
    RETURN NULL;
END
$$
"""

_OLD_COUNT_FUNCTION = """
CREATE OR REPLACE FUNCTION agentboard_task_counts() RETURNS trigger LANGUAGE plpgsql AS $$
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


def upgrade() -> None:
    with op.batch_alter_table("run_rollups") as batch:
        batch.add_column(sa.Column("shard", sa.SmallInteger, nullable=False, server_default="0"))
    if op.get_bind().dialect.name != "postgresql":
        # SQLite rebuilds the table; SQLAlchemy warns (to every CLI's stderr) that the new key
        # differs from the reflected one, which is the point of this step
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sa.exc.SAWarning)
            with op.batch_alter_table("run_rollups", recreate="always") as batch:
                batch.create_primary_key("pk_run_rollups", ["board", "day", "profile", "model", "shard"])
        return
    op.execute("ALTER TABLE run_rollups DROP CONSTRAINT run_rollups_pkey, "
               "ADD CONSTRAINT run_rollups_pkey PRIMARY KEY (board, day, profile, model, shard)")
    op.execute("ALTER TABLE task_count_deltas ADD COLUMN prev VARCHAR(16)")
    op.execute("ALTER TABLE task_count_deltas DROP COLUMN id")
    op.execute(_COUNT_FUNCTION)
    for table, fill in _FILLFACTOR.items():
        op.execute(f"ALTER TABLE {table} SET (fillfactor = {fill})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sa.exc.SAWarning)
            with op.batch_alter_table("run_rollups", recreate="always") as batch:
                batch.drop_column("shard")
        return
    op.execute("DELETE FROM run_rollups WHERE shard <> 0")  # rebuilt by `agentboard maintenance`
    op.execute("ALTER TABLE run_rollups DROP CONSTRAINT run_rollups_pkey, "
               "ADD CONSTRAINT run_rollups_pkey PRIMARY KEY (board, day, profile, model)")
    op.execute("ALTER TABLE run_rollups DROP COLUMN shard")
    for table in _FILLFACTOR:
        op.execute(f"ALTER TABLE {table} RESET (fillfactor)")
    op.execute(_OLD_COUNT_FUNCTION)
    op.execute("INSERT INTO task_count_deltas (board, status, d) "
               "SELECT board, prev, -d FROM task_count_deltas WHERE prev IS NOT NULL")
    op.execute("ALTER TABLE task_count_deltas DROP COLUMN prev")
    op.execute("ALTER TABLE task_count_deltas ADD COLUMN id BIGSERIAL PRIMARY KEY")
