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
schema, an unknown table or column, and any row whose ids, slugs or names do not have the
domain's formats (``store.transfer.check_row``: a task id ``../../x`` is refused before anything
is written). Attachment files are written under the importing home, folder by folder without
following links (``store.files``). Import writes no event of its own: the event log after an
import is the source's, id for id. The report counts rows that were new, changed and unchanged.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..domain.errors import AgentboardError, Conflict, InvalidInput, Unavailable
from ..store import files
from ..store import transfer as rows
from ..store.engine import Database, Row, Tx
from ..store.migrate import HEAD
from .attachments import attachments_dir

FORMAT = 1


@dataclass
class ImportReport:
    """What an import did: rows written per table (``new`` ones and ``changed`` ones), rows
    already there with the same values (``unchanged``, not written), attachment files written,
    and the dump's checksums."""

    rows: dict[str, int] = field(default_factory=dict)
    new: dict[str, int] = field(default_factory=dict)
    unchanged: dict[str, int] = field(default_factory=dict)
    files_written: int = 0
    files_missing: int = 0
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: attachment files this import created (removed again when it is refused)
    created: list[Path] = field(default_factory=list)

    @property
    def totals(self) -> tuple[int, int, int]:
        """``(new, changed, unchanged)`` rows over every table."""
        new = sum(self.new.values())
        return new, sum(self.rows.values()) - new, sum(self.unchanged.values())

    def as_dict(self) -> dict[str, Any]:
        new, changed, unchanged = self.totals
        return {"rows": self.rows, "new": new, "changed": changed, "unchanged": unchanged,
                "files_written": self.files_written, "files_missing": self.files_missing,
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
    for n, item in enumerate(it, 2):
        if not isinstance(item, dict):
            raise InvalidInput(f"{path}: line {n} is not an export row")
        if item.get("end"):
            trailer = item.get("tables") or {}
            break
        name, row = item.get("table"), item.get("row")
        if not isinstance(name, str) or name not in known or not isinstance(row, dict):
            raise InvalidInput(f"{path}: a line names no known table: {str(item)[:80]}")
        unknown = set(row) - known[name]
        if unknown:
            raise InvalidInput(f"{path}: line {n} ({name}) has columns this version does not know "
                               f"({', '.join(sorted(map(str, unknown)))[:200]}); upgrade agentboard")
        try:
            rows.check_row(name, row)
        except AgentboardError as exc:
            raise InvalidInput(f"{path}: line {n} is refused: {exc.message}") from None
        if name == "attachments":
            _check_content(path, n, item.get("content"))
        if name == "tasks":
            task_ids.add(str(row.get("id")))
    if trailer is None:
        raise InvalidInput(f"{path} is cut short (no end line); export it again")
    return _Scan(header, task_ids, trailer)


def _check_content(path: Path, n: int, content: object) -> None:
    if content is None:
        return
    if not isinstance(content, str):
        raise InvalidInput(f"{path}: line {n}: an attachment's content is not base64 text")
    try:
        base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{path}: line {n}: an attachment's content is not base64 text") from None


def import_dump(db: Database, path: str | os.PathLike[str], *, home: Path | None = None) -> ImportReport:
    """Load the dump at ``path`` into ``db`` in one transaction (see the module doc)."""
    src = Path(path)
    scan = _scan(src)
    home = home if home is not None else db.settings.home
    report = ImportReport(expected=scan.trailer or {})

    def _w(tx: Tx) -> None:
        report.rows.clear()
        report.new.clear()
        report.unchanged.clear()
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

    try:
        db.write(_w)
    except AgentboardError:
        _remove_new_files(report)
        raise
    except Exception as exc:  # a row the schema refuses (a constraint, a type): the dump is bad
        _remove_new_files(report)
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise InvalidInput(f"{src}: the database refused its rows ({detail}); nothing was imported") from None
    return report


def _remove_new_files(report: ImportReport) -> None:
    """After a refused import: remove the attachment files it created (the rows are rolled back)."""
    for path in report.created:
        with contextlib.suppress(OSError):
            path.unlink()


def _flush(tx: Tx, name: str, batch: list[Row], report: ImportReport) -> None:
    """Write the rows of ``batch`` that are new or differ from the stored ones; count each kind."""
    if not batch:
        return
    t = rows.table(name)
    stored = rows.present(tx, t, batch)
    todo: list[Row] = []
    new = same = 0
    for row in batch:
        old = stored.get(rows.key(t, row))
        if old is None:
            new += 1
            todo.append(row)
        elif all(old.get(k) == v for k, v in row.items()):
            same += 1
        else:
            todo.append(row)
    written = rows.write_rows(tx, t, todo) if todo else 0
    for counts, n in ((report.rows, written), (report.new, new), (report.unchanged, same)):
        if n:
            counts[name] = counts.get(name, 0) + n
    batch.clear()


def _place_file(row: Row, content: str | None, home: Path, report: ImportReport) -> Row:
    """Write an attachment's file under ``home`` (unless the same bytes are already there) and
    point the row at it."""
    if content is None:
        report.files_missing += 1
        return row
    data = base64.b64decode(content)
    board, task_id, name = str(row["board"]), str(row["task_id"]), str(row["name"])
    dest = attachments_dir(home, board, task_id) / name
    row["path"] = str(dest)
    parts = ("boards", board, "attachments", task_id)
    try:
        home.mkdir(parents=True, exist_ok=True)
        with files.folder_beneath(home, parts) as dfd:
            if files.same_content(dfd, name, data):
                return row
        existed = os.path.lexists(dest)
        files.write_beneath(home, parts, name, data)
        if not existed:
            report.created.append(dest)
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
