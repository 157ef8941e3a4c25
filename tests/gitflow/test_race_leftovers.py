"""A race's attempts whose agents leave their work uncommitted: `attempts` counts that work in
each attempt's diff stat (as `agentboard diff` does), and the pick commits what the winner's
worktree holds on its branch before it integrates it, as an approval does — or, refused, says to
pick again, not to approve."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .conftest import cli, git, make_repo, sh, wait_for

#: writes its line in notes.txt, commits nothing, reports
LEAVES = "printf '{who}\\n' > notes.txt && agentboard complete --summary 'wrote the {who} line'"


def _race(ab: Any, tmp_path: Path, dispatcher: Any, integrate: str = "merge") -> tuple[Any, Path, str]:
    repo = make_repo(tmp_path / "repo", {"notes.txt": "start\n"})
    ab.create_board("race", workdir=str(repo), settings={"integrate": integrate})
    for who in ("one", "two"):
        ab.add_profile(who, command=sh(LEAVES.format(who=who)))
    out = cli(ab.home, "create", "Write the notes", "--board", "race", "--race", "one,two", "--json")
    assert out.returncode == 0, out.stderr
    tid = str(json.loads(out.stdout)["id"])
    dispatcher()
    wait_for(lambda: ab.board("race").show(tid)["status"] == "review", what="the race to reach review", timeout=60)
    return ab.board("race"), repo, tid


def _attempts(ab: Any, tid: str) -> dict[int, dict[str, Any]]:
    out = cli(ab.home, "attempts", tid, "--json")
    assert out.returncode == 0, out.stderr
    return {a["n"]: a for a in json.loads(out.stdout)["attempts"]}


def test_attempts_show_the_work_their_agents_left_uncommitted_in_their_diff_stat(ab, tmp_path, dispatcher):
    board, repo, tid = _race(ab, tmp_path, dispatcher)
    by_n = _attempts(ab, tid)
    for n, who in ((1, "one"), (2, "two")):
        assert (by_n[n]["outcome"], by_n[n]["git"]["files"], by_n[n]["git"]["insertions"]) == ("done", 1, 1), by_n[n]
        assert git(repo, "show", f"{by_n[n]['branch']}:notes.txt") == f"{who}\n"  # on its branch
    # more work lands in attempt 2's worktree, not committed: its diff stat counts it, as its diff does
    wt = Path(board.show(by_n[2]["attempt_task_id"])["workspace_path"])
    (wt / "extra.txt").write_text("a\nb\n")
    two = _attempts(ab, tid)[2]["git"]
    assert (two["files"], two["insertions"], two["uncommitted"]) == (2, 3, 1), two
    diff = json.loads(cli(ab.home, "diff", by_n[2]["attempt_task_id"], "--json").stdout)
    assert (diff["total_files"], diff["additions"]) == (two["files"], two["insertions"])
    table = cli(ab.home, "attempts", tid).stdout
    assert "2 file(s) +3 -1" in table and "1 file(s) +1 -1" in table, table


def test_the_pick_commits_what_the_winners_worktree_holds_and_merges_it(ab, tmp_path, dispatcher):
    board, repo, tid = _race(ab, tmp_path, dispatcher)
    one = _attempts(ab, tid)[1]
    wt = Path(board.show(one["attempt_task_id"])["workspace_path"])
    (wt / "extra.txt").write_text("left in the worktree\n")

    out = cli(ab.home, "pick", tid, "1")

    assert out.returncode == 0, out.stderr
    assert "picked attempt 1 -> done (merged)" in out.stdout
    assert (repo / "notes.txt").read_text() == "one\n" and (repo / "extra.txt").read_text() == "left in the worktree\n"
    assert "as the race's pick saw it" in git(repo, "log", "-1", "--format=%B", one["branch"])


def test_a_pick_refused_for_a_file_too_big_to_commit_says_to_pick_again(ab, tmp_path, dispatcher):
    board, repo, tid = _race(ab, tmp_path, dispatcher)
    one = _attempts(ab, tid)[1]
    wt = Path(board.show(one["attempt_task_id"])["workspace_path"])
    with open(wt / "big.bin", "wb") as fh:  # sparse: above the 50 MiB agentboard commits for a worker
        fh.truncate(60 << 20)
    before = git(repo, "rev-parse", "main").strip()

    out = cli(ab.home, "pick", tid, "1")

    assert out.returncode == 4, (out.stdout, out.stderr)
    assert "big.bin (60 MiB)" in out.stderr and f"then pick it again (`agentboard pick {tid} 1`)" in out.stderr
    assert "review" not in out.stderr.split("big.bin", 1)[1], out.stderr
    assert git(repo, "rev-parse", "main").strip() == before and board.show(tid)["status"] == "review"
    assert "big.bin" not in git(repo, "ls-tree", "-r", "--name-only", one["branch"])
    # once it is out of the way, picking again merges the attempt
    os.remove(wt / "big.bin")
    again = cli(ab.home, "pick", tid, "1")
    assert again.returncode == 0 and "done (merged)" in again.stdout, again.stderr


def test_a_first_pass_winner_refused_blocks_the_race_saying_to_unblock_it_which_picks_it_again(
        ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo", {"notes.txt": "start\n"})
    ab.create_board("race", workdir=str(repo), settings={"integrate": "merge"})
    # leaves a sparse file above the 50 MiB agentboard commits for a worker
    ab.add_profile("big", command=sh("truncate -s 60M big.bin && " + LEAVES.format(who="big")))
    ab.add_profile("slow", command=sh("sleep 120"))
    out = cli(ab.home, "create", "Write the notes", "--board", "race", "--race", "big,slow", "--race-until",
              "first-pass", "--json")
    assert out.returncode == 0, out.stderr
    tid = str(json.loads(out.stdout)["id"])
    board = ab.board("race")
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "blocked", what="the winner's pick to be refused", timeout=60)
    reason = board.show(tid)["block_reason"]  # one line: what to do, then why
    assert f"fix this, then `agentboard unblock {tid}` picks it again: big.bin (60 MiB)" in reason, reason
    [refused] = [e["payload"]["reason"] for e in board.events(0, limit=1000, task_id=tid)
                 if e["kind"] == "integration_refused"]
    assert refused.endswith(f"then unblock the race (`agentboard unblock {tid}`), which picks its winner again")
    assert "agentboard review" not in refused, refused

    one = _attempts(ab, tid)[1]
    os.remove(Path(board.show(one["attempt_task_id"])["workspace_path"]) / "big.bin")
    assert cli(ab.home, "unblock", tid).returncode == 0
    wait_for(lambda: board.show(tid)["integration"] == "merged", what="the winner picked again", timeout=60)
    assert (repo / "notes.txt").read_text() == "big\n"
