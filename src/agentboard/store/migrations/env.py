"""Alembic environment: runs on the connection handed over by ``agentboard.store.migrate``."""

from __future__ import annotations

from alembic import context

from agentboard.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - command-line use: alembic -x url=...
    import sqlalchemy as sa

    url = context.get_x_argument(as_dictionary=True).get("url") or "sqlite:///agentboard.db"
    connection = sa.create_engine(url).connect()

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
