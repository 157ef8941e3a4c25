"""Preparing a task's git worktree on a repository of 10,000 files, against `git worktree add`.

Three cases, each the way the dispatcher prepares a worktree (``dispatch.workspaces.prepare``
with the base found by ``dispatch.branches.resolve``), interleaved with the baseline:

- ``fresh``: a root task, its branch started from the board's base branch;
- ``chained``: a task with one parent, its branch started from the parent's branch;
- ``integration``: a task with three parents, its branch started from an integration branch
  that merges their branches (``git merge-tree`` + ``git commit-tree``, no checkout);
- ``baseline``: ``git worktree add -b <branch> <path> main`` alone.

Reports the median milliseconds of each over ``--repeats`` and the ratios to the baseline
(targets: fresh ≤ 1.5×, chained ≤ 1.5×, integration of 3 parents ≤ 3×).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import load_average  # noqa: E402

from agentboard.dispatch import branches, workspaces  # noqa: E402


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
    git(repo, "commit", "-qm", "10k files")
    return repo


def parent_branch(repo: Path, name: str, n: int) -> str:
    """A branch with one commit of its own touching a file no other parent touches."""
    git(repo, "branch", name, "main")
    tree = Path(tempfile.mkdtemp(dir=repo / ".worktrees"))
    git(repo, "worktree", "add", "-q", str(tree), name)
    (tree / f"pkg000/parent_{n}.py").write_text(f"PARENT = {n}\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", f"parent {n}")
    git(repo, "worktree", "remove", "--force", str(tree))
    return name


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    load_start = load_average()
    with tempfile.TemporaryDirectory(prefix="ab-bench-worktree-") as tmp:
        repo = make_repo(Path(tmp), args.files)
        (repo / ".worktrees").mkdir()
        times: dict[str, list[float]] = {"baseline": [], "fresh": [], "chained": [], "integration": []}
        for r in range(args.repeats):
            parents = [parent_branch(repo, f"ab/t_p{r}{k}", k) for k in range(3)]

            def prepare(task_id: str, parent_list: list[tuple[str, str | None]]) -> None:
                ws = workspaces.Workspace("worktree", repo / ".worktrees" / task_id, branch=f"ab/{task_id}", repo=repo)

                def base() -> tuple[str, str]:
                    b = branches.resolve(repo, task_id, {}, parent_list)
                    return b.branch, b.source
                workspaces.prepare(ws, base=base)

            cases = {
                "baseline": lambda r=r: git(repo, "worktree", "add", "-q", "-b", f"plain/{r}",
                                            str(repo / ".worktrees" / f"plain{r}"), "main"),
                "fresh": lambda r=r: prepare(f"t_f{r:07d}", []),
                "chained": lambda r=r, p=parents: prepare(f"t_c{r:07d}", [("t_p", p[0])]),
                "integration": lambda r=r, p=parents: prepare(f"t_i{r:07d}", [(f"t_p{k}", p[k]) for k in range(3)]),
            }
            order = list(cases)
            order = order[r % 4:] + order[:r % 4]  # no case always runs first (cold caches) or last
            for name in order:
                times[name].append(timed(cases[name]))
        checked = len(list((repo / ".worktrees" / "t_i0000000").rglob("*.py")))
        assert checked >= args.files, f"the integration worktree holds {checked} files"
        med = {k: round(statistics.median(v), 1) for k, v in times.items()}
    ratios = {k: round(med[k] / med["baseline"], 2) for k in ("fresh", "chained", "integration")}
    targets = {"fresh": 1.5, "chained": 1.5, "integration": 3.0}
    meets = all(ratios[k] <= targets[k] for k in targets)
    out = {"bench": "worktree", "files": args.files, "repeats": args.repeats, "median_ms": med, "ratios": ratios,
           "targets": targets, "meets_target": meets, "load_start": load_start, "load_end": load_average()}
    print(json.dumps(out))
    print(f"worktree on {args.files} files, median of {args.repeats}: baseline `git worktree add` {med['baseline']} ms; "
          f"fresh {med['fresh']} ms ({ratios['fresh']}x), chained {med['chained']} ms ({ratios['chained']}x), "
          f"integration of 3 parents {med['integration']} ms ({ratios['integration']}x) "
          f"{'OK' if meets else 'MISSES TARGET'}", file=sys.stderr)
    print(f"load average (1/5/15 min): {load_start} at the start, {out['load_end']} at the end", file=sys.stderr)


if __name__ == "__main__":
    main()
