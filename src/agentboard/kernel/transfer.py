"""Export, import and migrate-to: a whole installation (or one board) as versioned JSON lines.

The dump is one JSON object per line:

- a header ``{"agentboard_export": 1, "schema": "<revision>", "board": ..., "since": ...,
  "tables": {"tasks": ["id", "board", ...], ...}}``;
- a line per row, ``{"table": "tasks", "row": {...}}``, tables in dependency order and rows in
  primary-key order (events keep their ids, so their order and every cursor survive); an
  attachment row also carries its file as ``"content"`` (base64; ``null`` when the file is gone);
- a trailer ``{"end": true, "tables": {"tasks": {"rows": N, "sha256": "..."}, ...}}`` with the
  row count and checksum of each table, taken on the same snapshot as the rows (the checksum is
  over the rows' JSON texts as written, without :data:`store.transfer.LOCAL_COLUMNS`, so an
  import recomputes it from the file).

:func:`export_file` writes a dump whole or not at all (a temporary file renamed into place).

Import upserts by primary key in one transaction, so a second import of the same dump changes
nothing. It refuses a database that already holds tasks the dump does not, a dump from a newer
schema, an unknown table or column, a dump whose rows do not match its own trailer (each table's
row count and checksum, recomputed from the file: a line lost or edited since the export), and
any row whose ids, slugs or names do not have the
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
from ..store.engine import Database, Row, Tx, disk_full
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
    #: per table, the columns the export holds, in its order (its header)
    columns: dict[str, list[str]] = field(default_factory=dict)
    #: the insight rollups were rebuilt from the imported runs (an export that holds none)
    rollups_rebuilt: bool = False
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
                "tables": self.expected, "rollups_rebuilt": self.rollups_rebuilt}


def _revision_number(rev: str) -> int:
    try:
        return int(rev)
    except ValueError:
        return 0


#: ``progress(phase, done, total)`` of a long transfer, called every :data:`PROGRESS_EVERY` rows
Progress = Callable[[str, int, "int | None"], None]
PROGRESS_EVERY = 500


def export(db: Database, write: Callable[[str], Any], *, board: str | None = None,
           since: float | None = None, progress: Progress | None = None,
           target: str = "the export's output") -> dict[str, dict[str, Any]]:
    """Write the dump line by line through ``write`` (one consistent snapshot); returns the
    trailer's per-table row counts and checksums. A full disk under ``write`` is
    :class:`Unavailable` naming ``target`` (what ``write`` writes to), not the database."""

    def put(text: str) -> None:
        try:
            write(text)
        except OSError as exc:
            if disk_full(exc):
                raise Unavailable(target_full(target)) from None
            raise

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
        put(json.dumps(header, separators=(",", ":")) + "\n")
        summary: dict[str, dict[str, Any]] = {}
        total = done = 0
        if progress is not None:
            total = sum(rows.count(tx, t, board=board if rows.board_scoped(t) else None, since=since)
                        for t in chosen)
            progress("exporting", 0, total)
        for t in chosen:
            digest = rows.Digest(t.name)
            scoped = board if rows.board_scoped(t) else None
            prefix = '{"table":' + rows.dumps(t.name) + ',"row":'
            for row in rows.iter_rows(tx, t, board=scoped, since=since):
                if progress is not None:
                    done += 1
                    if done % PROGRESS_EVERY == 0:
                        progress("exporting", done, total)
                text = digest.add(row)
                if t.name == "attachments":
                    put(prefix + text + ',"content":' + rows.dumps(_file_content(row)) + "}\n")
                else:
                    put(prefix + text + "}\n")
            summary[t.name] = digest.as_dict()
        put(json.dumps({"end": True, "tables": summary}, separators=(",", ":")) + "\n")
        if progress is not None:
            progress("exporting", done, total)
        return summary

    return db.read(_r)


def target_full(target: str | os.PathLike[str]) -> str:
    """The message of an export whose output's disk is full."""
    return (f"the disk holding {target} is full: the export could not be written; free some space "
            "there and export again")


