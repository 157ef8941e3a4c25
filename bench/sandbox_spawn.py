"""Starting a sandboxed worker: what showing it its tools costs, and a task repository against a
linked worktree.

Spawn (``--n`` each, interleaved, the order alternating):

- ``bare``: the sandbox as it was before it showed anything — ``Confinement.command`` with no
  paths bound back, then the process started as ``dispatch.spawn.start`` starts it;
- ``shown``: ``dispatch.spawn.start`` itself — resolving the program, checking that the sandbox
  can see it, finding what it needs under ``/tmp`` (``isolation.needed_paths``) and binding it.

Each reports the time until the process is started (``start``) and until the sandboxed program
(``true``) has run and exited (``run``): p50 and p99 in ms, and the ratios ``shown / bare``.

Worktree (``--repeats`` each, on a repository of ``--files`` files): ``linked`` (``git worktree
add``, what every worker got before) and ``task_repo`` (the task repository a confined worker
gets: ``git init``, alternates, checkout); medians and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import load_average  # noqa: E402

from agentboard import config  # noqa: E402
from agentboard.dispatch import isolation, spawn, workspaces  # noqa: E402
from agentboard.domain.worker_env import WorkerEnv  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] * 1000, 2)


def spawn_once(conf: isolation.Confinement, ws: Path, env: dict[str, str], log: Path, shown: bool) -> tuple[float, float]:
    t0 = time.perf_counter()
    if shown:
        proc, _ = spawn.start(["true"], cwd=ws, env=env, log=log, log_max_bytes=0, confinement=conf)
    else:  # before: the sandbox with nothing bound back
        argv = conf.command([spawn._resolve("true", env)], ws)
        fh = open(log, "ab", buffering=0)  # noqa: SIM115 - closed below
        try:
            proc = subprocess.Popen(argv, cwd=str(ws), env=env, stdin=subprocess.DEVNULL, stdout=fh,
                                    stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
        finally:
            fh.close()
    t1 = time.perf_counter()
    code = proc.wait()
    t2 = time.perf_counter()
    if code != 0:
        raise SystemExit(f"the sandboxed program failed ({code}): {log.read_text()[-500:]}")
    return t1 - t0, t2 - t0


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout


def worktrees(root: Path, files: int, repeats: int) -> dict[str, list[float]]:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for i in range(files):
        d = repo / f"pkg{i // 500:03d}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i:05d}.py").write_text(f"VALUE_{i} = {i}\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qm", "files")
    out: dict[str, list[float]] = {"linked": [], "task_repo": []}
    for i in range(repeats):
        order = ["linked", "task_repo"] if i % 2 == 0 else ["task_repo", "linked"]
        for case in order:
            tid = f"t_{case}_{i}"
            ws = workspaces.Workspace("worktree", repo / ".worktrees" / tid, branch=f"ab/{tid}", repo=repo)
            t0 = time.perf_counter()
            workspaces.prepare(ws, own_repo=case == "task_repo")
            out[case].append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=150)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    if shutil.which("bwrap") is None:
        raise SystemExit("bubblewrap (bwrap) is not installed")
    root = Path(tempfile.mkdtemp(prefix="agentboard-bench-sandbox-", dir="/var/tmp"))
    try:
        home = root / "home"
        home.mkdir()
        settings = config.load(home)
        conf = isolation.resolve("sandbox", settings)
        ws = root / "ws"
        ws.mkdir()
        env = spawn.worker_env(settings, WorkerEnv.for_run("default", {"id": "t_bench"}, 1, ws, profile="bench"),
                               profile={"name": "bench"})
        log = root / "bench.log"
        times: dict[str, dict[str, list[float]]] = {"bare": {"start": [], "run": []},
                                                    "shown": {"start": [], "run": []}}
        for i in range(args.n):
            for case in (("bare", "shown") if i % 2 == 0 else ("shown", "bare")):
                s, r = spawn_once(conf, ws, env, log, case == "shown")
                times[case]["start"].append(s)
                times[case]["run"].append(r)
        spawn_stats = {case: {f"{k}_p50_ms": pct(v, 50) for k, v in t.items()}
                       | {f"{k}_p99_ms": pct(v, 99) for k, v in t.items()} for case, t in times.items()}
        ratios = {f"{k}_{p}": round(pct(times["shown"][k], q) / max(pct(times["bare"][k], q), 1e-9), 3)
                  for k in ("start", "run") for p, q in (("p50", 50), ("p99", 99))}
        wt = worktrees(root, args.files, args.repeats)
        wt_ms = {k: round(statistics.median(v) * 1000, 1) for k, v in wt.items()}
        result = {"bench": "sandbox_spawn", "n": args.n, "spawn": spawn_stats, "ratios_shown_vs_bare": ratios,
                  "shown_paths": len(isolation.needed_paths(["true"], env)), "worktree_median_ms": wt_ms,
                  "worktree_ratio_task_repo_vs_linked": round(wt_ms["task_repo"] / max(wt_ms["linked"], 1e-9), 3),
                  "files": args.files, "load_average": load_average(), "cpus": os.cpu_count()}
        print(json.dumps(result))
        print(f"spawn of a sandboxed `true`, n={args.n} each (ms)", file=sys.stderr)
        for case, st in spawn_stats.items():
            print(f"  {case:6} start p50 {st['start_p50_ms']:8.2f} p99 {st['start_p99_ms']:8.2f}   "
                  f"run p50 {st['run_p50_ms']:8.2f} p99 {st['run_p99_ms']:8.2f}", file=sys.stderr)
        print(f"  ratios shown/bare: {ratios}", file=sys.stderr)
        print(f"worktree on {args.files} files (median ms): {wt_ms}", file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
