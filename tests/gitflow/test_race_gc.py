"""`gc` and the attempts of races (docs/races.md, "What gc removes"): a race blocked by a person
is not finished, so its stopped attempts' worktrees and branches stay (as they do while it runs
or is in review); and what `gc` keeps is listed once, though a done race and its picked attempt
share one worktree."""

from __future__ import annotations

from .conftest import cli, sh, wait_for
from .test_races import attempts, branches, create_race, gc, race_board


def test_gc_keeps_the_stopped_attempts_of_a_race_a_person_blocked(ab, tmp_path, dispatcher):
    board, repo = race_board(ab, tmp_path)
    ab.add_profile("slow", command=sh("sleep 120"))
    tid = create_race(ab, "--race", "slow,slow")
    dispatcher()
    wait_for(lambda: all(a["state"] == "running" and a["task_status"] == "running"
                         for a in attempts(ab, tid)["attempts"]), what="both attempts to run", timeout=60)
    out = cli(ab.home, "block", tid, "wait, I need to check something")
    assert out.returncode == 0, out.stderr
    wait_for(lambda: all(a["state"] == "stopped" and a["task_status"] == "archived"
                         and board.runs(a["attempt_task_id"])[-1]["status"] == "closed"
                         for a in attempts(ab, tid)["attempts"]), what="the attempts to be stopped", timeout=60)
    assert board.show(tid)["status"] == "blocked"
    worktrees = [repo / ".worktrees" / a["attempt_task_id"] for a in attempts(ab, tid)["attempts"]]
    named = {a["branch"] for a in attempts(ab, tid)["attempts"]}
    assert all(w.is_dir() for w in worktrees) and named <= branches(repo)

    for args in (("--dry-run",), ()):
        rep = gc(ab, *args)
        assert rep["worktrees_removed"] == [] and rep["branches_removed"] == [], args
    assert all(w.is_dir() for w in worktrees) and named <= branches(repo)


def test_gc_lists_a_kept_worktree_once_when_a_done_race_and_its_picked_attempt_share_it(
        ab, tmp_path, dispatcher):
    board, repo = race_board(ab, tmp_path)
    tid = create_race(ab, "--race", "bad,good")
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "review", what="the race to reach review", timeout=60)
    out = cli(ab.home, "pick", tid, "2")
    assert out.returncode == 0, out.stderr
    race = board.show(tid)
    winner = next(a for a in attempts(ab, tid)["attempts"] if a["n"] == 2)
    shared = repo / ".worktrees" / winner["attempt_task_id"]
    assert race["workspace_path"] == str(shared)
    (shared / "scratch.txt").write_text("not committed\n")  # a done task's dirty worktree is kept, saying why

    for args in (("--dry-run",), ()):
        kept = [k for k in gc(ab, *args)["kept"] if k["path"] == str(shared)]
        assert len(kept) == 1 and "1 uncommitted change(s)" in kept[0]["why"], (args, kept)
    assert shared.is_dir()
