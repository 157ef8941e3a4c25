"""What protected git costs: a worktree task's status, its detail over the API and a retry's
preparation, each as it ran before (plain ``git -C <worktree>``) and through ``agentboard.gitsafe``.

A repository of ``--files`` files, a worktree task prepared by the dispatcher's own
``dispatch.workspaces.prepare``, one commit on its branch and a few uncommitted changes. In one
run, interleaved, ``--repeats`` times each:

- ``status``: plain ``git -C <worktree> status --porcelain --untracked-files=all`` against
  ``gitsafe.worktree_status`` (the worktree's link checked, read through the view);
- ``facts``: the four plain git calls the task's branch facts made before against
  ``dispatch.branches.facts`` now;
- ``get_task``: ``GET /api/tasks/{id}`` on a served app, its branch facts made the old way
  (the four plain calls patched in) against the code as it is, request after request;
- ``prepare``: a retry's preparation of the existing worktree, the old way (``.git`` exists,
  ``rev-parse HEAD``, ``rev-parse --git-common-dir`` for the excludes) against
  ``workspaces.prepare`` now;
- ``spawn``: what a first spawn does with git, for a new task each time: plan the workspace,
  create its worktree and branch, add ``.board/`` to the excludes — the old sequence of plain
  calls against ``workspaces.plan`` + ``workspaces.prepare`` + ``boarddir.git_exclude`` now.

Reports p50 and p99 milliseconds of each and the ratio of the new p50 to the old (goal for
``get_task``, ``prepare`` and ``spawn``: ≤ 1.1).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import load_average  # noqa: E402


def plain(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL).stdout


def make_repo(root: Path, files: int) -> Path:
    repo = root / "repo"
    repo.mkdir()
    plain(repo, "init", "-q", "-b", "main")
    plain(repo, "config", "user.email", "bench@example.com")
    plain(repo, "config", "user.name", "bench")
    for i in range(files):
        d = repo / f"pkg{i // 500:03d}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i:05d}.py").write_text(f"VALUE_{i} = {i}\n")
    plain(repo, "add", "-A")
    plain(repo, "commit", "-qm", "files")
    return repo


def old_facts(repo: Path, wt: Path, branch: str, base: str) -> dict[str, Any]:
    """The branch facts as they were read before: four plain git calls, one in the worktree."""
    exists = bool(plain(repo, "rev-parse", "--verify", "-q", f"refs/heads/{branch}").strip())
    counts = plain(repo, "rev-list", "--left-right", "--count", f"{base}...{branch}").split()
    stat = plain(repo, "diff", "--numstat", f"{base}...{branch}")
    lines = [ln for ln in plain(wt, "status", "--porcelain", "--untracked-files=all").splitlines() if ln.strip()]
    return {"exists": exists, "behind": int(counts[0]), "ahead": int(counts[1]), "files": len(stat.splitlines()),
            "uncommitted": len(lines)}


def old_prepare(repo: Path, wt: Path) -> None:
    """A retry's preparation before: the repository's HEAD, its common dir for the excludes, the
    worktree's ``.git`` (any kind) taken as it is."""
    plain(repo, "rev-parse", "--show-toplevel")
    plain(repo, "rev-parse", "--verify", "-q", "HEAD")
    plain(repo, "rev-parse", "--git-common-dir")
    assert (wt / ".git").exists()


