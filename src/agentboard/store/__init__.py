"""Storage: schema, migrations and the connection/transaction layer for SQLite and PostgreSQL."""

from .engine import Database, Tx, open_database

__all__ = ["Database", "Tx", "open_database"]
