"""Agent CLIs often leave their edits uncommitted (some cannot commit in a linked worktree at
all). When the dispatcher accepts a worktree task's verified success, what the worker left
uncommitted is committed on the task's branch, so review sees and integration merges what the
checks passed — never agentboard's own files."""

from __future__ import annotations

from .conftest import git, make_repo, sh, wait_for

# edits and adds files, commits nothing, reports success
AGENT = ('echo "fixed" > fix.txt && echo "more" >> README.md && mkdir -p src && echo "x = 1" > src/x.py && '
         'agentboard complete --summary "fixed it, left it uncommitted"')


def test_a_workers_uncommitted_work_is_committed_on_its_branch_and_merged(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo), settings={"integrate": "merge"})
    ab.add_profile("agent", command=sh(AGENT))
    board = ab.board("flow")
    tid = board.create("fix it", assignee="agent", verify=["test -f fix.txt"])["id"]
    dispatcher()
    wait_for(lambda: board.show(tid)["integration"] or board.show(tid)["status"] == "blocked",
             what="the task's integration")
    t = board.show(tid)
    assert (t["status"], t["integration"]) == ("done", "merged"), t.get("block_reason")
    assert (repo / "fix.txt").read_text() == "fixed\n" and (repo / "src" / "x.py").is_file()
    assert "more" in (repo / "README.md").read_text()
    branch = t["branch_name"]
    message = git(repo, "log", "-1", "--format=%B", branch)
    assert message.startswith("fixed it, left it uncommitted") and "committed by agentboard" in message
    files = git(repo, "show", "--name-only", "--format=", branch).split()
    assert sorted(files) == ["README.md", "fix.txt", "src/x.py"]  # no .board/ nor .mcp.json
    run = next(r for r in t["runs"] if r.get("profile") == "agent")
    assert {"README.md", "fix.txt"} <= set((run.get("metadata") or {})["committed"]["files"])


def test_a_reviewed_task_reaches_review_with_its_work_committed_and_approval_merges_it(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo), settings={"integrate": "merge"})
    ab.add_profile("agent", command=sh(AGENT))
    board = ab.board("flow")
    tid = board.create("fix it", assignee="agent", review=True)["id"]
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "review", what="the task in review")
    assert git(repo, "status", "--porcelain", "--", ".").strip() == ""  # the target untouched
    out = board.approve(tid)
    assert (out["status"], board.show(tid)["integration"]) == ("done", "merged"), board.show(tid).get("block_reason")
    assert (repo / "fix.txt").read_text() == "fixed\n"
