"""A worker's ``.board/`` files (``protocol.lifecycle.prepare``) against writing the same bytes bare.

Before a worker starts, the dispatcher writes its files into a new workspace: ``context.md``,
``task.json``, ``wiki/INDEX.md``, ``history.md``, ``prompt.md`` and ``.mcp.json``, through
``protocol.safefs`` (folders opened without following links, files never written through a
link), after reading what they need for the whole batch at once (``lifecycle.prepare_reads``,
not timed here: the dispatcher reads it with the claim).

Timed, in rounds that alternate so both see the same disk and caches:

- ``prepare``: ``lifecycle.prepare`` of N claimed tasks, each into a new scratch workspace;
- baseline: the same files with the same bytes written by plain ``open(...).write(...)`` into
  new folders (the folders made with ``os.makedirs``) — the floor of writing them.

Reported per worker: wall and CPU time of each, and the ratio prepare / baseline.

    python bench/prepare_files.py [--n 500] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import agentboard
from agentboard.kernel import dispatching, runs, tasks
from agentboard.protocol import lifecycle

BODY = "Make the parser faster.\n\n## Acceptance\n- the benchmark improves\n- the tests pass\n"


def _files_of(folder: Path) -> list[tuple[str, bytes]]:
    """The files ``prepare`` wrote into one workspace, as (relative path, bytes)."""
    out = []
    for root, _dirs, names in os.walk(folder):
        for name in names:
            path = Path(root) / name
            out.append((str(path.relative_to(folder)), path.read_bytes()))
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500, help="workers prepared per round (default 500)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of each, alternated (default 5)")
    ap.add_argument("--json", action="store_true", help="JSON on stdout (always printed; the table goes to stderr)")
    args = ap.parse_args(argv)

    folder = Path(tempfile.mkdtemp(prefix="ab-bench-prepare-"))
    client = agentboard.connect(str(folder / "home"))
    try:
        db, settings = client.db, client.db.settings
        total = args.n * args.rounds
        ids = [tasks.create(db, "default", f"task {i}", body=BODY, assignee="bench")["id"] for i in range(total)]
        claims = {t: runs.claim(db, "default", t)["run_id"] for t in ids}
        loaded = lifecycle.prepare_reads(db, settings, "default", ids)
        rows = {t: dispatching.task(db, "default", t) for t in ids}
        sample: list[tuple[str, bytes]] = []
        results: dict[str, list[tuple[float, float]]] = {"prepare": [], "baseline": []}
        for r in range(args.rounds):
            batch = ids[r * args.n:(r + 1) * args.n]
            root = folder / f"ws-{r}"
            root.mkdir()
            w0, c0 = time.perf_counter(), time.process_time()
            for t in batch:
                ws = root / t
                ws.mkdir()
                lifecycle.prepare(db, settings, "default", rows[t], claims[t], ws, api_url="http://127.0.0.1:9",
                                  token="bench-token", loaded=loaded[t],
                                  workspace_info={"workspace_kind": "scratch", "workspace_path": str(ws)})
            results["prepare"].append((time.perf_counter() - w0, time.process_time() - c0))
            if not sample:
                sample = _files_of(root / batch[0])
            bare = folder / f"bare-{r}"
            bare.mkdir()
            w0, c0 = time.perf_counter(), time.process_time()
            for t in batch:
                ws = bare / t
                ws.mkdir()
                for rel, data in sample:
                    path = ws / rel
                    os.makedirs(path.parent, exist_ok=True)
                    with open(path, "wb") as fh:
                        fh.write(data)
            results["baseline"].append((time.perf_counter() - w0, time.process_time() - c0))
    finally:
        client.close()
        shutil.rmtree(folder, ignore_errors=True)

    def per(kind: str, i: int) -> float:
        return statistics.median(x[i] for x in results[kind]) / args.n * 1000

    out: dict[str, Any] = {
        "n": args.n, "rounds": args.rounds, "files": [rel for rel, _ in sample],
        "bytes": sum(len(d) for _, d in sample),
        "prepare_ms": {"wall": round(per("prepare", 0), 3), "cpu": round(per("prepare", 1), 3)},
        "baseline_ms": {"wall": round(per("baseline", 0), 3), "cpu": round(per("baseline", 1), 3)},
    }
    out["ratio"] = {k: round(out["prepare_ms"][k] / out["baseline_ms"][k], 2) for k in ("wall", "cpu")}
    print(json.dumps(out))
    print(f"\n.board/ files of one worker ({len(sample)} files, {out['bytes']:,} bytes), "
          f"median of {args.rounds} rounds of {args.n}:", file=sys.stderr)
    for kind in ("prepare", "baseline"):
        print(f"  {kind:<10} wall {out[kind + '_ms']['wall']:.3f} ms  cpu {out[kind + '_ms']['cpu']:.3f} ms",
              file=sys.stderr)
    print(f"  ratio      wall {out['ratio']['wall']:.2f}  cpu {out['ratio']['cpu']:.2f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
