"""Storage: schema, migrations and the connection/transaction layer for SQLite and PostgreSQL."""

from .engine import Database, Tx
from .migrate import open_database

__all__ = ["Database", "Tx", "open_database"]
