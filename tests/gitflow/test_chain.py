"""From task to merged code: chained worktrees, verification in the project's virtualenv,
integration on approval — real git, real worker processes, the real dispatcher."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentboard.dispatch import branches

from .conftest import FIX, WRITE, cli, events, git, make_project, make_repo, sh, wait_for


def status(board: Any, task_id: str) -> str:
    return str(board.show(task_id)["status"])


def test_a_fix_verified_in_the_project_venv_then_a_document_task_that_sees_the_fix(ab, tmp_path, dispatcher):
    repo = make_project(tmp_path / "proj")
    ab.create_board("proj", workdir=str(repo), settings={"integrate": "merge"})
    ab.add_profile("fixer", command=sh(FIX))
    ab.add_profile("writer", command=sh(WRITE))
    board = ab.board("proj")
    fix = board.create("Fix add()", assignee="fixer", verify=["python -m pytest -q"], review=True)
    doc = board.create("Document add()", assignee="writer", parents=[fix["id"]])
    dispatcher()

    wait_for(lambda: status(board, fix["id"]) == "review", what="the fix to pass verification into review")
    t = board.show(fix["id"])
    assert t["workspace_kind"] == "worktree"
    assert t["branch_name"] == f"ab/{fix['id']}" and t["base_branch"] == "main"
    assert t["workspace_path"] == str(repo / ".worktrees" / fix["id"])
    assert events(board, fix["id"], "verified"), "verification ran the project's pytest and passed"
    facts = branches.facts(t)
    assert (facts.ahead, facts.behind, facts.files) == (1, 0, 1)

    shown = cli(ab.home, "show", fix["id"])
    assert "workspace   worktree:" in shown.stdout.replace("  ", "  ") or "worktree:" in shown.stdout
    assert "scratch" not in shown.stdout
    assert f"ab/{fix['id']} on main: 1 ahead, 0 behind; 1 file(s) +1 -1" in shown.stdout
    diff = cli(ab.home, "diff", fix["id"])
    assert "-    return a - b" in diff.stdout and "+    return a + b" in diff.stdout

    # approval merges the branch into main in the target repository
    out = cli(ab.home, "review", fix["id"], "--approve")
    assert out.returncode == 0, out.stderr
    assert "branch merged" in out.stdout
    assert "a + b" in (repo / "calc.py").read_text()
    # the fix's merge is on main (the document task, promoted by the approval, may merge after it)
    assert any(s.startswith(f"Merge ab/{fix['id']}") for s in git(repo, "log", "--format=%s").splitlines())
    assert events(board, fix["id"], "integrated")[0]["payload"]["outcome"] == "merged"
    # once landed, the task's diff is what landed on main (not the empty diff of a merged branch)
    landed = cli(ab.home, "diff", fix["id"])
    assert "-    return a - b" in landed.stdout and "+    return a + b" in landed.stdout, landed.stdout

    # the document task starts from its parent's branch and sees the fix
    wait_for(lambda: status(board, doc["id"]) == "done", what="the document task to finish")
    d = board.show(doc["id"])
    assert d["base_branch"] == f"ab/{fix['id']}"
    assert git(repo, "show", f"ab/{doc['id']}:USAGE.md").startswith("add(a, b)")
    ctx = cli(ab.home, "context", doc["id"]).stdout
    assert f"**Base:** ab/{fix['id']}" in ctx
    # it started from its parent's branch but landed on main, and says so (recorded just after it is done)
    landed_doc = wait_for(lambda: events(board, doc["id"], "integrated"), what="the document task's merge recorded")
    assert landed_doc[-1]["payload"]["base"] == "main"
    assert f"ab/{doc['id']} landed on main (merged)" in cli(ab.home, "show", doc["id"]).stdout


def _fan_in(ab: Any, tmp_path: Path, **settings: Any) -> tuple[Any, Path, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Two tasks each writing its own file (a.txt, b.txt) and a child of both writing c.txt, on a
    board targeting a repository of its own (``settings``: the board's)."""
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n", "b.txt": "b\n"})
    ab.create_board("two", workdir=str(repo), settings=settings or None)
    ab.add_profile("editor", command=sh(
        "echo \"$AGENTBOARD_TASK\" >> \"$(cat .board/task.json | python3 -c 'import json,sys; "
        "print(json.load(sys.stdin)[\"title\"])')\" && git add -A . && git commit -qm work && "
        "agentboard complete --summary done"))
    board = ab.board("two")
    pa = board.create("a.txt", assignee="editor")
    pb = board.create("b.txt", assignee="editor")
    child = board.create("c.txt", assignee="editor", parents=[pa["id"], pb["id"]])
    return board, repo, pa, pb, child


def test_two_parents_are_merged_into_an_integration_branch(ab, tmp_path, dispatcher):
    board, repo, pa, pb, child = _fan_in(ab, tmp_path)
    dispatcher()
    try:
        wait_for(lambda: status(board, child["id"]) == "done", what="the child to finish")
    except AssertionError:
        raise AssertionError([(e["task_id"], e["kind"], e["payload"]) for e in board.events(0, limit=1000)]) from None
    c = board.show(child["id"])
    assert c["base_branch"] == f"ab/{child['id']}-base"
    tree = git(repo, "ls-tree", "--name-only", f"ab/{child['id']}").split()
    assert {"a.txt", "b.txt", "c.txt"} <= set(tree)
    assert pa["id"] in git(repo, "show", f"ab/{child['id']}:a.txt")
    assert pb["id"] in git(repo, "show", f"ab/{child['id']}:b.txt")


def test_conflicting_parents_block_the_child_with_the_files(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo", {"shared.txt": "base\n"})
    ab.create_board("clash", workdir=str(repo))
    ab.add_profile("editor", command=sh(
        "echo \"$AGENTBOARD_TASK\" > shared.txt && git commit -qam work && agentboard complete --summary done"))
    board = ab.board("clash")
    pa = board.create("one", assignee="editor")
    pb = board.create("two", assignee="editor")
    child = board.create("three", assignee="editor", parents=[pa["id"], pb["id"]])
    dispatcher()
    wait_for(lambda: status(board, child["id"]) == "blocked", what="the child to be blocked")
    c = board.show(child["id"])
    assert c["block_kind"] == "merge_conflict"
    assert "shared.txt" in c["block_reason"]
    assert not branches.has_branch(repo, f"ab/{child['id']}")


def test_a_fan_in_merged_on_main_records_only_the_files_it_landed(ab, tmp_path, dispatcher):
    board, repo, _pa, _pb, child = _fan_in(ab, tmp_path, integrate="merge", review_before_integrate=False)
    dispatcher()
    wait_for(lambda: status(board, child["id"]) == "done", what="the child to finish")
    # (its merge is recorded just after the task is done)
    (merged,) = wait_for(lambda: events(board, child["id"], "integrated"), what="its merge recorded")
    assert merged["payload"]["files"] == ["c.txt"]
    before, after = merged["payload"]["before"], merged["payload"]["commit"]
    assert git(repo, "diff", "--name-only", before, after).split() == ["c.txt"]
