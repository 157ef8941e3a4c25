"""Export, import and migrate-to at 100,000 tasks, against a raw copy of the same rows.

Setup bulk-inserts ``--n`` tasks (``board_view.populate``: statuses, assignees, links, comments)
and one ``created`` event per task into a SQLite home. Timed once each:

- ``raw_copy``: the baseline. Every row of every table read with a bare ``SELECT *`` and written
  with ``executemany`` ``INSERT`` into a fresh database of the same schema, one transaction, on
  the raw ``sqlite3`` driver: what a copy costs with no format, checks or checksums.
- ``export``: ``agentboard export`` (``kernel.transfer.export``) of the whole home to a file:
  JSON lines, normalized values, per-table checksums.
- ``import``: ``kernel.transfer.import_dump`` of that file into a fresh SQLite home (one
  transaction, upserts, the checks before writing).
- ``migrate_to``: ``kernel.transfer.migrate`` from the SQLite home to a fresh PostgreSQL database,
  end to end (export, import, verification of every table); skipped with ``--no-pg``.

Rates are rows per second over all tables; ``ratios`` divide them by the raw copy's rate.
Targets: export ≥ 0.25 of the raw copy, import ≥ 0.15.

    python bench/export.py [--n 100000] [--no-pg]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import agentboard  # noqa: E402
from agentboard.config import Settings  # noqa: E402
from agentboard.kernel import transfer  # noqa: E402
from agentboard.store import open_database  # noqa: E402
from agentboard.store import transfer as store_transfer  # noqa: E402

TARGETS = {"export_vs_raw": 0.25, "import_vs_raw": 0.15}


def add_events(db: Any, n: int) -> None:
    now = time.time()
    rows = [{"b": "default", "t": f"t_{i:08x}", "now": now - n + i} for i in range(n)]
    db.write(lambda tx: tx.executemany(
        "INSERT INTO task_events (board, task_id, kind, payload, actor, created_at) "
        "VALUES (:b, :t, 'created', '{\"status\":\"todo\"}', 'bench', :now)", rows))


def raw_copy(src: Path, dest: Path) -> int:
    """Every table copied with SELECT * / executemany INSERT on the bare driver; returns rows."""
    s = sqlite3.connect(src)
    d = sqlite3.connect(dest)
    d.execute("PRAGMA journal_mode = WAL")
    d.execute("PRAGMA synchronous = FULL")
    n = 0
    d.execute("BEGIN")
    for t in store_transfer.tables():
        cur = s.execute(f"SELECT * FROM {t.name}")  # noqa: S608
        cols = [c[0] for c in cur.description]
        sql = f"INSERT OR REPLACE INTO {t.name} ({', '.join(chr(34) + c + chr(34) for c in cols)}) " \
              f"VALUES ({', '.join('?' for _ in cols)})"  # noqa: S608
        while True:
            batch = cur.fetchmany(1000)
            if not batch:
                break
            d.executemany(sql, batch)
            n += len(batch)
    d.execute("COMMIT")
    s.close()
    d.close()
    return n


def fresh_home(folder: Path) -> Any:
    folder.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{folder / 'agentboard.db'}"
    return open_database(url, settings=dataclasses.replace(Settings(home=folder), database_url=url))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--no-pg", action="store_true", help="skip migrate-to PostgreSQL")
    args = ap.parse_args(argv)
    from _shared import DEFAULT_PG, drop_pg, fresh_pg, load_average
    from board_view import populate

    load_start = load_average()
    folder = Path(tempfile.mkdtemp(prefix="ab-bench-export-"))
    result: dict[str, Any] = {"n": args.n}
    try:
        client = agentboard.connect(str(folder / "home"))
        populate(client.db, "default", args.n)
        add_events(client.db, args.n)
        src_file = folder / "home" / "agentboard.db"
        with sqlite3.connect(src_file) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

        raw_dest = fresh_home(folder / "raw")
        raw_dest.close()
        start = time.perf_counter()
        rows = raw_copy(src_file, folder / "raw" / "agentboard.db")
        raw_s = time.perf_counter() - start

        dump = folder / "dump.jsonl"
        start = time.perf_counter()
        with open(dump, "w", encoding="utf-8") as fh:
            summary = transfer.export(client.db, fh.write)
        export_s = time.perf_counter() - start
        exported = sum(t["rows"] for t in summary.values())
        assert exported == rows, (exported, rows)

        target = fresh_home(folder / "imported")
        start = time.perf_counter()
        report = transfer.import_dump(target, dump)
        import_s = time.perf_counter() - start
        assert sum(report.rows.values()) == rows
        assert not transfer.verify(target, summary).mismatched
        target.close()

        result.update(
            rows=rows, dump_bytes=dump.stat().st_size,
            raw_copy_rows_per_s=round(rows / raw_s), export_rows_per_s=round(rows / export_s),
            import_rows_per_s=round(rows / import_s),
            seconds={"raw_copy": round(raw_s, 2), "export": round(export_s, 2), "import": round(import_s, 2)},
        )
        result["ratios"] = {"export_vs_raw": round(raw_s / export_s, 3), "import_vs_raw": round(raw_s / import_s, 3)}
        if not args.no_pg:
            try:
                url, name = fresh_pg(DEFAULT_PG)
            except Exception as exc:  # pragma: no cover - machine dependent
                result["migrate_to"] = {"skipped": str(exc)}
            else:
                try:
                    pg = open_database(url, settings=dataclasses.replace(client.settings, database_url=url))
                    start = time.perf_counter()
                    _report, check = transfer.migrate(client.db, pg, spool_dir=folder)
                    mig_s = time.perf_counter() - start
                    assert not check.mismatched
                    pg.close()
                    result["migrate_to"] = {"seconds": round(mig_s, 2), "rows_per_s": round(rows / mig_s)}
                finally:
                    drop_pg(DEFAULT_PG, name)
        client.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result["targets"] = TARGETS
    result["meets_target"] = all(result["ratios"][k] >= v for k, v in TARGETS.items())
    result["load_average"] = {"start": load_start, "end": load_average()}
    print(json.dumps(result))
    print(f"\nexport / import benchmark, {args.n:,} tasks, {result['rows']:,} rows in all tables", file=sys.stderr)
    for key in ("raw_copy", "export", "import"):
        print(f"  {key:<10}{result['seconds'][key]:>8.2f} s  {result[key + '_rows_per_s']:>10,} rows/s", file=sys.stderr)
    print(f"  ratios vs raw copy: {result['ratios']} (targets {TARGETS}) "
          f"{'OK' if result['meets_target'] else 'MISSES TARGET'}", file=sys.stderr)
    if "migrate_to" in result:
        print(f"  migrate-to PostgreSQL end to end: {result['migrate_to']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