def export_file(db: Database, path: str | os.PathLike[str], *, board: str | None = None,
                since: float | None = None, progress: Progress | None = None) -> dict[str, dict[str, Any]]:
    """:func:`export` to the file ``path``, whole or not at all: the dump is written to a
    temporary file beside it and renamed into place once complete, so a failed export (a full
    disk) leaves no partial file and an older file at ``path`` as it was. A ``path`` that is not
    a plain file (``/dev/stdout``, a pipe, a link) is written in place."""
    dest = Path(path)
    if os.path.lexists(dest) and (dest.is_symlink() or not dest.is_file()):
        with open(dest, "w", encoding="utf-8") as fh:
            return export(db, fh.write, board=board, since=since, progress=progress, target=str(dest))
    part = dest.with_name(f".{dest.name}.{os.getpid()}-{os.urandom(4).hex()}.part")
    try:
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as with open()
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            summary = export(db, fh.write, board=board, since=since, progress=progress, target=str(dest))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(part, dest)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            part.unlink()
        if isinstance(exc, OSError):
            if disk_full(exc):
                raise Unavailable(target_full(dest)) from None
            raise Unavailable(f"cannot write the export to {dest}: {exc.strerror or exc}") from None
        raise
    return summary


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
    rows: int = 0
    #: the tasks the other tables' rows refer to (``task_id``)
    refs: set[str] = field(default_factory=set)


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
    refs: set[str] = set()
    trailer = None
    found: dict[str, rows.Digest] = {}
    n = 1
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
        elif row.get("task_id"):
            refs.add(str(row["task_id"]))
        digest = found.get(name)
        if digest is None:
            digest = found[name] = rows.Digest(name)
        digest.add(row)
    if trailer is None:
        raise InvalidInput(f"{path} is cut short (no end line); export it again")
    _check_trailer(path, trailer, found)
    return _Scan(header, task_ids, trailer, n - 2, refs)


def _check_trailer(path: Path, trailer: object, found: dict[str, rows.Digest]) -> None:
    """Refuse a dump whose rows are not the ones its trailer counts: each table's row count and
    checksum, recomputed from the file's own rows as the export computed them (a line lost or
    edited since the export)."""
    if not isinstance(trailer, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("rows"), int) for v in trailer.values()):
        raise InvalidInput(f"{path}: its end line is not an export trailer (row counts and checksums per "
                           "table); nothing was imported, export it again")
    wrong: list[str] = []
    for name in [*trailer, *(t for t in found if t not in trailer)]:
        want = trailer.get(name) or {"rows": 0}
        got = found.get(name) or rows.Digest(name)
        if got.rows != want["rows"]:
            wrong.append(f"{name} has {got.rows} row(s), the trailer counts {want['rows']}")
        elif want.get("sha256") is not None and got.checksum != want["sha256"]:
            wrong.append(f"{name}'s rows do not match the trailer's checksum")
    if len(wrong) > 4:
        wrong[4:] = [f"{len(wrong) - 4} more table(s)"]
    if wrong:
        raise InvalidInput(f"{path} does not match its own trailer ({'; '.join(wrong)}): it was cut or edited "
                           "since the export; nothing was imported, export it again")


def _check_content(path: Path, n: int, content: object) -> None:
    if content is None:
        return
    if not isinstance(content, str):
        raise InvalidInput(f"{path}: line {n}: an attachment's content is not base64 text")
    try:
        base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{path}: line {n}: an attachment's content is not base64 text") from None


