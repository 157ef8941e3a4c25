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

from ..domain import model
from ..domain.errors import InvalidInput
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


def count(tx: Tx, t: sa.Table, *, board: str | None = None, since: float | None = None) -> int:
    """How many rows :func:`iter_rows` gives (a progress bar's total)."""
    params: dict[str, Any] = {}
    where = _filter(t, board, since, params)
    return int(tx.scalar(f"SELECT COUNT(*) FROM {t.name}{where}", params) or 0)  # noqa: S608


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


def _matching(pattern: Any, what: str) -> Any:
    def check(value: Any) -> None:
        if not isinstance(value, str) or not pattern.match(value):
            raise InvalidInput(f"invalid {what} {str(value)[:60]!r}")
    return check


def _attachment_name(value: Any) -> None:
    model.attachment_name(value)
    if value != str(value).strip():
        raise InvalidInput(f"invalid attachment name {value!r}: spaces around it")


_SLUG = _matching(model.SLUG_RE, "board slug")
_TASK = _matching(model.TASK_ID_RE, "task id")
_GOAL = _matching(model.GOAL_ID_RE, "goal id")

#: the format of each column that names a board, a task, a goal, a profile or a file, by
#: ``(table, column)`` (``None``: that column in every table). A row an import or a restore
#: brings must pass them all: these values become folder and file names in the home and in
#: workspaces, and ids that other rows and the dispatcher look up.
COLUMN_FORMATS: dict[tuple[str | None, str], Any] = {
    (None, "board"): _SLUG,
    ("boards", "slug"): _SLUG,
    ("tasks", "id"): _TASK,
    (None, "task_id"): _TASK,
    (None, "source_task_id"): _TASK,
    (None, "clone_task_id"): _TASK,
    ("task_links", "parent_id"): _TASK,
    ("task_links", "child_id"): _TASK,
    ("goals", "id"): _GOAL,
    (None, "goal_id"): _GOAL,
    ("profiles", "name"): _matching(model.PROFILE_RE, "profile name"),
    ("attachments", "name"): _attachment_name,
    ("wiki_pages", "slug"): _matching(model.WIKI_SLUG_RE, "wiki slug"),
}


def check_row(table_name: str, row: Row) -> None:
    """Refuse a row whose ids, slugs or names do not have the domain's formats
    (:data:`COLUMN_FORMATS`; an empty value stays allowed where the column may be empty)."""
    t = metadata.tables.get(table_name)
    for column, value in row.items():
        if value is None and t is not None and column in t.c:
            col = t.c[column]
            if not col.nullable and col.server_default is None:
                raise InvalidInput(f"{table_name}.{column} is empty; it needs a value")
        if isinstance(value, dict | list):
            raise InvalidInput(f"{table_name}.{column} holds a JSON {type(value).__name__}, not a value")
        rule = COLUMN_FORMATS.get((table_name, column)) or COLUMN_FORMATS.get((None, column))
        if rule is None or value is None:
            continue
        try:
            rule(value)
        except InvalidInput as exc:
            raise InvalidInput(f"{table_name}.{column}: {exc.message}") from None


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
        return str(self._h.hexdigest())

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "sha256": self.checksum}


def begin_snapshot(tx: Tx) -> None:
    """Make a PostgreSQL read one snapshot for all its statements (SQLite's read already is)."""
    if tx.db.dialect == "postgresql":
        tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")


def digests(db: Database, *, board: str | None = None,
            columns: dict[str, list[str]] | None = None) -> dict[str, dict[str, Any]]:
    """Row count and checksum of every table (of one board's rows with ``board``). ``columns``:
    per table, the columns to hash, in their order (an export's header, from an older schema
    whose tables had fewer columns): its checksums are then comparable to that export's."""

    def _r(tx: Tx) -> dict[str, dict[str, Any]]:
        begin_snapshot(tx)
        out: dict[str, dict[str, Any]] = {}
        for t in tables():
            if board is not None and not board_scoped(t) and t.name != "profiles":
                continue
            d = Digest(t.name)
            only = (columns or {}).get(t.name)
            for row in iter_rows(tx, t, board=board):
                d.add({c: row[c] for c in only if c in row} if only is not None else row)
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


def present(tx: Tx, t: sa.Table, batch: list[Row]) -> dict[tuple[Any, ...], Row]:
    """The rows of ``t`` already stored under the primary keys of ``batch``, normalized as
    :func:`iter_rows` reads them, by key (what an import compares before writing)."""
    pk = _pk(t)
    if not batch or any(k not in row for row in batch for k in pk):
        return {}
    cols = ", ".join(_quote(c.name) for c in t.columns)
    convert = {c.name: _CONVERT[_kind(c)] for c in t.columns}
    out: dict[tuple[Any, ...], Row] = {}
    for i in range(0, len(batch), 200):
        params: dict[str, Any] = {}
        terms = []
        for j, row in enumerate(batch[i : i + 200]):
            parts = []
            for n, k in enumerate(pk):
                params[f"k{j}_{n}"] = row[k]
                parts.append(f"{_quote(k)} = :k{j}_{n}")
            terms.append("(" + " AND ".join(parts) + ")")
        for r in tx.all(f"SELECT {cols} FROM {t.name} WHERE {' OR '.join(terms)}", params):  # noqa: S608
            norm = {n: (v if v is None or type(v) is convert[n] else convert[n](v)) for n, v in r.items()}
            out[tuple(norm[k] for k in pk)] = norm
    return out


def key(t: sa.Table, row: Row) -> tuple[Any, ...]:
    return tuple(row.get(k) for k in _pk(t))


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
    "BATCH", "COLUMN_FORMATS", "LOCAL_COLUMNS", "check_row", "key", "present", "Digest", "dumps", "begin_snapshot", "board_scoped", "digests", "iter_rows",
    "reset_sequences", "table", "tables", "upsert_sql", "write_rows",
]
