"""Export, import and migrate-to: a whole installation (or one board) as versioned JSON lines.

The dump is one JSON object per line:

- a header ``{"agentboard_export": 1, "schema": "<revision>", "board": ..., "since": ...,
  "tables": {"tasks": ["id", "board", ...], ...}}``;
- a line per row, ``{"table": "tasks", "row": {...}}``, tables in dependency order and rows in
  primary-key order (events keep their ids, so their order and every cursor survive); an
  attachment row also carries its file as ``"content"`` (base64; ``null`` when the file is gone);
- a trailer ``{"end": true, "tables": {"tasks": {"rows": N, "sha256": "..."}, ...}}`` with the
  row count and checksum of each table, taken on the same snapshot as the rows.

Import upserts by primary key in one transaction, so a second import of the same dump changes
nothing. It refuses a database that already holds tasks the dump does not, a dump from a newer
schema, and an unknown table or column. Attachment files are written under the importing home.
Import writes no event of its own: the event log after an import is the source's, id for id.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..domain.errors import Conflict, InvalidInput, Unavailable
from ..store import transfer as rows
from ..store.engine import Database, Row, Tx
from ..store.migrate import HEAD
from .attachments import attachments_dir

FORMAT = 1


@dataclass
class ImportReport:
    """What an import wrote: rows per table, attachment files written, and the checksums."""

    rows: dict[str, int] = field(default_factory=dict)
    files_written: int = 0
    files_missing: int = 0
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "files_written": self.files_written, "files_missing": self.files_missing,
                "tables": self.expected}


def _revision_number(rev: str) -> int:
    try:
        return int(rev)
    except ValueError:
        return 0


def export(db: Database, write: Callable[[str], Any], *, board: str | None = None,
           since: float | None = None) -> dict[str, dict[str, Any]]:
    """Write the dump line by line through ``write`` (one consistent snapshot); returns the
    trailer's per-table row counts and checksums."""

    def _r(tx: Tx) -> dict[str, dict[str, Any]]:
        rows.begin_snapshot(tx)
        if board is not None and not tx.one("SELECT slug FROM boards WHERE slug = :b", {"b": board}):
            from ..domain.errors import NotFound

            raise NotFound(f"no board {board!r}")
        chosen = [t for t in rows.tables()
                  if board is None or rows.board_scoped(t) or t.name == "profiles"]
        header = {"agentboard_export": FORMAT, "schema": HEAD, "source": db.dialect, "board": board,
                  "since": since, "created_at": time.time(),
                  "tables": {t.name: list(t.columns.keys()) for t in chosen}}
        write(json.dumps(header, separators=(",", ":")) + "\n")
        summary: dict[str, dict[str, Any]] = {}
        for t in chosen:
            digest = rows.Digest(t.name)
            scoped = board if rows.board_scoped(t) else None
            prefix = '{"table":' + rows.dumps(t.name) + ',"row":'
            for row in rows.iter_rows(tx, t, board=scoped, since=since):
                text = digest.add(row)
                if t.name == "attachments":
                    write(prefix + text + ',"content":' + rows.dumps(_file_content(row)) + "}\n")
                else:
                    write(prefix + text + "}\n")
            summary[t.name] = digest.as_dict()
        write(json.dumps({"end": True, "tables": summary}, separators=(",", ":")) + "\n")
        return summary

    return db.read(_r)


def _file_content(row: Row) -> str | None:
    try:
        data = Path(row["path"]).read_bytes()
    except OSError:
        return None
    return base64.b64encode(data).decode("ascii")


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{path}: line {n} is not JSON ({exc.msg}); is this an agentboard export?") from None


@dataclass
class _Scan:
    header: dict[str, Any]
    task_ids: set[str]
    trailer: dict[str, dict[str, Any]] | None


def _scan(path: Path) -> _Scan:
    """Check the dump before anything is written: its header, its tables and columns, its end."""
    it = _lines(path)
    header = next(it, None)
    if not isinstance(header, dict) or "agentboard_export" not in header:
        raise InvalidInput(f"{path} is not an agentboard export (no header line)")
    if header["agentboard_export"] != FORMAT:
        raise InvalidInput(f"{path} is export format {header['agentboard_export']}; this version reads format {FORMAT}")
    if _revision_number(str(header.get("schema", "0"))) > _revision_number(HEAD):
        raise InvalidInput(f"{path} comes from a newer agentboard (schema {header.get('schema')}, this one is "
                           f"{HEAD}); upgrade agentboard before importing it")
    known = {t.name: set(t.columns.keys()) for t in rows.tables()}
    for name, cols in (header.get("tables") or {}).items():
        if name not in known:
            raise InvalidInput(f"{path} has a table {name!r} this version does not know; upgrade agentboard")
        extra = set(cols) - known[name]
        if extra:
            raise InvalidInput(f"{path}: table {name} has columns this version does not know "
                               f"({', '.join(sorted(extra))}); upgrade agentboard")
    task_ids: set[str] = set()
    trailer = None
    for item in it:
        if item.get("end"):
            trailer = item.get("tables") or {}
            break
        if item.get("table") not in known or not isinstance(item.get("row"), dict):
            raise InvalidInput(f"{path}: a line names no known table: {str(item)[:80]}")
        if item["table"] == "tasks":
            task_ids.add(str(item["row"].get("id")))
    if trailer is None:
        raise InvalidInput(f"{path} is cut short (no end line); export it again")
    return _Scan(header, task_ids, trailer)