def old_spawn(repo: Path, task_id: str) -> None:
    """A first spawn's git work before: the target found by git, the worktree and its branch
    made, the excludes found by git."""
    plain(repo, "rev-parse", "--show-toplevel")
    plain(repo, "rev-parse", "--show-toplevel")
    plain(repo, "rev-parse", "--verify", "-q", "HEAD")
    plain(repo, "rev-parse", "--git-common-dir")
    plain(repo, "rev-parse", "--verify", "-q", f"refs/heads/ab/{task_id}")
    plain(repo, "worktree", "prune")
    wt = repo / ".worktrees" / task_id
    plain(repo, "worktree", "add", "-b", f"ab/{task_id}", str(wt))
    plain(wt, "rev-parse", "--is-inside-work-tree")
    plain(wt, "rev-parse", "--git-path", "info/exclude")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 2)


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=60)
    ap.add_argument("--only", default="status,facts,get_task,prepare,spawn",
                    help="the cases to measure, comma-separated (each old and new)")
    args = ap.parse_args()
    load_start = load_average()

    import httpx

    import agentboard
    from agentboard import gitsafe
    from agentboard.api import create_app
    from agentboard.api.serve import BackgroundServer
    from agentboard.dispatch import branches, workspaces
    from agentboard.kernel import tokens
    from agentboard.protocol import boarddir

    with tempfile.TemporaryDirectory(prefix="ab-bench-git-") as tmp:
        root = Path(tmp)
        repo = make_repo(root, args.files)
        home = root / "home"
        ab = agentboard.connect(str(home))
        ab.settings.home = home
        ab.create_board("bench", workdir=str(repo))
        board = ab.board("bench")
        task = board.create("Edit", workspace="worktree")
        plan = workspaces.plan(home, {"default_workdir": str(repo)}, task)
        ws = workspaces.prepare(plan)
        wt, branch = ws.path, ws.branch or ""
        (wt / "pkg000" / "mod00000.py").write_text("VALUE_0 = 'changed'\n")
        plain(wt, "commit", "-qam", "work")
        (wt / "pkg000" / "mod00001.py").write_text("VALUE_1 = 'uncommitted'\n")
        (wt / "NEW.md").write_text("untracked\n")
        # the task as the dispatcher records it after the spawn
        ab.db.write(lambda tx: tx.execute(
            "UPDATE tasks SET workspace_kind = 'worktree', workspace_path = :p, branch_name = :b, base_branch = 'main' "
            "WHERE id = :id", {"p": str(wt), "b": branch, "id": task["id"]}))
        row = board.show(task["id"])
        new = branches.facts(row).as_dict()
        old = old_facts(repo, wt, branch, "main")
        assert {k: new[k] for k in old} == old, (new, old)

        use_old = {"on": False}
        real_facts = branches.facts

        def switchable(t: dict[str, Any], default_base: str | None = None) -> Any:
            if not use_old["on"]:
                return real_facts(t, default_base)
            f = old_facts(repo, wt, branch, "main")
            return branches.Facts(branch=branch, base="main", ahead=f["ahead"], behind=f["behind"], files=f["files"],
                                  exists=f["exists"], uncommitted=f["uncommitted"])

        branches.facts = switchable  # type: ignore[assignment]
        admin = tokens.create(ab.db, "bench", role="admin")["token"]
        server = BackgroundServer(create_app(ab.settings, ab.db)).start()
        times: dict[str, list[float]] = {k: [] for k in (
            "status_old", "status_new", "facts_old", "facts_new", "get_task_old", "get_task_new",
            "prepare_old", "prepare_new", "spawn_old", "spawn_new")}
        made = iter(range(10**6))

        def new_spawn() -> None:
            t = {"id": f"t_n{next(made):07d}", "board": "bench", "workspace_kind": "scratch"}
            w = workspaces.prepare(workspaces.plan(home, {"default_workdir": str(repo)}, t))
            boarddir.git_exclude(w.path)
        try:
            with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {admin}"}, timeout=60) as http:
                def get(old_way: bool) -> None:
                    use_old["on"] = old_way
                    r = http.get(f"/api/tasks/{task['id']}")
                    assert r.status_code == 200 and r.json()["git"]["uncommitted"] == 2, r.text

                cases: dict[str, Callable[[], Any]] = {
                    "status_old": lambda: plain(wt, "status", "--porcelain", "--untracked-files=all"),
                    "status_new": lambda: gitsafe.worktree_status(repo, wt, branch),
                    "facts_old": lambda: old_facts(repo, wt, branch, "main"),
                    "facts_new": lambda: real_facts(row),
                    "get_task_old": lambda: get(True),
                    "get_task_new": lambda: get(False),
                    "prepare_old": lambda: old_prepare(repo, wt),
                    "prepare_new": lambda: workspaces.prepare(plan),
                    "spawn_old": lambda: old_spawn(repo, f"t_o{next(made):07d}"),
                    "spawn_new": new_spawn,
                }
                for fn in cases.values():  # warm both ways once
                    fn()
                chosen = [c.strip() for c in args.only.split(",") if c.strip()]
                cases = {k: v for k, v in cases.items() if k.rsplit("_", 1)[0] in chosen}
                times = {k: v for k, v in times.items() if k in cases}
                order = list(cases)
                for r in range(args.repeats):
                    turn = order[r % len(order):] + order[:r % len(order)]
                    for name in turn:
                        times[name].append(timed(cases[name]))
        finally:
            server.stop()
            branches.facts = real_facts  # type: ignore[assignment]
            ab.close()
    p50 = {k: pct(v, 0.5) for k, v in times.items()}
    p99 = {k: pct(v, 0.99) for k, v in times.items()}
    ratios = {k: round(statistics.median(times[f"{k}_new"]) / statistics.median(times[f"{k}_old"]), 2)
              for k in ("status", "facts", "get_task", "prepare", "spawn") if f"{k}_new" in times}
    meets = all(ratios[k] <= 1.1 for k in ("get_task", "prepare", "spawn") if k in ratios)
    out = {"bench": "git_safety", "files": args.files, "repeats": args.repeats, "p50_ms": p50, "p99_ms": p99,
           "ratios": ratios, "target": {"get_task": 1.1, "prepare": 1.1, "spawn": 1.1}, "meets_target": meets,
           "load_start": load_start, "load_end": load_average()}
    print(json.dumps(out))
    for k in ratios:
        print(f"{k:<9} old p50 {p50[k + '_old']:>7} ms p99 {p99[k + '_old']:>7} ms | protected p50 {p50[k + '_new']:>7} ms "
              f"p99 {p99[k + '_new']:>7} ms | ratio {ratios[k]}", file=sys.stderr)
    print(f"{'OK' if meets else 'MISSES TARGET'} (GET /api/tasks/{{id}}, a retry's preparation and a spawn's git work, goal <= 1.1); "
          f"load average {load_start} at the start, {out['load_end']} at the end", file=sys.stderr)


if __name__ == "__main__":
    main()
