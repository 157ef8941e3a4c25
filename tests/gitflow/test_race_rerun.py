"""Races that run again — unblocked or restored by a person, or sent back from review with
feedback — and attempts whose result never validated, with script agents and a started
dispatcher."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .conftest import cli, events, git, sh, wait_for
from .test_races import attempts, create_race, race_board

#: a change that passes the checks, new at every run (a run again commits something)
GOOD_AGAIN = ("printf 'good %s\\n' \"$(date +%s%N)\" > notes.txt && git commit -qam 'good change' && "
              "agentboard complete --summary 'wrote the good line'")
BAD_AGAIN = ("printf 'bad %s\\n' \"$(date +%s%N)\" > notes.txt && git commit -qam 'bad change' && "
             "agentboard complete --summary 'wrote the bad line'")


def by_n(ab: Any, task_id: str) -> dict[int, dict[str, Any]]:
    return {int(a["n"]): a for a in attempts(ab, task_id)["attempts"]}


def test_a_race_blocked_by_a_person_runs_again_when_unblocked_and_an_archived_one_when_restored(
        ab, tmp_path, dispatcher):
    board, repo = race_board(ab, tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    # the first run of each attempt works for a long time (a person stops it); the next one finishes
    ab.add_profile("steady", command=sh(f"if [ -f {marks}/$AGENTBOARD_TASK ]; then {GOOD_AGAIN}; "
                                        f"else touch {marks}/$AGENTBOARD_TASK; sleep 90; fi"))
    blocked = create_race(ab, "--race", "steady,steady")
    archived = create_race(ab, "--race", "steady,steady")
    dispatcher()

    def running(tid: str) -> bool:
        return all(a["state"] == "running" and a["task_status"] == "running" for a in by_n(ab, tid).values())

    wait_for(lambda: running(blocked) and running(archived), what="every attempt to run", timeout=60)
    assert cli(ab.home, "block", blocked, "wait, I need to check something").returncode == 0
    assert cli(ab.home, "archive", archived).returncode == 0
    wait_for(lambda: {a["state"] for a in by_n(ab, blocked).values()} == {"stopped"}
             and {a["state"] for a in by_n(ab, archived).values()} == {"cancelled"},
             what="the attempts to be stopped", timeout=60)
    out = cli(ab.home, "unblock", blocked)
    assert out.returncode == 0, out.stderr
    out = cli(ab.home, "restore", archived)
    assert out.returncode == 0, out.stderr
    for tid in (blocked, archived):
        wait_for(lambda tid=tid: board.show(tid)["status"] == "review", what="the race to finish", timeout=90)
        assert not events(board, tid, "race_failed")
        assert events(board, tid, "race_started")[-1]["payload"]["again"] == [1, 2]
        for a in by_n(ab, tid).values():
            # stopped, then run again from its own branch: its second run finished and passed
            assert (a["state"], a["outcome"], a["verification"], a["runs"]) == ("finished", "done", "passed", 2)
            assert [r["outcome"] for r in board.runs(a["attempt_task_id"])] == ["stopped", "completed"]
        assert attempts(ab, tid)["can_pick"] == [1, 2]


def test_an_attempt_whose_result_never_validated_is_no_pass_and_the_first_that_passes_wins(ab, tmp_path, dispatcher):
    board, repo = race_board(ab, tmp_path)
    # commits a change, then writes a result.json that never validates (repaired in vain, degraded)
    ab.add_profile("garbled", command=sh(
        "printf 'good\\n' > notes.txt; git commit -qam 'a change'; "
        "echo '{\"success\": \"yes\", \"summary\": \"bad result\"}' > .board/result.json"))
    ab.add_profile("careful", command=sh(f"sleep 15; {GOOD_AGAIN}"))
    tid = create_race(ab, "--race", "garbled,careful", "--race-until", "first-pass")
    dispatcher()
    wait_for(lambda: board.show(tid)["integration"] == "merged", what="the first passing attempt to win",
             timeout=120)
    race = by_n(ab, tid)
    assert [e["payload"]["n"] for e in events(board, tid, "race_won")] == [2]
    assert race[2]["picked"] and not race[1]["picked"]
    # the degraded attempt finished without passing: never verified, never a winner
    assert (race[1]["state"], race[1]["outcome"], race[1]["verification"]) == ("finished", "failed", None)
    assert "never validated" in race[1]["error"]
    assert [e for e in events(board, race[1]["attempt_task_id"]) if e["kind"] == "result_degraded"]
    # and it is not left in review once the race is done
    assert race[1]["task_status"] == "archived"
    assert git(repo, "show", "main:notes.txt").startswith("good ")
    assert git(repo, "rev-parse", race[2]["branch"]).strip() in git(repo, "log", "--format=%H", "main")


def test_changes_requested_on_a_race_run_every_attempt_again_with_the_feedback(ab, tmp_path, dispatcher):
    board, repo = race_board(ab, tmp_path)
    seen = tmp_path / "seen"
    seen.mkdir()
    # each run keeps what its worker was told in its history (.board/history.md)
    keep = f"cat .board/history.md >> {seen}/$AGENTBOARD_TASK; "
    ab.add_profile("good2", command=sh(keep + GOOD_AGAIN))
    ab.add_profile("bad2", command=sh(keep + BAD_AGAIN))
    tid = create_race(ab, "--race", "bad2,good2")
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "review", what="the race to reach review", timeout=60)
    before = by_n(ab, tid)
    assert (before[1]["outcome"], before[2]["outcome"]) == ("failed", "done")
    out = cli(ab.home, "review", tid, "--request-changes", "mention the ticket number in notes.txt")
    assert out.returncode == 0, out.stderr
    wait_for(lambda: len(events(board, tid, "race_finished")) == 2, what="the race to finish again", timeout=90)
    again = events(board, tid, "race_started")[-1]["payload"]
    assert again["again"] == [1, 2] and again["feedback"] == "mention the ticket number in notes.txt"
    after = by_n(ab, tid)
    for n in (1, 2):
        assert after[n]["runs"] > before[n]["runs"]  # every attempt ran again, the passing one too
        told = (seen / after[n]["attempt_task_id"]).read_text()
        assert "mention the ticket number in notes.txt" in told
        assert [e["payload"]["feedback"] for e in events(board, after[n]["attempt_task_id"], "changes_requested")] \
            == ["mention the ticket number in notes.txt"]
    assert (after[1]["outcome"], after[2]["outcome"]) == ("failed", "done")
    assert board.show(tid)["status"] == "review" and attempts(ab, tid)["can_pick"] == [2]
    out = cli(ab.home, "pick", tid, "2", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "done"
    assert Path(repo / "notes.txt").read_text().startswith("good ")
