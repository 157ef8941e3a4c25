"""Alembic environment: runs on the connection handed over by ``agentboard.store.migrate``."""

from __future__ import annotations

from alembic import context

from agentboard.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - command-line use: alembic -x url=...
    import sqlalchemy as sa

    url = context.get_x_argument(as_dictionary=True).get("url") or "sqlite:///agentboard.db"
    connection = sa.create_engine(url).connect()

#: dialect-specific objects that live only in migrations (wiki full-text search, 0002)
MIGRATION_ONLY_PREFIXES = ("wiki_fts", "ix_wiki_pages_fts", "wiki_pages_fts_")


def include_object(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
    """Keep migration-only objects out of the schema-vs-migration comparison."""
    return not (name or "").startswith(MIGRATION_ONLY_PREFIXES)


context.configure(
    connection=connection,
    target_metadata=metadata,
    include_object=include_object,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