def import_dump(db: Database, path: str | os.PathLike[str], *, home: Path | None = None) -> ImportReport:
    """Load the dump at ``path`` into ``db`` in one transaction (see the module doc)."""
    src = Path(path)
    scan = _scan(src)
    home = home if home is not None else db.settings.home
    report = ImportReport(expected=scan.trailer or {})

    def _w(tx: Tx) -> None:
        report.rows.clear()
        report.files_written = report.files_missing = 0
        others = [r["id"] for r in tx.all("SELECT id FROM tasks") if r["id"] not in scan.task_ids]
        if others:
            raise Conflict(f"the target database already holds {len(others)} task(s) that are not in this "
                           f"export (e.g. {others[0]}); import into an empty database")
        pending: dict[str, list[Row]] = {}
        for item in _lines(src):
            if "agentboard_export" in item:
                continue
            if item.get("end"):
                break
            name = item["table"]
            row = dict(item["row"])
            if name == "attachments":
                row = _place_file(row, item.get("content"), home, report)
            batch = pending.setdefault(name, [])
            batch.append(row)
            if len(batch) >= rows.BATCH:
                _flush(tx, name, batch, report)
        for name, batch in pending.items():
            _flush(tx, name, batch, report)
        rows.reset_sequences(tx)

    db.write(_w)
    return report


def _flush(tx: Tx, name: str, batch: list[Row], report: ImportReport) -> None:
    if batch:
        report.rows[name] = report.rows.get(name, 0) + rows.write_rows(tx, rows.table(name), batch)
        batch.clear()


def _place_file(row: Row, content: str | None, home: Path, report: ImportReport) -> Row:
    """Write an attachment's file under ``home`` (unless the same bytes are already there) and
    point the row at it."""
    if content is None:
        report.files_missing += 1
        return row
    data = base64.b64decode(content)
    folder = attachments_dir(home, str(row["board"]), str(row["task_id"]))
    dest = folder / Path(str(row["name"])).name
    row["path"] = str(dest)
    try:
        if dest.is_file() and hashlib.sha256(dest.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest():
            return row
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".import-", dir=folder)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except OSError as exc:
        raise Unavailable(f"cannot write attachment {dest}: {exc.strerror}") from None
    report.files_written += 1
    return row


@dataclass
class Verification:
    """Each table's rows and checksum on the source (the export) and on the target."""

    tables: dict[str, tuple[dict[str, Any], dict[str, Any]]]

    @property
    def mismatched(self) -> list[str]:
        return [name for name, (a, b) in self.tables.items() if a != b]

    def as_dict(self) -> dict[str, Any]:
        return {"ok": not self.mismatched, "mismatched": self.mismatched,
                "tables": {n: {"source": a, "target": b} for n, (a, b) in self.tables.items()}}


def verify(target: Database, expected: dict[str, dict[str, Any]], *, board: str | None = None) -> Verification:
    """Compare ``target``'s row counts and checksums with an export's trailer."""
    got = rows.digests(target, board=board)
    return Verification({name: (want, got.get(name, {"rows": 0, "sha256": None}))
                         for name, want in expected.items()})


def migrate(source: Database, target: Database, *, spool_dir: Path) -> tuple[ImportReport, Verification]:
    """Export ``source`` and import it into ``target``, then compare every table (row counts and
    checksums). The dump is spooled to a temporary file in ``spool_dir`` and removed afterwards."""
    fd, name = tempfile.mkstemp(prefix=".migrate-", suffix=".jsonl", dir=spool_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            expected = export(source, fh.write)
        report = import_dump(target, name, home=source.settings.home)
        return report, verify(target, expected)
    finally:
        Path(name).unlink(missing_ok=True)


def listening_dispatchers(db: Database) -> int:
    """PostgreSQL: how many sessions on this database wait for board events as a running
    dispatcher does (its wake-up connection's last statement is ``LISTEN agentboard_events``);
    0 on SQLite, where dispatchers hold board lock files instead."""
    if db.dialect != "postgresql":
        return 0

    def _r(tx: Tx) -> int:
        return int(tx.scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN agentboard_events%'") or 0)

    return db.read(_r)


def spool(stream: Iterable[str], folder: Path) -> Path:
    """Copy a dump read from a stream (standard input) to a temporary file, which the import
    reads twice (a check, then the load). The caller removes it."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".import-", suffix=".jsonl", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        for chunk in stream:
            fh.write(chunk)
    return Path(name)
