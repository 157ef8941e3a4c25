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


def race_board(ab: Any, tmp_path: Path, integrate: str = "merge") -> tuple[Any, Path]:
    repo = make_repo(tmp_path / "repo", {"notes.txt": "start\n"})
    ab.create_board("race", workdir=str(repo), settings={"integrate": integrate})
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
