"""What one kernel verb costs PostgreSQL: WAL bytes and CPU (client + server) per operation.

A fresh database; for each phase — ``create``, ``claim``, ``complete`` and ``drain`` (one item:
``claim_next`` + ``complete``) — a ``CHECKPOINT`` and ``VACUUM ANALYZE``, a warm-up of the same
verb (so the pages it touches first after the checkpoint are not counted), then ``--n`` ops
through the public kernel verbs, one transaction each. Per op:

- ``wal_b``: the bytes of this database's WAL records (``pg_walinspect``: records of its
  tables and indexes, and the commit records of their transactions; the server's other
  databases write to the same WAL), without full-page images; ``fpi_b``: the full-page images
  (after a checkpoint they depend on its timing more than on the verb);
- ``cpu_ms``: this process's user + system time (``getrusage``) plus that of the database's
  server backends (``/proc/<pid>/stat``), and ``client_ms`` / ``server_ms``;
- ``ops_s``: ops / wall time.

Baseline: ``raw``, a single-row ``INSERT`` transaction on a bare table through psycopg, measured
the same way in the same run. The median of ``--rounds`` rounds. ``--by-rel``: WAL record bytes
per op by relation (indexes apart) for each phase, on stderr.

    python bench/pg_wal.py [--n 1200] [--rounds 3] [--by-rel]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import DEFAULT_PG, drop_pg, fresh_pg, load_average  # noqa: E402

PHASES = ("raw", "create", "claim", "complete", "drain")
_TICK = os.sysconf("SC_CLK_TCK")
_REL = re.compile(r"rel \d+/(\d+)/(\d+)")


def _server_cpu(mon: Any) -> float:
    """CPU seconds of the database's backends (other than the monitor's own)."""
    total = 0
    for (pid,) in mon.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                              "AND pid <> pg_backend_pid()").fetchall():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / _TICK


def _client_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class _Wal:
    """This database's WAL records between two points, read in pieces (a long phase on a busy
    server may see its first segments recycled before it ends)."""

    def __init__(self, mon: Any) -> None:
        self.mon = mon
        self.dboid = str(mon.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0])
        self.lsn = mon.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0]
        self.records: list[tuple[str, int, int, int, str]] = []  # rmgr, xid, length, fpi, relfilenode
        self.commits: dict[int, int] = {}
        self.xids: set[int] = set()

    def read(self) -> None:
        lsn = self.mon.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0]
        for rm, xid, length, fpi, ref in self.mon.execute(
                "SELECT resource_manager, xid::text::bigint, record_length, fpi_length, block_ref "
                "FROM pg_get_wal_records_info(%s, %s)", (self.lsn, lsn)).fetchall():
            m = _REL.search(ref or "")
            if m is not None and m.group(1) == self.dboid and int(m.group(2)) >= 16384:
                self.records.append((rm, xid, length, fpi, m.group(2)))
                if xid:
                    self.xids.add(xid)
            elif rm == "Transaction" and xid:
                self.commits[xid] = self.commits.get(xid, 0) + length
        self.lsn = lsn


def _measure(mon: Any, n: int, op: Callable[[int], None], by_rel: bool) -> dict[str, Any]:
    wal = _Wal(mon)
    client = server = wall = 0.0
    for j in range(0, n, 100):  # in pieces: the WAL is read between them, off the clocks
        s0, c0, t0 = _server_cpu(mon), _client_cpu(), time.perf_counter()
        for i in range(j, min(n, j + 100)):
            op(i)
        wall += time.perf_counter() - t0
        client += _client_cpu() - c0
        server += _server_cpu(mon) - s0
        wal.read()
    commits = sum(b for x, b in wal.commits.items() if x in wal.xids)
    total = sum(r[2] for r in wal.records) + commits
    fpi = sum(r[3] for r in wal.records)
    out: dict[str, Any] = {
        "wal_b": (total - fpi) / n, "fpi_b": fpi / n, "cpu_ms": 1000 * (client + server) / n,
        "client_ms": 1000 * client / n, "server_ms": 1000 * server / n, "ops_s": n / wall,
    }
    if by_rel:
        names = dict(mon.execute("SELECT relfilenode::text, relname FROM pg_class WHERE relfilenode <> 0").fetchall())
        rels: dict[str, float] = {"commit": commits / n}
        for _, _, length, fpi_len, rel in wal.records:
            key = names.get(rel, rel)
            rels[key] = rels.get(key, 0) + (length - fpi_len) / n
        out["by_rel"] = dict(sorted(((k, round(v)) for k, v in rels.items() if v >= 5), key=lambda kv: -kv[1]))
    return out


def _prepare(mon: Any) -> None:
    mon.execute("CHECKPOINT")
    mon.execute("VACUUM ANALYZE")


def run(url: str, n: int, rounds: int, warm: int, by_rel: bool) -> dict[str, Any]:
    import psycopg

    import agentboard
    from agentboard.config import Settings
    from agentboard.kernel import runs, tasks
    from agentboard.store import open_database

    home = tempfile.mkdtemp(prefix="ab-pgwal-")
    agentboard.connect(url).close()  # the schema
    db = open_database(url, settings=Settings(home=Path(home)), migrate=False)
    mon = psycopg.connect(url, autocommit=True)
    mon.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
    mon.execute("CREATE TABLE bench_raw (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)")
    raw = psycopg.connect(url)
    board = "default"
    samples: dict[str, list[dict[str, Any]]] = {p: [] for p in PHASES}

    def raw_op(i: int) -> None:
        raw.execute("INSERT INTO bench_raw (v, at) VALUES (%s, %s)", (f"row {i}", time.time()))
        raw.commit()

    ids: list[str] = []
    claims: list[int] = []
    completed = [0]

    def create(i: int) -> None:
        ids.append(tasks.create(db, board, f"task {len(ids)}", assignee="w")["id"])

    def claim(i: int) -> None:
        claims.append(runs.claim(db, board, ids[len(claims)])["run_id"])

    def complete(i: int) -> None:
        k = completed[0]
        completed[0] += 1
        runs.complete(db, board, ids[k], run_id=claims[k], summary="done")

    def drain(i: int) -> None:
        got = runs.claim_next(db, board, limit=1)
        runs.complete(db, board, got[0]["id"], run_id=got[0]["run_id"], summary="done")

    for _ in range(rounds):
        ids.clear()
        claims.clear()
        completed[0] = 0
        for name, op in (("raw", raw_op), ("create", create), ("claim", claim), ("complete", complete)):
            _prepare(mon)
            for i in range(warm):
                op(i)
            samples[name].append(_measure(mon, n, op, by_rel))
        ids.clear()
        for i in range(n + warm):  # the drain's backlog (not measured)
            create(i)
        _prepare(mon)
        for i in range(warm):
            drain(i)
        samples["drain"].append(_measure(mon, n, drain, by_rel))
    out: dict[str, Any] = {}
    for name in PHASES:
        out[name] = {k: round(statistics.median(s[k] for s in samples[name]), 3 if k.endswith("ms") else 0)
                     for k in ("wal_b", "fpi_b", "cpu_ms", "client_ms", "server_ms", "ops_s")}
        if by_rel:
            out[name]["by_rel"] = samples[name][-1]["by_rel"]
    raw.close()
    mon.close()
    db.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm", type=int, default=100)
    ap.add_argument("--by-rel", action="store_true")
    args = ap.parse_args()
    url, name = fresh_pg(DEFAULT_PG)
    try:
        phases = run(url, args.n, args.rounds, args.warm, args.by_rel)
    finally:
        drop_pg(DEFAULT_PG, name)
    print(f"{'phase':9} {'WAL B/op':>9} {'FPI B/op':>9} {'CPU ms/op':>10} {'client':>7} {'server':>7} {'ops/s':>7}",
          file=sys.stderr)
    for p, v in phases.items():
        print(f"{p:9} {v['wal_b']:9.0f} {v['fpi_b']:9.0f} {v['cpu_ms']:10.3f} {v['client_ms']:7.3f} "
              f"{v['server_ms']:7.3f} {v['ops_s']:7.0f}", file=sys.stderr)
        if "by_rel" in v:
            print("          " + ", ".join(f"{k} {b}" for k, b in v["by_rel"].items()), file=sys.stderr)
    print(json.dumps({"bench": "pg_wal", "n": args.n, "rounds": args.rounds, "load": load_average(),
                      "phases": phases}))


if __name__ == "__main__":
    main()
