"""A reviewer agent's approval, from its own review run, integrates the task's branch the way a
person's does: on a board that merges, the branch lands on the base and the task is done; when
the merge is refused, the task is blocked for a person with the reason and the run keeps the
verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol.test_reviewer_agent import kinds

from .conftest import events, git, make_repo, sh, wait_for
from .test_every_road import AGENT, _on_base

APPROVE = ("printf '%s' '{\"verdict\": \"approved\", \"score\": 90, \"summary\": \"looks right\"}' "
           "> .board/review-verdict.json")
#: the base moves on under the task first: the same file, other content, committed on main
CONFLICT = ('unset GIT_DIR GIT_WORK_TREE; '  # a reviewer's git is the task's view; this one edits the target
            'echo "someone else" > "$REPO/$AGENTBOARD_TASK.txt" && git -C "$REPO" add -A && '
            'git -C "$REPO" commit -qm "meanwhile on main" && ' + APPROVE)


def _review_runs(board: Any, task_id: str) -> list[dict[str, Any]]:
    return [r for r in board.show(task_id)["runs"] if r.get("profile") == "critic"]


def test_a_reviewer_profiles_approval_on_a_merge_board_merges_the_branch_and_finishes_the_task(
        ab: Any, tmp_path: Path, dispatcher: Any) -> None:
    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo), settings={"integrate": "merge", "reviewer": "profile:critic"})
    ab.add_profile("agent", command=sh(AGENT))
    ab.add_profile("critic", command=sh(APPROVE))
    board = ab.board("flow")
    tid = board.create("write it", assignee="agent", review=True)["id"]
    dispatcher()
    # the merge is recorded just after the task is done
    wait_for(lambda: board.show(tid)["integration"] or board.show(tid)["status"] == "blocked"
             or "review_unavailable" in kinds(board, tid), timeout=120, what="the review to settle")
    t = board.show(tid)
    assert (t["status"], t["integration"]) == ("done", "merged"), (t["status"], t.get("block_reason"))
    assert _on_base(repo, t["branch_name"]) and (repo / f"{tid}.txt").is_file()
    assert [(r["verdict"], r["reviewer"]) for r in t["reviews"]] == [("approved", "profile:critic")]
    assert [r["outcome"] for r in _review_runs(board, tid)] == ["reviewed"]
    assert len(events(board, tid, "integrated")) == 1
    assert "review_unavailable" not in kinds(board, tid)


def test_a_reviewer_profiles_approval_whose_merge_is_refused_blocks_the_task_for_a_person(
        ab: Any, tmp_path: Path, dispatcher: Any) -> None:
    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo), settings={"integrate": "merge", "reviewer": "profile:critic"})
    ab.add_profile("agent", command=sh(AGENT))
    ab.add_profile("critic", command=sh(CONFLICT), env={"REPO": str(repo)})
    board = ab.board("flow")
    tid = board.create("write it", assignee="agent", review=True)["id"]
    dispatcher()
    # the refusal blocks the task, then the review run is closed with its verdict
    wait_for(lambda: board.show(tid)["status"] == "done"
             or (board.show(tid)["status"] == "blocked" and all(r["outcome"] for r in _review_runs(board, tid)))
             or "review_unavailable" in kinds(board, tid), timeout=120, what="the review to settle")
    t = board.show(tid)
    assert (t["status"], t["block_kind"]) == ("blocked", "needs_input"), t["status"]
    assert "approval could not merge the branch" in t["block_reason"]
    assert not _on_base(repo, t["branch_name"])
    assert (repo / f"{tid}.txt").read_text() == "someone else\n"  # the target is left as it was
    runs = _review_runs(board, tid)
    assert [r["outcome"] for r in runs] == ["reviewed"]
    assert runs[0]["summary"] == "looks right"
    assert "review_unavailable" not in kinds(board, tid)
    assert git(repo, "status", "--porcelain").strip() == ""
