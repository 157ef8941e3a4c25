"""worker protocol: pending verification reports on runs, wiki full-text search

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

- ``task_runs.pending_report``: the success a worker reported through the CLI or MCP on a task
  with ``verify`` commands, held until its process exits and the commands have run.
- Wiki full-text search. SQLite: an FTS5 table ``wiki_fts`` over ``wiki_pages`` (external
  content) kept in sync by triggers. PostgreSQL: a GIN index on the English tsvector of title
  and body. Both are dialect-specific and live only here (``env.py`` keeps them out of the
  schema comparison). A later SQLite migration that rebuilds ``wiki_pages`` with
  ``batch_alter_table`` must recreate the three ``wiki_pages_fts_*`` triggers.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

PG_TSV = "to_tsvector('english', coalesce(title, '') || ' ' || coalesce(body, ''))"


def upgrade() -> None:
    op.add_column("task_runs", sa.Column("pending_report", sa.Text(), nullable=True))
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        op.execute(
            "CREATE VIRTUAL TABLE wiki_fts USING fts5(title, body, content='wiki_pages', content_rowid='id')"
        )
        op.execute(
            "CREATE TRIGGER wiki_pages_fts_ai AFTER INSERT ON wiki_pages BEGIN "
            "INSERT INTO wiki_fts(rowid, title, body) VALUES (new.id, new.title, new.body); END"
        )
        op.execute(
            "CREATE TRIGGER wiki_pages_fts_ad AFTER DELETE ON wiki_pages BEGIN "
            "INSERT INTO wiki_fts(wiki_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body); END"
        )
        op.execute(
            "CREATE TRIGGER wiki_pages_fts_au AFTER UPDATE ON wiki_pages BEGIN "
            "INSERT INTO wiki_fts(wiki_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body); "
            "INSERT INTO wiki_fts(rowid, title, body) VALUES (new.id, new.title, new.body); END"
        )
        op.execute("INSERT INTO wiki_fts(wiki_fts) VALUES ('rebuild')")
    elif bind.dialect.name == "postgresql":
        op.execute(f"CREATE INDEX ix_wiki_pages_fts ON wiki_pages USING GIN ({PG_TSV})")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for name in ("wiki_pages_fts_ai", "wiki_pages_fts_ad", "wiki_pages_fts_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS wiki_fts")
    elif bind.dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_wiki_pages_fts")
    with op.batch_alter_table("task_runs") as batch_op:
        batch_op.drop_column("pending_report")
