"""A worker may leave a file of any size: a sparse file of gigabytes costs it no disk. agentboard
commits on a worker's behalf only files up to ``gitsizes.COMMIT_MAX`` (a larger one stays in the
worktree, and integration is refused naming it and the cap), and no diff view loads a file above
``gitsizes.SHOWN_MAX``: it is listed with its size, as a binary file is, its text left out."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

from .conftest import git, make_repo, sh, wait_for

GIB = 1 << 30


def _run_of(task: dict[str, Any]) -> dict[str, Any]:
    run = next(r for r in task["runs"] if r.get("profile") == "agent")
    meta = run.get("metadata") or {}
    return json.loads(meta) if isinstance(meta, str) else meta


def _diff_and_peak_memory(home: Path, task_id: str) -> tuple[dict[str, Any], int]:
    """``agentboard diff ID --json`` and the peak memory (bytes) of its largest process, git's included."""
    code = ("import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n")
    env = {**os.environ, "AGENTBOARD_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "agentboard", "diff", task_id, "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), int(proc.stderr.strip().splitlines()[-1]) * 1024


def _zeros_blob(repo: Path, size: int) -> str:
    """A blob of ``size`` zero bytes written straight into ``repo``'s objects (git would spend
    seconds hashing it with its collision-detecting SHA-1): what a worker's own commit holds."""
    chunk = bytes(1 << 20)
    sha = hashlib.sha1(b"blob %d\0" % size)
    z = zlib.compressobj(1)
    packed = [z.compress(b"blob %d\0" % size)]
    for _ in range(size // len(chunk)):
        sha.update(chunk)
        packed.append(z.compress(chunk))
    packed.append(z.flush())
    name = sha.hexdigest()
    folder = repo / ".git" / "objects" / name[:2]
    folder.mkdir(exist_ok=True)
    (folder / name[2:]).write_bytes(b"".join(packed))
    return name


def test_a_huge_file_a_worker_leaves_is_not_committed_and_the_refusal_names_it_and_the_cap(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo), settings={"integrate": "merge"})
    ab.add_profile("agent", command=sh("echo fixed > fix.txt && truncate -s 2G big.txt && "
                                       "agentboard complete --summary 'fixed, and a big file'"))
    board = ab.board("flow")
    tid = board.create("fix it", assignee="agent")["id"]
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] in ("blocked", "done"), timeout=60, what="the task's outcome")
    t = board.show(tid)
    assert (t["status"], t["integration"]) == ("blocked", "refused")
    assert "big.txt (2 GiB) in the task's worktree is larger than the 50 MiB agentboard commits" in t["block_reason"]
    # the rest of its work is on the branch, the big file is not; nothing landed on main
    assert git(repo, "show", "--name-only", "--format=", t["branch_name"]).split() == ["fix.txt"]
    assert not (repo / "fix.txt").exists() and not (repo / "big.txt").exists()
    assert os.path.getsize(Path(t["workspace_path"]) / "big.txt") == 2 * GIB  # not dropped: still there

    doc, peak = _diff_and_peak_memory(ab.home, tid)
    assert peak < 300 << 20, f"the diff took {peak >> 20} MiB"
    files = {f["path"]: f for f in doc["files"]}
    assert (files["big.txt"]["binary"], files["big.txt"]["uncommitted"]) == (True, True)
    assert (files["fix.txt"]["additions"], files["fix.txt"]["uncommitted"]) == (1, False)


def test_a_reviewed_tasks_huge_leftover_stays_out_of_its_branch_and_its_approval_is_refused(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo), settings={"integrate": "merge"})
    ab.add_profile("agent", command=sh("echo ok > ok.txt && truncate -s 2G data.bin && "
                                       "agentboard complete --summary 'done'"))
    board = ab.board("flow")
    # with checks, the dispatcher accepts the worker's success after it exits: its leftovers committed then
    tid = board.create("do it", assignee="agent", review=True, verify=["test -f ok.txt"])["id"]
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] in ("review", "blocked"), timeout=60, what="the task in review")
    t = board.show(tid)
    assert t["status"] == "review", t.get("block_reason")
    assert git(repo, "show", "--name-only", "--format=", t["branch_name"]).split() == ["ok.txt"]
    committed = _run_of(t)["committed"]  # the run says what was left out, and why
    assert committed["not_committed"] == [{"path": "data.bin", "size": 2 * GIB}]
    assert "data.bin (2 GiB) is larger than the 50 MiB agentboard commits" in committed["note"]

    out = board.approve(tid)  # approval refuses: the big file is still not on the branch
    assert out["status"] == "blocked" and "data.bin (2 GiB) in the task's worktree" in board.show(tid)["block_reason"]
    assert not (repo / "ok.txt").exists()


def test_a_tracked_file_a_worker_blows_up_in_its_folder_is_listed_by_the_diff_unread(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo))
    ab.add_profile("agent", command=sh("echo ok > ok.txt && truncate -s 400M README.md && "
                                       "agentboard complete --summary 'done'"))
    board = ab.board("flow")
    tid = board.create("do it", assignee="agent", workspace=f"dir:{repo}")["id"]
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] in ("done", "blocked"), timeout=60, what="the task's outcome")

    doc, peak = _diff_and_peak_memory(ab.home, tid)
    assert peak < 300 << 20, f"the diff took {peak >> 20} MiB"
    files = {f["path"]: f for f in doc["files"]}
    assert files["README.md"]["binary"] and files["ok.txt"]["additions"] == 1
    shown = next(f for f in doc["shown"] if f["path"] == "README.md")
    assert "# README.md: 6 bytes before, 400 MiB now, more than the 10 MiB a diff shows" in shown["diff"]


def test_a_huge_file_on_the_branch_is_listed_by_every_diff_view_without_being_loaded(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    git(repo, "checkout", "-qb", "dev")  # main is not checked out: landing it writes no file
    blob = _zeros_blob(repo, 600 << 20)  # above git's own 512 MiB threshold for its diff stats
    ab.create_board("flow", workdir=str(repo), settings={"integrate": "merge", "base": "main"})
    ab.add_profile("agent", command=sh(f"git update-index --add --cacheinfo 100644,{blob},huge.bin && "
                                       "echo hi > small.txt && git add small.txt && git commit -qm huge && "
                                       "agentboard complete --summary 'a huge file'"))
    board = ab.board("flow")
    tid = board.create("grow", assignee="agent", review=True)["id"]
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] in ("review", "blocked"), timeout=60, what="the task in review")
    assert board.show(tid)["status"] == "review", board.show(tid).get("block_reason")
    # its worktree lacks huge.bin (only its index had it): gone, the branch alone is its work
    git(repo, "worktree", "remove", "--force", board.show(tid)["workspace_path"])

    def check() -> None:
        doc, peak = _diff_and_peak_memory(ab.home, tid)
        assert peak < 300 << 20, f"the diff took {peak >> 20} MiB"
        files = {f["path"]: f for f in doc["files"]}
        assert (files["small.txt"]["additions"], files["small.txt"]["binary"]) == (1, False)
        assert (files["huge.bin"]["status"], files["huge.bin"]["binary"]) == ("added", True)
        shown = next(f for f in doc["shown"] if f["path"] == "huge.bin")
        assert "# huge.bin: 600 MiB, more than the 10 MiB a diff shows: its text is not shown" in shown["diff"]

    check()  # the branch in review
    out = board.approve(tid)
    assert (out["status"], board.show(tid)["integration"]) == ("done", "merged")
    check()  # what landed on main
