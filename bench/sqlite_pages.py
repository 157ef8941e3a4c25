"""Pages each verb writes on SQLite, by table and index, next to a raw one-row insert.

On SQLite (WAL, ``synchronous=FULL``) a commit appends one WAL frame per page it changed and
syncs the file: the bytes synced grow with the pages, so a verb's pages are most of what
separates its speed from a bare insert's (``bench/kernel.py``). This benchmark counts them.

Workload: ``--n`` tasks created, linked into chains of 10, then drained in waves as in
``bench/kernel.py`` (claim, heartbeat, complete — which promotes the next in its chain). Every
``--every``-th operation of each verb is measured: the WAL is checkpointed and emptied just
before it (on a connection of its own), and the frames its commit appended are read from the
WAL file afterwards and named by the b-tree that owns their page (SQLite's ``dbstat`` table,
read just after the operation). The baseline is the same count for single-row ``INSERT``
transactions on a bare table with the same settings.

    python bench/sqlite_pages.py [--n 2000] [--every 10]

Prints one JSON line on stdout and a table on stderr.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import struct
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agentboard
from agentboard.kernel import links, queries, runs, tasks

VERBS = ("create", "link", "claim", "heartbeat", "complete")


class WalCounter:
    """The pages one transaction appended to a database's WAL, by owning b-tree."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.pages: dict[str, Counter[str]] = {}
        self.ops: Counter[str] = Counter()
        self.page_size = int(self.conn.execute("PRAGMA page_size").fetchone()[0])
        try:
            self.conn.execute("SELECT 1 FROM dbstat LIMIT 1").fetchall()
            self.named = True
        except sqlite3.OperationalError:  # an SQLite built without the dbstat table: counts only
            self.named = False

    def measure(self, verb: str, op: Callable[[], Any]) -> Any:
        # (TRUNCATE: the next commit writes the WAL from its start, so its frames are all there is)
        busy = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if busy:  # another connection read or wrote meanwhile: not counted
            return op()
        out = op()
        frames = self._frames()
        owner = dict(self.conn.execute("SELECT pageno, name FROM dbstat")) if self.named else {}
        count = self.pages.setdefault(verb, Counter())
        for page in frames:
            count[owner.get(page, "(other)")] += 1
        self.ops[verb] += 1
        return out

    def _frames(self) -> list[int]:
        data = Path(str(self.path) + "-wal").read_bytes()
        if len(data) < 32:
            return []
        size = struct.unpack(">I", data[8:12])[0]
        pages, at = [], 32
        while at + 24 + size <= len(data):
            pages.append(struct.unpack(">I", data[at:at + 4])[0])
            at += 24 + size
        return pages

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for verb, count in self.pages.items():
            n = self.ops[verb]
            out[verb] = {"measured": n, "pages": round(sum(count.values()) / n, 2),
                         "by_btree": {k: round(v / n, 2) for k, v in count.most_common()}}
        return out

    def close(self) -> None:
        self.conn.close()


def baseline_pages(folder: Path, n: int) -> dict[str, Any]:
    """Pages per single-row INSERT transaction on a bare table, WAL and ``synchronous=FULL``."""
    path = folder / "baseline.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL, at REAL NOT NULL)")
    counter = WalCounter(path)
    for i in range(n):
        counter.measure("insert", lambda i=i: conn.execute("INSERT INTO t (v, at) VALUES (?, ?)",
                                                            (f"row {i}", time.time())))
    out = counter.summary()["insert"]
    counter.close()
    conn.close()
    return out


def workload(home: Path, n: int, every: int) -> tuple[dict[str, Any], int]:
    client = agentboard.connect(str(home))
    db, slug = client.db, "default"
    (path,) = home.glob("*.db")
    counter = WalCounter(path)
    seen: Counter[str] = Counter()

    def op(verb: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        seen[verb] += 1
        if seen[verb] % every:
            return fn(*args, **kwargs)
        return counter.measure(verb, lambda: fn(*args, **kwargs))

    try:
        ids = [op("create", tasks.create, db, slug, f"bench task {i}", assignee="bench")["id"] for i in range(n)]
        for i in range(n):
            if i % 10:
                op("link", links.link, db, slug, ids[i - 1], ids[i])
        while True:
            ready = [r["id"] for r in queries.list_tasks(db, slug, status="ready", limit=n)]
            if not ready:
                break
            for task_id in ready:
                run = op("claim", runs.claim, db, slug, task_id)
                op("heartbeat", runs.heartbeat, db, slug, task_id, run_id=run["run_id"])
                op("complete", runs.complete, db, slug, task_id, summary="done", run_id=run["run_id"])
        return counter.summary(), counter.page_size
    finally:
        counter.close()
        client.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="tasks (chains of 10)")
    ap.add_argument("--every", type=int, default=10, help="measure every k-th operation of each verb")
    args = ap.parse_args()
    if args.n < 10 or args.every < 1:
        print("sqlite_pages: --n must be at least 10 and --every at least 1", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="ab-bench-pages-"))
    try:
        verbs, page_size = workload(folder / "home", args.n, args.every)
        base = baseline_pages(folder, 100)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out = {"bench": "sqlite_pages", "n": args.n, "every": args.every, "page_size": page_size,
           "baseline_insert": base, "verbs": verbs,
           "vs_baseline": {v: round(verbs[v]["pages"] / base["pages"], 2) for v in VERBS if v in verbs}}
    print(json.dumps(out))
    print(f"\nWAL pages per transaction on SQLite, n={args.n} (every {args.every}th op measured; "
          f"{page_size}-byte pages)", file=sys.stderr)
    print(f"  {'raw one-row insert':<20}{base['pages']:>6.2f}", file=sys.stderr)
    for verb in VERBS:
        if verb not in verbs:
            continue
        row = verbs[verb]
        parts = ", ".join(f"{k} {v:g}" for k, v in list(row["by_btree"].items())[:8])
        print(f"  {verb:<20}{row['pages']:>6.2f}  {out['vs_baseline'][verb]:>5.1f}x  {parts}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
