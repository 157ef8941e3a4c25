"""The generic row copy behind export, import and migrate-to, driven by :mod:`.schema`.

Every table of :data:`agentboard.store.schema.metadata` is carried, with every column, so a
table or column added to the schema travels without changes here. Rows are read in primary-key
order on one snapshot; values are normalized by column type (a ``Double`` is a float on both
backends, an ``Integer`` an int), so the checksum of a table is the same on SQLite and
PostgreSQL when the rows are.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from .engine import Database, Row, Tx
from .schema import metadata

#: rows read or written per statement
BATCH = 1000


def tables() -> list[sa.Table]:
    """Every table, parents before the rows that name them (boards first)."""
    return list(metadata.sorted_tables)


def table(name: str) -> sa.Table:
    t = metadata.tables.get(name)
    if t is None:
        raise KeyError(name)
    return t


def _kind(col: sa.Column[Any]) -> str:
    t = col.type
    if isinstance(t, sa.Double | sa.Float):
        return "float"
    if isinstance(t, sa.Integer):
        return "int"
    return "text"


def _pk(t: sa.Table) -> list[str]:
    return [c.name for c in t.primary_key.columns]


def _filter(t: sa.Table, board: str | None, since: float | None, params: dict[str, Any]) -> str:
    """The WHERE clause of an export of one board and/or of the rows changed since a time."""
    clauses: list[str] = []
    cols = set(t.columns.keys())
    if board is not None:
        if t.name == "boards":
            clauses.append("slug = :board")
        elif "board" in cols:
            clauses.append("board = :board")
        params["board"] = board
    if since is not None:
        stamp = [c for c in ("updated_at", "created_at") if c in cols]
        if stamp:
            clauses.append("(" + " OR ".join(f"{c} >= :since" for c in stamp) + ")")
            params["since"] = since
    return (" WHERE " + " AND ".join(clauses)) if clauses else ""


def board_scoped(t: sa.Table) -> bool:
    """Whether the rows of ``t`` belong to one board (an export of one board keeps only its own);
    the installation's other tables (profiles, tokens, ...) are left out of a board's export
    except profiles, which its tasks' assignees name."""
    return t.name == "boards" or "board" in t.columns


def iter_rows(tx: Tx, t: sa.Table, *, board: str | None = None, since: float | None = None) -> Iterator[Row]:
    """The rows of ``t`` in primary-key order, normalized, read in batches on ``tx``'s snapshot."""
    params: dict[str, Any] = {}
    where = _filter(t, board, since, params)
    cols = ", ".join(_quote(c.name) for c in t.columns)
    order = ", ".join(_quote(c) for c in _pk(t))
    tx.execute(f"SELECT {cols} FROM {t.name}{where} ORDER BY {order}", params)  # noqa: S608
    names = [c.name for c in t.columns]
    convert = [_CONVERT[_kind(c)] for c in t.columns]
    pairs = list(zip(names, convert, strict=True))
    pg = tx.db.dialect == "postgresql"
    while True:
        batch = tx.cur.fetchmany(BATCH)
        if not batch:
            return
        for r in batch:
            values = [r[n] for n in names] if pg else r  # sqlite3.Row: in SELECT order
            yield {n: (v if v is None or type(v) is kind else kind(v))
                   for (n, kind), v in zip(pairs, values, strict=True)}


_CONVERT: dict[str, type] = {"float": float, "int": int, "text": str}


def _quote(name: str) -> str:
    return f'"{name}"'


#: columns holding a file location in the home, which an import rewrites to the importing home
#: (the file's content travels and is checked by its own ``sha256`` column): left out of checksums
LOCAL_COLUMNS: dict[str, frozenset[str]] = {"attachments": frozenset({"path"})}


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def dumps(value: Any) -> str:
    """The one JSON text of a row in exports and checksums (compact, UTF-8 kept)."""
    return _ENCODER.encode(value)


