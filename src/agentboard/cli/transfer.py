"""Moving a board's history: `export`, `import` and `migrate-to`."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from . import common
from .common import handle_errors, json_option


@click.command("export")
@click.option("--board", "board", default=None, help="only this board's rows (and the profiles); default: everything")
@click.option("--since", default=None, metavar="TIME",
              help="only rows created or updated since TIME (ISO-8601, epoch seconds, or 24h / 7d ago)")
@click.option("-o", "--output", "output", default=None, metavar="FILE", help="write to FILE instead of standard output")
@handle_errors
def export(board: str | None, since: str | None, output: str | None) -> None:
    """Write every board, task, link, comment, run, event, goal, wiki page, profile, review,
    token and attachment (with its content) as versioned JSON lines."""
    from agentboard.domain import model
    from agentboard.domain.timespec import point_in_time
    from agentboard.kernel import transfer

    from .output import progress

    slug = model.board_slug(board) if board else None
    cutoff = point_in_time(since, time.time(), past=True) if since else None
    if output is None:
        with progress("rows", data_on_stdout=True) as bar:
            transfer.export(common.db(), sys.stdout.write, board=slug, since=cutoff, progress=bar,
                            target="standard output")
        try:
            sys.stdout.flush()
        except OSError as exc:
            from agentboard.domain.errors import Unavailable
            from agentboard.store.engine import disk_full

            if disk_full(exc):
                raise Unavailable(transfer.target_full("standard output")) from None
            raise
        return
    with progress("rows") as bar:  # whole or not at all: a failed export leaves no partial file
        summary = transfer.export_file(common.db(), output, board=slug, since=cutoff, progress=bar)
    total = sum(t["rows"] for t in summary.values())
    click.echo(f"exported {total} rows from {len(summary)} tables to {output}", err=True)


@click.command("import")
@click.argument("path", metavar="FILE")
@json_option
@handle_errors
def import_(path: str, as_json: bool) -> None:
    """Load an export (FILE, or - for standard input) into this home's database, keeping ids,
    timestamps, event order and cursors; importing it again changes nothing."""
    from agentboard.domain.errors import InvalidInput
    from agentboard.kernel import transfer

    db = common.db()
    spooled: Path | None = None
    if path == "-":
        spooled = transfer.spool(sys.stdin, common.home())
        source = spooled
    else:
        source = Path(path)
        if not source.is_file():
            raise InvalidInput(f"no file {path}; give the path of an export (agentboard export > dump.jsonl)")
    from .output import progress

    try:
        with progress("rows", as_json=as_json) as bar:
            report = transfer.import_dump(db, source, home=common.home(), progress=bar)
    except InvalidInput as exc:
        if spooled is None:
            raise
        # the spooled copy is ours, gone once this ends: the user gave standard input
        raise InvalidInput(str(exc).replace(str(spooled), "standard input")) from None
    finally:
        if spooled is not None:
            spooled.unlink(missing_ok=True)
    check = transfer.verify(db, report.expected, columns=report.columns) if not _partial(source) else None
    out: dict[str, Any] = report.as_dict()
    if check is not None:
        out["verification"] = check.as_dict()
    if as_json:
        common.emit_json(out)
        return
    new, changed, unchanged = report.totals
    click.echo(f"imported {new} new and {changed} changed rows into {len(report.rows)} tables"
               + (f" ({unchanged} already here, unchanged)" if unchanged else "")
               + (f", {report.files_written} attachment file(s) written" if report.files_written else "")
               + (f"; {report.files_missing} attachment file(s) were missing from the export" if report.files_missing else "")
               + ("; the insights were made from its runs (an export of an older version holds none)"
                  if report.rollups_rebuilt else ""))
    if check is not None and check.mismatched:
        # the dump matched its own trailer (import_dump checks it): the difference is this database's
        click.echo("note: after the import these tables differ from the export, because this database also "
                   "holds rows the export does not (or stored a value differently): "
                   + ", ".join(check.mismatched), err=True)


def _partial(path: Path) -> bool:
    """Whether a dump holds only part of an installation (one board, or rows since a time)."""
    import json

    with open(path, encoding="utf-8") as fh:
        header = json.loads(fh.readline() or "{}")
    return bool(header.get("board") or header.get("since"))


@click.command("migrate-to")
@click.argument("url", metavar="URL")
@json_option
@handle_errors
def migrate_to(url: str, as_json: bool) -> None:
    """Copy this home's database to URL (postgresql://… or sqlite:///…) and verify every table
    (row counts and checksums). Stop the dispatcher first."""
    from agentboard.client import open_home
    from agentboard.config import shown_url
    from agentboard.dispatch.planning import running_dispatchers
    from agentboard.domain.errors import Conflict, InvalidInput
    from agentboard.kernel import transfer

    if not url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://", "sqlite:///")):
        raise InvalidInput(f"{shown_url(url)!r} is not a database URL; give postgresql://user@host/db or "
                           "sqlite:////path/file.db")
    s = common.settings()
    if url == s.url:
        raise InvalidInput("that is the database this home already uses")
    busy = running_dispatchers(s.home)
    if busy:
        raise Conflict("a dispatcher is running on this home (" + ", ".join(busy) + "); stop it "
                       "(and `agentboard serve`) before migrating, so no write is left behind")
    source = common.db()
    others = transfer.other_processes(source)
    if others:  # a serve (with or without its dispatcher), a dispatcher, a verb: its writes would be lost
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise Conflict(f"other agentboard processes use this database ({shown}): stop them (`agentboard serve`, "
                       "the dispatchers) before migrating, so no write is left behind (docs/operations.md)")
    import dataclasses

    target_settings = dataclasses.replace(s, database_url=url)
    target = open_home(target_settings)
    from .output import progress

    try:
        with progress("rows", as_json=as_json) as bar:
            report, check = transfer.migrate(source, target, spool_dir=s.home, progress=bar)
    finally:
        target.close()
    out = {**report.as_dict(), "verification": check.as_dict(), "url": shown_url(url)}
    if as_json:
        common.emit_json(out)
    else:
        from .output import table

        table(["table", "rows", "source sha256", "target sha256"],
              [(n, a["rows"], str(a["sha256"])[:12], str(b.get("sha256"))[:12]) for n, (a, b) in check.tables.items()],
              status_column=None, empty="nothing to copy")
    if check.mismatched:
        common.fail("the copy differs from the source in " + ", ".join(check.mismatched)
                    + "; the source is unchanged, keep using it and report this", 1)
    if not as_json:
        click.echo("verified: every table matches. " + _use_it(url, s.home))


def _use_it(url: str, home: Path) -> str:
    """How to switch to the copy. A URL with a password is a secret: never shown, and never for
    ``config.toml`` (docs/deploy.md keeps it in the services' environment file, mode 0600)."""
    from agentboard.config import shown_url

    if shown_url(url) == url:  # nothing in it to mask: no password
        return (f"To use it, set database_url = \"{url}\" in {home / 'config.toml'} (or AGENTBOARD_DATABASE_URL) "
                "and restart `agentboard serve` and the dispatcher.")
    return (f"To use it, set AGENTBOARD_DATABASE_URL={shown_url(url)} (with its password) in the services' "
            "environment file (/etc/agentboard/env, mode 0600; docs/deploy.md), or connect without a password "
            "in the URL (~/.pgpass), and restart `agentboard serve` and the dispatcher.")