def import_dump(db: Database, path: str | os.PathLike[str], *, home: Path | None = None,
                progress: Progress | None = None) -> ImportReport:
    """Load the dump at ``path`` into ``db`` in one transaction (see the module doc)."""
    src = Path(path)
    scan = _scan(src)
    home = home if home is not None else db.settings.home
    report = ImportReport(expected=scan.trailer or {},
                          columns={k: list(v) for k, v in (scan.header.get("tables") or {}).items()})

    def _w(tx: Tx) -> None:
        report.rows.clear()
        report.new.clear()
        report.unchanged.clear()
        report.files_written = report.files_missing = 0
        held = {str(r["id"]) for r in tx.all("SELECT id FROM tasks")}
        if scan.header.get("since") is not None:
            # an incremental copy goes onto the copy of the same source: what its rows are about is
            # in the dump or already here
            lost = sorted(scan.refs - scan.task_ids - held)
            if lost:
                raise Conflict(f"this incremental export (--since) has rows about {len(lost)} task(s) this "
                               f"database does not hold (e.g. {lost[0]}): import it into the copy it continues "
                               "(import the full export first)")
        elif others := sorted(held - scan.task_ids):
            raise Conflict(f"the target database already holds {len(others)} task(s) that are not in this "
                           f"export (e.g. {others[0]}); import into an empty database, or export with --since "
                           "for an incremental copy")
        pending: dict[str, list[Row]] = {}
        done = 0
        if progress is not None:
            progress("importing", 0, scan.rows)
        for item in _lines(src):
            if "agentboard_export" in item:
                continue
            if item.get("end"):
                break
            if progress is not None:
                done += 1
                if done % PROGRESS_EVERY == 0:
                    progress("importing", done, scan.rows)
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
        report.rollups_rebuilt = "run_rollups" not in report.columns and bool(report.rows.get("task_runs"))
        if report.rollups_rebuilt:  # an export of a version before the insights: they are made from its runs
            from .insights import rebuild_in

            rebuild_in(tx)
        if progress is not None:
            progress("importing", done, scan.rows)

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


def verify(target: Database, expected: dict[str, dict[str, Any]], *, board: str | None = None,
           columns: dict[str, list[str]] | None = None) -> Verification:
    """Compare ``target``'s row counts and checksums with an export's trailer (over ``columns``,
    the export's own, when given: an older version's export lacks the columns added since)."""
    got = rows.digests(target, board=board, columns=columns)
    return Verification({name: (want, got.get(name, {"rows": 0, "sha256": None}))
                         for name, want in expected.items()})


def migrate(source: Database, target: Database, *, spool_dir: Path,
            progress: Progress | None = None) -> tuple[ImportReport, Verification]:
    """Export ``source`` and import it into ``target``, then compare every table (row counts and
    checksums). The dump is spooled to a temporary file in ``spool_dir`` and removed afterwards."""
    fd, name = tempfile.mkstemp(prefix=".migrate-", suffix=".jsonl", dir=spool_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            expected = export(source, fh.write, progress=progress, target=name)
        report = import_dump(target, name, home=source.settings.home, progress=progress)
        return report, verify(target, expected)
    finally:
        Path(name).unlink(missing_ok=True)


def other_processes(db: Database) -> list[str]:
    """PostgreSQL: the other processes that use this database, each as a refusal names it (``pid N
    on HOST``): agentboard's own sessions carry its ``application_name``
    (:func:`~agentboard.store.engine.application_name`: a ``serve``, a dispatcher, a verb), and a
    dispatcher's wake-up listener is known by its statement (``LISTEN agentboard_events``, an
    older version's too). This process's sessions are left out, and so is a session named after
    a process of this machine that has ended (a pooler's server session keeps the name of the
    last client it served). [] on SQLite, where dispatchers hold board lock files instead."""
    if db.dialect != "postgresql":
        return []
    import socket

    from ..store.engine import APPLICATION_PREFIX, application_name

    def _r(tx: Tx) -> list[Row]:
        return tx.all(
            "SELECT application_name AS app, query FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND (application_name LIKE :p OR query ILIKE 'LISTEN agentboard_events%')",
            {"p": APPLICATION_PREFIX + "%"})

    mine, node = application_name(), socket.gethostname()
    found: list[str] = []
    for r in db.read(_r):
        app = str(r["app"] or "")
        if app == mine:
            continue
        if not app.startswith(APPLICATION_PREFIX):
            what = "a dispatcher waiting for the board's events"
        else:
            pid, _, host = app[len(APPLICATION_PREFIX):].partition("@")
            if app == f"{APPLICATION_PREFIX}{pid}@{node}"[:63] and pid.isdigit() and not _alive(int(pid)):
                continue
            what = f"pid {pid} on {host or '?'}"
        if what not in found:
            found.append(what)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def spool(stream: Iterable[str], folder: Path) -> Path:
    """Copy a dump read from a stream (standard input) to a temporary file, which the import
    reads twice (a check, then the load). The caller removes it."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".import-", suffix=".jsonl", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        for chunk in stream:
            fh.write(chunk)
    return Path(name)
