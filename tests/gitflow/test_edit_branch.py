"""`agentboard edit ID --branch NAME`: the remedy a merge-conflict block names. A task whose
parents' branches conflict is given a branch merged by hand, and starts from it; a task that has
started keeps its branch. Real git, real worker processes, the real dispatcher and CLI."""

from __future__ import annotations

from typing import Any

from .conftest import cli, git, make_repo, sh, wait_for


def status(board: Any, task_id: str) -> str:
    return str(board.show(task_id)["status"])


def test_a_merge_conflict_is_cleared_by_a_branch_merged_by_hand_that_the_task_then_starts_from(
        ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo", {"shared.txt": "base\n"})
    ab.create_board("clash", workdir=str(repo))
    ab.add_profile("editor", command=sh(
        "echo \"$AGENTBOARD_TASK\" >> shared.txt && git commit -qam work && agentboard complete --summary done"))
    board = ab.board("clash")
    pa = board.create("one", assignee="editor")["id"]
    pb = board.create("two", assignee="editor")["id"]
    child = board.create("three", assignee="editor", parents=[pa, pb])["id"]
    dispatcher()
    wait_for(lambda: status(board, child) == "blocked", what="the child to be blocked")
    blocked = board.show(child)
    assert blocked["block_kind"] == "merge_conflict"
    # the reason names a remedy that exists, for this task
    assert f"`agentboard edit {child} --branch BRANCH`" in blocked["block_reason"]
    assert f"`agentboard unblock {child}`" in blocked["block_reason"]

    # a branch of the task that has started is its work: refused, nothing changed
    started = cli(ab.home, "edit", pa, "--branch", "elsewhere")
    assert started.returncode == 4 and started.stderr.startswith("error: ") and "has started" in started.stderr
    assert board.show(pa)["branch_name"] == f"ab/{pa}"
    # create --branch's check: an invalid name is exit 2
    bad = cli(ab.home, "edit", child, "--branch", "bad..name")
    assert bad.returncode == 2 and "invalid branch 'bad..name'" in bad.stderr
    assert board.show(child)["branch_name"] is None

    # merge the parents by hand into a branch of one's own
    side = tmp_path / "merging"
    git(repo, "worktree", "add", "-q", "-b", "mymerge", str(side), f"ab/{pa}")
    merged = merge_by_hand(side, f"ab/{pb}")
    git(repo, "worktree", "remove", "--force", str(side))

    out = cli(ab.home, "edit", child, "--branch", "mymerge")
    assert out.returncode == 0, out.stderr
    assert cli(ab.home, "unblock", child).returncode == 0
    wait_for(lambda: status(board, child) == "done", what="the child to finish on the merged branch")
    done = board.show(child)
    assert done["branch_name"] == "mymerge"
    assert done["workspace_path"] == str(repo / ".worktrees" / child)
    # its work sits on top of the hand merge: it started from that branch
    assert git(repo, "merge-base", "--is-ancestor", merged, "mymerge") == ""
    assert git(repo, "show", "mymerge:shared.txt").splitlines() == ["base", pa, pb, child]
    # and now that it has started, its branch stays
    again = cli(ab.home, "edit", child, "--branch", "other")
    assert again.returncode == 4 and "has started" in again.stderr


def merge_by_hand(worktree: Any, branch: str) -> str:
    """Merge ``branch`` into the worktree's branch, resolving shared.txt by keeping both sides
    (base, then the first parent's line, then the second's); the merge commit."""
    import subprocess

    subprocess.run(["git", "-C", str(worktree), "merge", "-q", branch], capture_output=True, text=True)
    ours = git(worktree, "show", ":2:shared.txt").splitlines()
    theirs = git(worktree, "show", ":3:shared.txt").splitlines()
    (worktree / "shared.txt").write_text("\n".join([*ours, theirs[-1]]) + "\n")
    git(worktree, "add", "shared.txt")
    git(worktree, "commit", "-qm", "merge the parents by hand")
    return git(worktree, "rev-parse", "HEAD").strip()
