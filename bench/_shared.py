"""What the dispatcher and API benchmarks share: a scratch PostgreSQL database, the load
average, and running one measurement per backend."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

DEFAULT_PG = os.environ.get("AGENTBOARD_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")


def fresh_pg(url: str) -> tuple[str, str]:
    """A new database on the server (never touches existing ones). Returns its URL and name."""
    import secrets

    import psycopg

    name = "ab_bench_" + secrets.token_hex(4)
    base, _, _ = url.rpartition("/")
    with psycopg.connect(base + "/postgres", autocommit=True, connect_timeout=3) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{base}/{name}", name


def drop_pg(url: str, name: str) -> None:
    import psycopg

    base, _, _ = url.rpartition("/")
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def per_backend(measure: Callable[[str | None], dict[str, Any]], pg: str, no_pg: bool) -> list[dict[str, Any]]:
    """``measure(None)`` on SQLite, then ``measure(url)`` on a scratch PostgreSQL database."""
    results = [measure(None)]
    if not no_pg:
        try:
            url, name = fresh_pg(pg)
        except Exception as exc:  # pragma: no cover - machine dependent
            results.append({"backend": "postgresql", "skipped": str(exc)})
        else:
            try:
                results.append(measure(url))
            finally:
                drop_pg(pg, name)
    return results


def report(results: list[dict[str, Any]], line: Callable[[dict[str, Any]], str],
           load_start: list[float] | None) -> list[float] | None:
    """One readable line per backend on stderr, and the load average; returns the final load."""
    for r in results:
        if "skipped" in r:
            print(f"{r['backend']:<11} skipped: {r['skipped']}", file=sys.stderr)
            continue
        print(f"{r['backend']:<11} {line(r)} {'OK' if r['meets_target'] else 'MISSES TARGET'}", file=sys.stderr)
    load = load_average()
    print(f"load average (1/5/15 min): {load_start} at the start, {load} at the end; numbers are only "
          "comparable on a quiet machine", file=sys.stderr)
    return load


class RoundTrips:
    """Counts the client/server round trips of PostgreSQL calls made through ``db`` (a
    :class:`agentboard.store.engine.Database`): libpq's protocol trace of every connection the
    pool hands out, one round trip per turn from sending to receiving.

    ``with RoundTrips(db) as rt: verb(...)`` then ``rt.count``.
    """

    def __init__(self, db: Any) -> None:
        import tempfile

        self.db = db
        self._file = tempfile.TemporaryFile(mode="w+")
        self.count = 0

    def _checkout(self, conn: Any) -> None:
        from psycopg.pq import Trace

        conn.pgconn.trace(self._file.fileno())
        conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)

    def _checkin(self, conn: Any) -> None:
        conn.pgconn.untrace()

    def __enter__(self) -> RoundTrips:
        self._file.seek(0)
        self._file.truncate()
        self.db.engine  # noqa: B018 - the pool is made with the engine
        self.db._pool.watchers.append((self._checkout, self._checkin))
        return self

    def __exit__(self, *exc: Any) -> None:
        self.db._pool.watchers.remove((self._checkout, self._checkin))
        self._file.flush()
        self._file.seek(0)
        self.count = 0
        last = "B"
        for line in self._file:
            side = line[:1]
            if side == "B" and last == "F":
                self.count += 1
            if side in ("F", "B"):
                last = side
