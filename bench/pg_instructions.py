"""What a completion costs the PostgreSQL server, counted in instructions.

The throughput and CPU that ``pg_peers.py`` measures vary from run to run on a shared machine.
They drift by a third or more when another tenant of the host is busy, and a change of a few
percent in the server's work then cannot be seen. This benchmark counts the instructions the
server executes instead, with ``valgrind --tool=callgrind``. For the same binary, data and
statements the count is the same in every run, whatever else the machine is doing.

How it counts:

- It starts a PostgreSQL cluster of its own in a temporary folder (``initdb``, a free port on
  127.0.0.1; as the ``postgres`` user when run as root). Each system gets a database there and
  its schema installed by the system's own installer (``pg_peers.install``). Then
  ``--small`` + ``--large`` jobs are created and claimed, through the system's own calls.
- It writes each completion as a literal SQL statement. For agentboard this is the statement
  ``kernel.runs.complete`` sends, with its parameters, captured from the kernel. For pgqueuer it
  is ``log_jobs`` of one job, and for ``raw`` it is ``pg_peers``' bare ``UPDATE``. For
  ``agentboard-without-<part>`` it is agentboard's statement, with that part taken away
  (``_completion_parts``).
- It stops the cluster and runs ``postgres --single`` on each database under callgrind twice:
  once with ``--small`` completions and once with ``--large`` others. A completion's cost is
  the difference of the two totals divided by the difference of the counts, so starting the
  backend, its first plans and its exit cancel out.
- A single-user backend parses and plans each statement it reads. Processes do not: the kernel
  and the peers prepare theirs. So the parser's, the analyzer's and the planner's instructions are
  reported apart, and ``executed`` is the rest.

    python bench/pg_instructions.py                        # agentboard, pgqueuer, raw
    python bench/pg_instructions.py --systems agentboard,agentboard-without-count-trigger

Fewer completions than the defaults (100, then 300) count high: the first pages a table fills
cost more per row. Needs valgrind and the PostgreSQL server's binaries (``pg_config --bindir``).
Prints one JSON line on stdout and a table on stderr. Takes about 15 s per system.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import pg_peers  # noqa: E402

SYSTEMS = ("agentboard", "pgqueuer", "raw")
#: the functions whose inclusive instructions are the statement's parsing, analysis and planning
PREPARING = ("pg_parse_query", "pg_analyze_and_rewrite_fixedparams", "pg_plan_queries")


class Cluster:
    """A PostgreSQL cluster of the benchmark's own, in a temporary folder."""

    def __init__(self) -> None:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False)
        self.bin = Path(out.stdout.strip()) if out.returncode == 0 else None
        if self.bin is None or not (self.bin / "initdb").exists():
            found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
            if not found:
                raise SystemExit("pg_instructions: no PostgreSQL server binaries (initdb) found")
            self.bin = found[-1].parent
        self.root = Path(tempfile.mkdtemp(prefix="ab-pginstr-"))
        self.data = self.root / "data"
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            shutil.chown(self.root, self.user)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"])
        self.start()

    def _run(self, argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        if self.user:
            argv = ["runuser", "-u", self.user, "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, check=True, **kw)

    def url(self, db: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-l", str(self.root / "log"), "-o",
                   f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root}", "start"])

    def stop(self) -> None:
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-m", "fast", "stop"])

    def count(self, db: str, statements: list[str], tag: str) -> dict[str, int]:
        """Instructions of a single-user backend running ``statements`` on ``db``: the total and
        the parts that parse, analyze and plan."""
        src = self.root / f"{tag}.sql"
        src.write_text("\n".join(statements) + "\n")
        out = self.root / f"{tag}.callgrind"
        if self.user:
            shutil.chown(src, self.user)
        with src.open() as stdin:
            self._run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                       str(self.bin / "postgres"), "--single", "-D", str(self.data),
                       "-c", "synchronous_commit=off", db], stdin=stdin)
        report = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
                                capture_output=True, text=True, check=True).stdout
        counts = {"total": 0, **{name: 0 for name in PREPARING}}
        for line in report.splitlines():
            m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S.*?) \[", line)
            if m is None:
                m_total = re.match(r"\s*([\d,]+) \([^)]*\)\s+PROGRAM TOTALS", line)
                if m_total:
                    counts["total"] = int(m_total.group(1).replace(",", ""))
                continue
            name = m.group(2).split(":", 1)[-1]
            if name in PREPARING:
                counts[name] += int(m.group(1).replace(",", ""))
        return counts

    def close(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


# -- each system's completions, as literal statements ------------------------------------------


def _literal(conn: Any, sql: str, params: dict[str, Any]) -> str:
    """``sql`` with its ``:name`` parameters written in, on one line."""
    import psycopg

    from agentboard.store.pgwire import _PARAM_RE

    text = _PARAM_RE.sub(lambda m: f"%({m.group(1)})s", sql)
    return " ".join(psycopg.ClientCursor(conn).mogrify(text, params).split()) + ";"


class _Captured(Exception):
    pass


def agentboard_statements(url: str, n: int) -> list[str]:
    """The statement ``kernel.runs.complete`` sends for each of ``n`` claimed tasks."""
    import psycopg

    from agentboard.config import Settings
    from agentboard.kernel import runs, tasks
    from agentboard.store import open_database

    home = Path(tempfile.mkdtemp(prefix="ab-pginstr-home-"))
    db = open_database(url, settings=Settings(home=home), migrate=False)
    try:
        for i in range(n):
            tasks.create(db, pg_peers.BOARD, f"job {i}", assignee="worker")
        claimed = [runs.claim_next(db, pg_peers.BOARD, limit=1)[0] for _ in range(n)]
        sent: list[tuple[str, dict[str, Any]]] = []

        def capture(sql: str, params: dict[str, Any], **kw: Any) -> None:
            sent.append((sql, params))
            raise _Captured

        db.write_one = capture  # type: ignore[method-assign]
        for task in claimed:
            try:
                runs.complete(db, pg_peers.BOARD, task["id"], run_id=task["run_id"], summary="done")
            except _Captured:
                pass
        if len(sent) != n:
            raise SystemExit("pg_instructions: the kernel did not complete through its server-side function")
    finally:
        db.close()
        shutil.rmtree(home, ignore_errors=True)
    with psycopg.connect(url) as conn:
        return [_literal(conn, sql, params) for sql, params in sent]


def pgqueuer_statements(url: str, n: int) -> list[str]:
    """``log_jobs`` of each of ``n`` dequeued jobs, one job per call (as ``pg_peers``)."""
    import psycopg

    async def claim() -> tuple[list[Any], str]:
        q = pg_peers.Pgqueuer()
        await q.aopen(url, "instructions")
        for i in range(n):
            await q.create(f"job {i}")
        jobs = [await q.claim() for _ in range(n)]
        sql = q.q.qbq.build_log_job_query()
        await q.aclose()
        return jobs, sql

    jobs, sql = asyncio.run(claim())
    sql = re.sub(r"\$(\d)::(\S+?)\[\]", lambda m: f"ARRAY[%(p{m.group(1)})s]::{m.group(2)}[]", sql)
    with psycopg.connect(url) as conn:
        cur = psycopg.ClientCursor(conn)
        return [" ".join(cur.mogrify(sql, {"p1": job.id, "p2": "successful", "p3": None}).split()) + ";"
                for job in jobs]


def raw_statements(url: str, n: int) -> list[str]:
    raw = pg_peers.Raw()
    raw.open(url, "instructions")
    for i in range(n):
        raw.create(f"job {i}")
    ids = [raw.claim() for _ in range(n)]
    raw.close()
    return [f"UPDATE jobs SET status = 'done', finished_at = now() WHERE id = {i};" for i in ids]


def statements(system: str, url: str, n: int) -> list[str]:
    if system == "pgqueuer":
        return pgqueuer_statements(url, n)
    if system == "raw":
        return raw_statements(url, n)
    return agentboard_statements(url, n)


# -- measuring ------------------------------------------------------------------------------------


def measure(systems: list[str], small: int, large: int, keep: Path | None = None) -> list[dict[str, Any]]:
    import psycopg

    cluster = Cluster()
    try:
        prepared: dict[str, list[str]] = {}
        for i, system in enumerate(systems):
            db = f"instr_{i}"
            with psycopg.connect(cluster.url("postgres"), autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {db}")
            pg_peers.install(system, cluster.url(db))
            prepared[system] = statements(system, cluster.url(db), small + large)
            with psycopg.connect(cluster.url(db), autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
        cluster.stop()
        rows = []
        for i, system in enumerate(systems):
            calls = prepared[system]
            t0 = time.monotonic()
            a = cluster.count(f"instr_{i}", calls[:small], f"{i}_a")
            b = cluster.count(f"instr_{i}", calls[small:], f"{i}_b")
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                for part in ("a", "b"):
                    shutil.copy(cluster.root / f"{i}_{part}.callgrind", keep / f"{system}.{part}.callgrind")
            per = {k: (b[k] - a[k]) / (large - small) for k in a}
            preparing = sum(per[name] for name in PREPARING)
            rows.append({"system": system, "total": round(per["total"]), "preparing": round(preparing),
                         "executed": round(per["total"] - preparing), "seconds": round(time.monotonic() - t0, 1)})
            print(f"{system}: {rows[-1]['executed']:,} instructions executed per completion "
                  f"({rows[-1]['total']:,} with parsing and planning)", file=sys.stderr, flush=True)
        return rows
    finally:
        cluster.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help=f"comma-separated, of {', '.join(SYSTEMS)} and {pg_peers.WITHOUT}<part> (default: the first three)")
    ap.add_argument("--small", type=int, default=100, help="completions in the first count (default 100)")
    ap.add_argument("--large", type=int, default=300, help="completions in the second count (default 300)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="a folder to keep the callgrind files in (<system>.a/.b.callgrind), for callgrind_annotate")
    args = ap.parse_args()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    bad = [s for s in systems if s not in SYSTEMS and pg_peers._parts(s) is None]
    if bad:
        print(f"pg_instructions: unknown system {', '.join(bad)}; choose among {', '.join(SYSTEMS)} "
              f"or {pg_peers.WITHOUT}<part>", file=sys.stderr)
        return 2
    if args.large <= args.small:
        print("pg_instructions: --large must be greater than --small", file=sys.stderr)
        return 2
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            print(f"pg_instructions: {tool} is not installed (apt-get install valgrind)", file=sys.stderr)
            return 2
    if "pgqueuer" in systems and importlib.util.find_spec("pgqueuer") is None:
        print("pg_instructions: pgqueuer is not installed (pip install -e '.[bench]')", file=sys.stderr)
        return 2
    rows = measure(systems, args.small, args.large, args.keep)
    base = next((r for r in rows if r["system"] == "agentboard"), None)
    print(f"{'system':<40} {'executed':>12} {'parse+plan':>12} {'total':>12}  vs agentboard", file=sys.stderr)
    for r in rows:
        ratio = f"{r['executed'] / base['executed']:.2f}" if base else "-"
        print(f"{r['system']:<40} {r['executed']:>12,} {r['preparing']:>12,} {r['total']:>12,}  {ratio}", file=sys.stderr)
    print(json.dumps({"bench": "pg_instructions", "verb": "complete", "small": args.small, "large": args.large,
                      "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