@dataclass
class Digest:
    """Row count and checksum of one table (SHA-256 over its normalized rows in key order,
    without its :data:`LOCAL_COLUMNS`)."""

    table: str = ""
    rows: int = 0
    _h: Any = field(default_factory=hashlib.sha256)

    def add(self, row: Row) -> str:
        """Count and hash ``row``; returns its JSON text (what an export writes, when the
        table has no local columns)."""
        text = dumps(row)
        skip = LOCAL_COLUMNS.get(self.table)
        self.add_text(dumps({k: v for k, v in row.items() if k not in skip}) if skip else text)
        return text

    def add_text(self, text: str) -> None:
        self.rows += 1
        self._h.update(text.encode())
        self._h.update(b"\n")

    @property
    def checksum(self) -> str:
        return self._h.hexdigest()

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "sha256": self.checksum}


def begin_snapshot(tx: Tx) -> None:
    """Make a PostgreSQL read one snapshot for all its statements (SQLite's read already is)."""
    if tx.db.dialect == "postgresql":
        tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")


def digests(db: Database, *, board: str | None = None) -> dict[str, dict[str, Any]]:
    """Row count and checksum of every table (of one board's rows with ``board``)."""

    def _r(tx: Tx) -> dict[str, dict[str, Any]]:
        begin_snapshot(tx)
        out: dict[str, dict[str, Any]] = {}
        for t in tables():
            if board is not None and not board_scoped(t) and t.name != "profiles":
                continue
            d = Digest(t.name)
            for row in iter_rows(tx, t, board=board):
                d.add(row)
            out[t.name] = d.as_dict()
        return out

    return db.read(_r)


def upsert_sql(t: sa.Table, columns: list[str]) -> str:
    """An insert of one row that replaces the row with the same primary key (so importing the
    same rows twice changes nothing)."""
    cols = ", ".join(_quote(c) for c in columns)
    vals = ", ".join(f":{c}" for c in columns)
    pk = _pk(t)
    rest = [c for c in columns if c not in pk]
    conflict = ", ".join(_quote(c) for c in pk)
    action = ("DO UPDATE SET " + ", ".join(f"{_quote(c)} = excluded.{_quote(c)}" for c in rest)) if rest else "DO NOTHING"
    return f"INSERT INTO {t.name} ({cols}) VALUES ({vals}) ON CONFLICT ({conflict}) {action}"  # noqa: S608


def write_rows(tx: Tx, t: sa.Table, rows: Iterable[Row]) -> int:
    """Upsert ``rows`` (dicts with a subset of the table's columns; missing columns take their
    defaults) into ``t``; returns how many were written."""
    n = 0
    groups: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        key = tuple(row)
        groups.setdefault(key, []).append(row)
        n += 1
    for key, group in groups.items():
        sql = upsert_sql(t, list(key))
        for i in range(0, len(group), BATCH):
            tx.executemany(sql, group[i : i + BATCH])
    return n


def reset_sequences(tx: Tx) -> None:
    """PostgreSQL: move each id sequence past the largest id, so new rows after an import never
    collide with imported ones (SQLite takes the next rowid from the table itself)."""
    if tx.db.dialect != "postgresql":
        return
    for t in tables():
        pk = _pk(t)
        if pk != ["id"] or _kind(t.c.id) != "int":
            continue
        seq = tx.scalar("SELECT pg_get_serial_sequence(:t, 'id')", {"t": t.name})
        if not seq:
            continue
        top = tx.scalar(f"SELECT MAX(id) FROM {t.name}")  # noqa: S608
        tx.execute("SELECT setval(:s, :v, :called)", {"s": seq, "v": int(top or 1), "called": top is not None})


__all__ = [
    "BATCH", "LOCAL_COLUMNS", "Digest", "dumps", "begin_snapshot", "board_scoped", "digests", "iter_rows",
    "reset_sequences", "table", "tables", "upsert_sql", "write_rows",
]
