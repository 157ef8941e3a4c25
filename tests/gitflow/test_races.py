"""Races: several script agents attempt one task, each on its own branch from the same base; the
verified winner's branch is the one integrated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import cli, events, git, make_repo, sh, wait_for

# writes a passing change on its branch, commits, reports
GOOD = ("printf 'good\\n' > notes.txt && git commit -qam 'good change' && "
        "agentboard complete --summary 'wrote the good line'")
# writes a change the checks refuse
BAD = ("printf 'bad\\n' > notes.txt && git commit -qam 'bad change' && "
       "agentboard complete --summary 'wrote the bad line'")
CHECK = "grep -q good notes.txt"


def race_board(ab: Any, tmp_path: Path, integrate: str = "merge", **settings: Any) -> tuple[Any, Path]:
    repo = make_repo(tmp_path / "repo", {"notes.txt": "start\n"})
    ab.create_board("race", workdir=str(repo), settings={"integrate": integrate, **settings})
    ab.add_profile("good", command=sh(GOOD))
    ab.add_profile("bad", command=sh(BAD))
    return ab.board("race"), repo


def create_race(ab: Any, *args: str) -> str:
    out = cli(ab.home, "create", "Fix the notes", "--board", "race", "--verify", CHECK, "--max-retries", "1",
              "--json", *args)
    assert out.returncode == 0, out.stderr
    return str(json.loads(out.stdout)["id"])


def attempts(ab: Any, task_id: str) -> dict[str, Any]:
    out = cli(ab.home, "attempts", task_id, "--json")
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_a_race_until_all_goes_to_review_and_the_pick_integrates_exactly_the_winner(ab, tmp_path, dispatcher):
    board, repo = race_board(ab, tmp_path)
    tid = create_race(ab, "--race", "bad,good")
    before = git(repo, "rev-parse", "main").strip()
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "review", what="the race to reach review", timeout=60)
    race = attempts(ab, tid)
    by_n = {a["n"]: a for a in race["attempts"]}
    assert (by_n[1]["profile"], by_n[1]["outcome"], by_n[1]["verification"]) == ("bad", "failed", "failed")
    assert (by_n[2]["profile"], by_n[2]["outcome"], by_n[2]["verification"]) == ("good", "done", "passed")
    assert by_n[1]["branch"] == f"ab/{tid}-a1" and by_n[2]["branch"] == f"ab/{tid}-a2"
    assert race["can_pick"] == [2] and race["badge"] == "race 1/2 passed"
    assert by_n[2]["git"]["files"] == 1
    # both attempts started from the same base, and nothing was integrated before the pick
    assert git(repo, "merge-base", by_n[1]["branch"], by_n[2]["branch"]).strip() == before
    assert git(repo, "rev-parse", "main").strip() == before
    refused = cli(ab.home, "pick", tid, "1")
    assert refused.returncode != 0 and "has not passed" in refused.stderr
    out = cli(ab.home, "pick", tid, "2")
    assert out.returncode == 0, out.stderr
    assert "picked attempt 2 -> done (merged)" in out.stdout
    assert (repo / "notes.txt").read_text() == "good\n"
    assert git(repo, "log", "-1", "--format=%P", "main").split()[1] == git(repo, "rev-parse", by_n[2]["branch"]).strip()
    # the loser's branch is kept, named
    assert git(repo, "rev-parse", "--verify", by_n[1]["branch"]).strip()
    t = board.show(tid)
    assert (t["status"], t["branch_name"], t["integration"]) == ("done", by_n[2]["branch"], "merged")
    assert [e["payload"]["n"] for e in events(board, tid, "race_won")] == [2]
    shown = cli(ab.home, "show", tid).stdout
    assert "race 1/2 passed (until all): 1 bad failed, 2 good done *picked*" in shown
    listed = cli(ab.home, "attempts", tid).stdout
    assert "race 1/2 passed" in listed and "wrote the good line" in listed


def test_first_pass_picks_the_first_passing_attempt_and_stops_the_others(ab, tmp_path, dispatcher):
    board, repo = race_board(ab, tmp_path)
    ab.add_profile("slow", command=sh("sleep 120"))
    tid = create_race(ab, "--race", "slow,good", "--race-until", "first-pass")
    dispatcher()
    wait_for(lambda: board.show(tid)["integration"] == "merged", what="the first passing attempt to win",
             timeout=60)
    race = attempts(ab, tid)
    by_n = {a["n"]: a for a in race["attempts"]}
    assert by_n[2]["picked"] and not by_n[1]["picked"]
    assert (by_n[1]["state"], by_n[1]["outcome"], by_n[1]["runs"]) == ("stopped", "stopped", 1)
    assert by_n[1]["task_status"] == "archived"
    assert (repo / "notes.txt").read_text() == "good\n"
    assert board.show(tid)["integration"] == "merged"
    stopped = events(board, tid, "attempt_stopped")
    assert [e["payload"]["n"] for e in stopped] == [1] and "attempt 2 won" in stopped[0]["payload"]["why"]
    # the slow attempt's worker is stopped, and its run is closed with what it spent
    slow = board.runs(by_n[1]["attempt_task_id"])
    assert slow[-1]["status"] == "closed"
    wait_for(lambda: board.runs(by_n[1]["attempt_task_id"])[-1].get("exit_code") is not None
             or board.runs(by_n[1]["attempt_task_id"])[-1].get("ended_at") is not None,
             what="the stopped attempt's run to end")


def test_a_child_of_a_race_starts_from_the_winners_branch(ab, tmp_path, dispatcher):
    board, repo = race_board(ab, tmp_path, integrate="none")
    child_script = ("if grep -q good notes.txt; then echo doc > DOC.md && git add DOC.md && git commit -qm doc && "
                    "agentboard complete --summary 'saw the winner'; else agentboard block 'no winner here'; fi")
    ab.add_profile("child", command=sh(child_script))
    tid = create_race(ab, "--race", "good,bad")
    child = board.create("Document the notes", assignee="child", parents=[tid])
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "review", what="the race to reach review", timeout=60)
    assert board.show(child["id"])["status"] == "todo"
    out = cli(ab.home, "pick", tid, "1")
    assert out.returncode == 0, out.stderr
    wait_for(lambda: board.show(child["id"])["status"] == "done", what="the child to finish", timeout=60)
    c = board.show(child["id"])
    assert c["base_branch"] == f"ab/{tid}-a1"
    assert git(repo, "show", f"{c['branch_name']}:notes.txt") == "good\n"
    assert (repo / "notes.txt").read_text() == "start\n"  # integrate none: nothing on main


def test_an_attempt_that_crashes_retries_alone_within_its_own_budget(ab, tmp_path, dispatcher):
    board, repo = race_board(ab, tmp_path)
    marker = tmp_path / "crashed-once"
    ab.add_profile("flaky", command=sh(f"if [ -f {marker} ]; then {GOOD}; else touch {marker}; exit 7; fi"))
    out = cli(ab.home, "create", "Fix the notes", "--board", "race", "--verify", CHECK, "--max-retries", "3",
              "--json", "--race", "flaky,good")
    assert out.returncode == 0, out.stderr
    tid = json.loads(out.stdout)["id"]
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "review", what="the race to reach review", timeout=90)
    by_n = {a["n"]: a for a in attempts(ab, tid)["attempts"]}
    assert (by_n[1]["outcome"], by_n[1]["runs"]) == ("done", 2)
    assert (by_n[2]["outcome"], by_n[2]["runs"]) == ("done", 1)
    flaky_runs = board.runs(by_n[1]["attempt_task_id"])
    assert [r["outcome"] for r in flaky_runs] == ["crashed", "completed"]
    assert {r.get("race_attempt") for r in flaky_runs} == {1}


def test_every_attempt_failing_blocks_the_race_with_each_failure_and_integrates_nothing(ab, tmp_path, dispatcher):
    board, repo = race_board(ab, tmp_path)
    before = git(repo, "rev-parse", "main").strip()
    tid = create_race(ab, "--race", "bad,bad:other-model")
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "blocked", what="the race to be blocked", timeout=60)
    t = board.show(tid)
    assert t["block_kind"] == "gave_up"
    assert "every attempt failed" in t["block_reason"]
    assert "attempt 1 (bad): failed" in t["block_reason"] and "attempt 2 (bad): failed" in t["block_reason"]
    assert git(repo, "rev-parse", "main").strip() == before
    by_n = {a["n"]: a for a in attempts(ab, tid)["attempts"]}
    assert by_n[2]["model"] == "other-model"
    assert events(board, tid, "race_failed")
    refused = cli(ab.home, "pick", tid, "1")
    assert refused.returncode != 0
    # unblocked, the race runs its failed attempts again, each from its own branch
    out = cli(ab.home, "unblock", tid)
    assert out.returncode == 0, out.stderr
    wait_for(lambda: events(board, tid, "race_started")[-1]["payload"].get("again") == [1, 2],
             what="the race to start again")
    wait_for(lambda: board.show(tid)["status"] == "blocked", what="the race to fail again", timeout=60)
    assert {a["runs"] for a in attempts(ab, tid)["attempts"]} == {2}


def test_archiving_a_running_race_stops_every_attempt(ab, tmp_path, dispatcher):
    board, repo = race_board(ab, tmp_path)
    ab.add_profile("slow", command=sh("sleep 120"))
    tid = create_race(ab, "--race", "slow,slow")
    dispatcher()
    wait_for(lambda: all(a["state"] == "running" and a["task_status"] == "running"
                         for a in attempts(ab, tid)["attempts"]), what="both attempts to run", timeout=60)
    out = cli(ab.home, "archive", tid)
    assert out.returncode == 0, out.stderr
    wait_for(lambda: all(a["state"] == "cancelled" for a in attempts(ab, tid)["attempts"]),
             what="the attempts to be cancelled", timeout=60)
    for a in attempts(ab, tid)["attempts"]:
        assert a["task_status"] == "archived"
        assert board.runs(a["attempt_task_id"])[-1]["status"] == "closed"


def test_a_budget_too_small_for_every_attempt_refuses_the_race_naming_the_limit(ab, tmp_path):
    board, repo = race_board(ab, tmp_path)
    out = cli(ab.home, "budget", "set", "--board", "race", "--max-runs", "2")
    assert out.returncode == 0, out.stderr
    refused = cli(ab.home, "create", "Fix the notes", "--board", "race", "--race", "good,good,bad")
    assert refused.returncode != 0
    assert "attempt 3 of 3 (bad) cannot start" in refused.stderr and "max-runs" in refused.stderr
    assert board.list() == []
    ok = cli(ab.home, "create", "Fix the notes", "--board", "race", "--race", "good,bad")
    assert ok.returncode == 0, ok.stderr


def test_a_race_given_another_assignee_is_refused_not_reassigned_silently(ab, tmp_path):
    board, _repo = race_board(ab, tmp_path)
    refused = cli(ab.home, "create", "Fix the notes", "--board", "race", "--race", "good,bad", "--assignee", "bad")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "error: a race runs the profiles it names: leave out assignee 'bad' (the race's task is assigned to its "
        "first entry, 'good')"]
    assert board.list() == []
    same = cli(ab.home, "create", "Fix the notes", "--board", "race", "--race", "good,bad", "--assignee", "good")
    assert same.returncode == 0, same.stderr


def test_rest_creates_a_race_shows_its_attempts_and_picks_through_the_same_function(ab, tmp_path, dispatcher):
    import httpx

    from agentboard.api import create_app
    from agentboard.api.serve import BackgroundServer
    from agentboard.kernel import tokens

    board, repo = race_board(ab, tmp_path, integrate="squash")
    admin = tokens.create(ab.db, "admin", role="admin")["token"]
    server = BackgroundServer(create_app(ab.settings, ab.db)).start()
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {admin}"}, timeout=30) as http:
            bad = http.post("/api/tasks", params={"board": "race"},
                            json={"title": "Fix the notes", "race": ["good,nobody"]})
            assert bad.status_code == 400 and "no profile named 'nobody'" in bad.json()["error"]["message"]
            made = http.post("/api/tasks", params={"board": "race"},
                             json={"title": "Fix the notes", "race": ["good", "bad:m2"], "verify": [CHECK],
                                   "max_retries": 1})
            assert made.status_code == 201, made.text
            tid = made.json()["id"]
            assert [(a["profile"], a["model"]) for a in made.json()["attempts"]] == [("good", None), ("bad", "m2")]
            dispatcher()
            wait_for(lambda: board.show(tid)["status"] == "review", what="the race to reach review", timeout=60)
            race = http.get(f"/api/tasks/{tid}/attempts").json()
            assert race["badge"] == "race 1/2 passed" and race["can_pick"] == [1]
            assert [a["verification"] for a in race["attempts"]] == ["passed", "failed"]
            detail = http.get(f"/api/tasks/{tid}").json()
            assert detail["race"]["badge"] == "race 1/2 passed"
            approve = http.post(f"/api/tasks/{tid}/review", json={"verdict": "approved"})
            assert approve.status_code == 409 and "pick" in approve.json()["error"]["message"]
            wrong = http.post(f"/api/tasks/{tid}/pick", json={"n": 2})
            assert wrong.status_code == 409
            picked = http.post(f"/api/tasks/{tid}/pick", json={"n": 1})
            assert picked.status_code == 200, picked.text
            assert (picked.json()["status"], picked.json()["integration"], picked.json()["picked"]) == \
                ("done", "squashed", 1)
            assert (repo / "notes.txt").read_text() == "good\n"
            # the board shows the race as one card: its attempts are not cards of their own
            assert [t["id"] for t in board.list()] == [tid]
    finally:
        server.stop()


@pytest.mark.parametrize("answers", ["file", "cli"])
def test_the_reviewer_agent_reads_every_attempts_diff_and_picks_the_winner(ab, tmp_path, dispatcher, answers):
    board, repo = race_board(ab, tmp_path, reviewer="profile:judge")
    find = "n=$(awk '/^### Attempt /{n=$3} /^[+]good/{print n; exit}' .board/review-context.md) && "
    judge = find + (
        "printf '{\"verdict\": \"approved\", \"score\": 90, \"summary\": \"attempt %s writes good\", "
        "\"pick\": %s}' \"$n\" \"$n\" > .board/review-verdict.json" if answers == "file" else
        "agentboard review \"$AGENTBOARD_TASK\" --approve --score 90 --note \"attempt $n writes good\" --pick \"$n\"")
    ab.add_profile("judge", command=sh(judge))
    tid = create_race(ab, "--race", "bad,good")
    dispatcher()
    # done, then the integration's record (finish.pick records it right after the transition)
    wait_for(lambda: board.show(tid)["integration"] == "merged", what="the reviewer to pick the winner", timeout=90)
    t = board.show(tid)
    assert (t["branch_name"], t["integration"]) == (f"ab/{tid}-a2", "merged")
    assert (repo / "notes.txt").read_text() == "good\n"
    won = events(board, tid, "race_won")
    assert [(e["payload"]["n"], e["actor"]) for e in won] == [(2, "judge")]


def test_a_race_whose_budget_shrank_before_it_started_is_blocked_naming_the_limit(ab, tmp_path, dispatcher):
    board, repo = race_board(ab, tmp_path)
    parent = board.create("Decide what to fix", assignee="alice")  # a person: never dispatched
    tid = create_race(ab, "--race", "good,bad", "--parent", parent["id"])
    assert board.show(tid)["status"] == "todo"
    out = cli(ab.home, "budget", "set", "--profile", "bad", "--max-runs", "0")
    assert out.returncode == 0, out.stderr
    dispatcher()
    board.complete(parent["id"], summary="decided")
    wait_for(lambda: board.show(tid)["status"] == "blocked", what="the race to be refused", timeout=60)
    t = board.show(tid)
    assert "attempt 2 of 2 (bad) cannot start" in t["block_reason"] and "max-runs" in t["block_reason"]
    # no attempt started: not one task was made for them, not one run
    assert all(a["state"] == "pending" and a["attempt_task_id"] is None for a in attempts(ab, tid)["attempts"])
    assert events(board, tid, "race_refused")


def gc(ab: Any, *args: str) -> dict[str, Any]:
    out = cli(ab.home, "gc", "--board", "race", "--json", *args)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def branches(repo: Path) -> set[str]:
    return set(git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split())


def test_gc_removes_a_finished_races_losing_worktree_and_branch_and_nothing_of_an_unfinished_race(
        ab, tmp_path, dispatcher):
    board, repo = race_board(ab, tmp_path)
    tid = create_race(ab, "--race", "bad,good")
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "review", what="the race to reach review", timeout=60)
    by_n = {a["n"]: a for a in attempts(ab, tid)["attempts"]}
    loser, winner = by_n[1], by_n[2]
    loser_wt = repo / ".worktrees" / loser["attempt_task_id"]
    winner_wt = repo / ".worktrees" / winner["attempt_task_id"]
    assert loser_wt.is_dir() and winner_wt.is_dir()
    # a race in review is not finished: gc keeps every attempt's worktree and branch
    rep = gc(ab)
    assert rep["branches_removed"] == [] and rep["worktrees_removed"] == []
    assert loser_wt.is_dir() and {loser["branch"], winner["branch"]} <= branches(repo)

    out = cli(ab.home, "pick", tid, "2")
    assert out.returncode == 0, out.stderr
    # a loser with uncommitted work is kept, its branch with it, and gc says why
    (loser_wt / "scratch.txt").write_text("not committed\n")
    rep = gc(ab)
    assert rep["branches_removed"] == [] and str(loser_wt) not in rep["worktrees_removed"]
    [kept] = [k for k in rep["kept"] if k["path"] == str(loser_wt)]
    assert "1 uncommitted change(s)" in kept["why"] and loser["branch"] in kept["why"]
    assert loser["branch"] in branches(repo)
    (loser_wt / "scratch.txt").unlink()

    # --dry-run reports the same lists and touches nothing
    shown = cli(ab.home, "gc", "--board", "race", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert f"would remove {loser_wt}" in shown.stdout
    assert f"would remove branch {loser['branch']} in {repo} (attempt 1 of race {tid}, not picked)" in shown.stdout
    dry = gc(ab, "--dry-run")
    assert loser_wt.is_dir() and loser["branch"] in branches(repo)

    rep = gc(ab)
    expected = [{"repo": str(repo), "branch": loser["branch"], "race": tid, "n": 1}]
    assert rep["branches_removed"] == dry["branches_removed"] == expected
    assert rep["worktrees_removed"] == dry["worktrees_removed"] == [str(loser_wt)]
    assert not loser_wt.exists() and loser["branch"] not in branches(repo)
    # the picked attempt's branch stays, and what it wrote is on the base branch
    assert winner["branch"] in branches(repo) and winner_wt.is_dir()
    assert git(repo, "show", "main:notes.txt") == "good\n"
    assert git(repo, "merge-base", "--is-ancestor", winner["branch"], "main") == ""
    # nothing is left for a second gc
    again = gc(ab)
    assert again["branches_removed"] == [] and again["worktrees_removed"] == []
    assert not [k for k in again["kept"] if k.get("branch") == loser["branch"]]


def test_an_attempt_keeps_its_profile_so_the_race_credits_each_profile_with_its_own_work(ab, tmp_path, dispatcher):
    board, _repo = race_board(ab, tmp_path)
    ab.add_profile("slow", command=sh("sleep 60"))
    tid = create_race(ab, "--race", "slow,good")
    dispatcher()

    def first() -> str | None:
        a = {x["n"]: x for x in attempts(ab, tid)["attempts"]}.get(1) or {}
        return a.get("attempt_task_id") if a.get("task_status") == "running" else None

    attempt = wait_for(first, what="the first attempt running", timeout=60)
    out = cli(ab.home, "assign", attempt, "good", "--reclaim")
    assert out.returncode == 4 and f"is slow's attempt in race {tid}" in out.stderr, out.stderr
    shown = board.show(attempt)
    assert (shown["assignee"], shown["status"]) == ("slow", "running")
