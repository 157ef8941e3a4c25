"""A race of N script attempts against N separate tasks, on a repository of 10,000 files.

For N = 2, 4 and 8, each repeat makes, on a board whose target is the repository (integrate:
merge):

- a **race** of N attempts of one script profile (``--race w,w,…``), and
- **N separate tasks** of the same profile (with review, so each stops in review),

then runs dispatcher passes until every worker is started, and measures from the moment the
race (or the last separate task) was ready to the moment its last worker process was started
(the dispatcher's ``on_spawn`` hook): worktrees and branches prepared, ``.board/`` written,
processes started. Once the workers have reported (each commits a file of its own and writes
``.board/result.json``), it times the pick of the race's first attempt (``finish.pick``: the
attempt's branch merged into ``main``) against the approval of one separate task in review
(``finish.approve``: its branch merged the same way).

    python bench/race.py [--files 10000] [--sizes 2,4,8] [--repeats 3] [--pg URL | --no-pg]

Prints a table on stderr and one JSON object on stdout: per backend and N, the p50/p99 of ready
→ every attempt running for the race and for the separate tasks and their ratio, and the
median pick and approval times and their ratio (target: both ratios ≤ 1.5).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import DEFAULT_PG, load_average, per_backend, report  # noqa: E402

WORKER = "sh -c " + shlex.quote(
    "echo \"$AGENTBOARD_TASK\" > \"out-$AGENTBOARD_TASK.txt\" && git add -A && git commit -qm work && "
    "echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout


def make_repo(root: Path, files: int) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "bench@example.com")
    git(repo, "config", "user.name", "bench")
    for i in range(files):
        d = repo / f"pkg{i // 500:03d}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i:05d}.py").write_text(f"VALUE_{i} = {i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"{files} files")
    return repo


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


class Bench:
    def __init__(self, url: str | None, files: int) -> None:
        import agentboard
        from agentboard.dispatch.dispatcher import Dispatcher

        self.home = Path(tempfile.mkdtemp(prefix="ab-bench-race-"))
        os.environ["AGENTBOARD_HOME"] = str(self.home)
        if url:
            os.environ["AGENTBOARD_DATABASE_URL"] = url
        else:
            os.environ.pop("AGENTBOARD_DATABASE_URL", None)
        self.repo = make_repo(self.home, files)
        self.ab = agentboard.connect(url or str(self.home))
        self.ab.settings.home = self.home
        self.ab.settings.max_parallel = 16
        self.ab.create_board("race", workdir=str(self.repo), settings={"integrate": "merge", "max_parallel": 16})
        self.ab.add_profile("w", command=WORKER, max_concurrency=16)
        self.board = self.ab.board("race")
        self.spawned: dict[str, float] = {}
        self.d = Dispatcher(self.ab.db, self.ab.settings, boards=["race"])
        self.d.on_spawn = lambda _b, task_id, _r, _pid, at: self.spawned.__setitem__(task_id, at)

    def close(self) -> None:
        self.d.stop()
        self.ab.close()

    def _until(self, done: Any, what: str, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise SystemExit(f"{what} did not happen within {timeout} s")
            self.d.run_pass_report()
            self.d.wait_idle(5)

    def attempt_ids(self, race_id: str) -> list[str]:
        rows = self.ab.db.read(lambda tx: tx.all("SELECT attempt_task_id FROM attempts WHERE task_id = :t", {"t": race_id}))
        return [r["attempt_task_id"] for r in rows if r["attempt_task_id"]]

    def race_start(self, n: int) -> tuple[float, str]:
        race = self.board.create("race", race=[",".join(["w"] * n)])
        t0 = time.time()
        self._until(lambda: len([i for i in self.attempt_ids(race["id"]) if i in self.spawned]) == n,
                    "every attempt running")
        return max(self.spawned[i] for i in self.attempt_ids(race["id"])) - t0, race["id"]

    def separate_start(self, n: int) -> tuple[float, list[str]]:
        ids = [self.board.create(f"task {i}", assignee="w", review=True)["id"] for i in range(n)]
        t0 = time.time()
        self._until(lambda: all(i in self.spawned for i in ids), "every task running")
        return max(self.spawned[i] for i in ids) - t0, ids

    def status(self, task_id: str) -> str:
        return str(self.board.show(task_id)["status"])

    def finish(self, race_id: str, ids: list[str]) -> tuple[float, float]:
        from agentboard.dispatch import finish

        self._until(lambda: self.status(race_id) == "review" and all(self.status(i) == "review" for i in ids),
                    "every worker to report")
        t = time.perf_counter()
        out = finish.pick(self.ab.db, "race", race_id, 1)
        pick = time.perf_counter() - t
        assert out.get("integration") == "merged", out
        t = time.perf_counter()
        out = finish.approve(self.ab.db, "race", ids[0])
        approve = time.perf_counter() - t
        assert out.get("integration") == "merged", out
        return pick, approve


def measure(url: str | None, files: int, sizes: list[int], repeats: int) -> dict[str, Any]:
    b = Bench(url, files)
    rows = []
    try:
        for n in sizes:
            race_s: list[float] = []
            sep_s: list[float] = []
            picks: list[float] = []
            approves: list[float] = []
            for i in range(repeats):  # alternated, so drift hits both alike
                print(f"  {'postgresql' if url else 'sqlite'} N={n} repeat {i + 1}/{repeats}", file=sys.stderr)
                r, race_id = b.race_start(n)
                s, ids = b.separate_start(n)
                p, a = b.finish(race_id, ids)
                race_s.append(r * 1000)
                sep_s.append(s * 1000)
                picks.append(p * 1000)
                approves.append(a * 1000)
            rows.append({
                "n": n, "repeats": repeats,
                "race_running_p50_ms": round(pct(race_s, 50), 1), "race_running_p99_ms": round(pct(race_s, 99), 1),
                "separate_running_p50_ms": round(pct(sep_s, 50), 1),
                "separate_running_p99_ms": round(pct(sep_s, 99), 1),
                "running_ratio_p50": round(pct(race_s, 50) / max(pct(sep_s, 50), 0.001), 2),
                "running_ratio_p99": round(pct(race_s, 99) / max(pct(sep_s, 99), 0.001), 2),
                "pick_ms": round(statistics.median(picks), 1), "approve_ms": round(statistics.median(approves), 1),
                "pick_ratio": round(statistics.median(picks) / max(statistics.median(approves), 0.001), 2),
            })
    finally:
        b.close()
    ok = all(r["running_ratio_p50"] <= 1.5 and r["pick_ratio"] <= 1.5 for r in rows)
    return {"backend": "postgresql" if url else "sqlite", "files": files, "sizes": rows, "meets_target": ok}


def _line(r: dict[str, Any]) -> str:
    return "; ".join(
        f"N={x['n']}: running p50 {x['race_running_p50_ms']} vs {x['separate_running_p50_ms']} ms "
        f"(x{x['running_ratio_p50']}), p99 {x['race_running_p99_ms']} vs {x['separate_running_p99_ms']} ms "
        f"(x{x['running_ratio_p99']}); pick {x['pick_ms']} vs approve {x['approve_ms']} ms (x{x['pick_ratio']})"
        for x in r["sizes"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--sizes", default="2,4,8")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pg", default=DEFAULT_PG)
    ap.add_argument("--no-pg", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    load0 = load_average()
    results = per_backend(lambda url: measure(url, args.files, sizes, args.repeats), args.pg, args.no_pg)
    load = report(results, _line, load0)
    print(json.dumps({"benchmark": "race", "load_average_start": load0, "load_average_end": load,
                      "cpus": os.cpu_count(), "results": results}))


if __name__ == "__main__":
    main()
