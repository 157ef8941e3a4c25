"""What a worker leaves uncommitted reaches its branch under every `integrate` mode, the default
`none` included: the dispatcher commits it once the worker has exited, before the task is done —
so a child task, which starts from that branch, finds the parent's work — and an approval
commits what review saw before it keeps (or integrates) the branch."""

from __future__ import annotations

from pathlib import Path

from agentboard.dispatch import branches, reaping

from .conftest import events, git, make_repo, sh, wait_for


def parent(log: Path) -> str:
    """Writes the spec and reports without committing it, notes when in ``log``, then takes a
    moment before it exits: its task must not be done (nor its child started) before the spec is
    on its branch."""
    return (f"echo '# the spec' > api_spec.md && agentboard complete --summary 'wrote the spec' && "
            f"date +%s.%N > {log} && sleep 2")


# builds on the spec only if its branch holds it
CHILD = ("if [ -f api_spec.md ]; then echo 'built on the spec' > impl.txt && "
         "agentboard complete --summary 'built on the spec'; "
         "else agentboard block 'api_spec.md is not on my branch'; fi")
# edits a file, commits nothing, reports (the task has review on)
EDIT = "echo 'changed by the agent' > notes.txt && agentboard complete --summary 'edited the notes'"


def test_a_child_task_finds_the_work_its_parent_left_uncommitted_under_integrate_none(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo))  # integrate: none (the default)
    log = tmp_path / "reported"
    ab.add_profile("parent", command=sh(parent(log)))
    ab.add_profile("child", command=sh(CHILD))
    board = ab.board("flow")
    first = board.create("write the spec", assignee="parent")["id"]
    child = board.create("build on the spec", assignee="child", parents=[first])["id"]
    dispatcher()

    wait_for(lambda: board.show(child)["status"] in ("done", "blocked"), what="the child to finish", timeout=60)
    c, p = board.show(child), board.show(first)
    assert c["status"] == "done", c.get("block_reason")
    assert p["status"] == "done"
    branch = p["branch_name"]
    assert git(repo, "show", f"{branch}:api_spec.md") == "# the spec\n"
    assert "committed by agentboard" in git(repo, "log", "-1", "--format=%B", branch)
    assert git(repo, "status", "--porcelain", "--", ".").strip() == ""  # main untouched: nothing integrated
    run = next(r for r in p["runs"] if r.get("profile") == "parent")
    assert (run.get("metadata") or {})["committed"]["files"] == ["api_spec.md"]
    # the parent was done once its worker had exited, 2 s after its report: never before
    done_at = next(e["created_at"] for e in events(board, first, "completed"))
    assert done_at >= float(log.read_text()) + 1.5
    assert c["base_branch"] == branch


def test_approving_a_reviewed_task_under_integrate_none_commits_its_worktree_on_its_branch(
        ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo", {"notes.txt": "start\n"})
    ab.create_board("flow", workdir=str(repo))
    ab.add_profile("agent", command=sh(EDIT))
    board = ab.board("flow")
    tid = board.create("edit the notes", assignee="agent", review=True)["id"]
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "review", what="the task in review")
    branch = board.show(tid)["branch_name"]
    wait_for(lambda: board.runs(tid)[-1].get("exit_code") is not None, what="the worker's exit")

    out = board.approve(tid)

    assert (out["status"], out["integration"]) == ("done", "left")
    assert git(repo, "show", f"{branch}:notes.txt") == "changed by the agent\n"
    assert "as its review saw it" in git(repo, "log", "-1", "--format=%B", branch)
    assert branches.facts(board.show(tid)).uncommitted == 0
    left = events(board, tid, "integration_left")[-1]["payload"]
    assert left["committed"]["files"] == ["notes.txt"]
    assert (repo / "notes.txt").read_text() == "start\n"  # kept on its branch, not merged


# reports, then goes on (a CLI that lingers after its last turn)
LINGERS = "echo 'done' > out.txt && agentboard complete --summary 'wrote out.txt' && sleep 120"


def test_a_worker_that_goes_on_after_its_report_is_stopped_and_its_task_done_with_its_work(
        ab, tmp_path, dispatcher, monkeypatch):
    monkeypatch.setattr(reaping, "REPORTED_GRACE", 3)  # (30 s in use)
    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo))
    ab.add_profile("agent", command=sh(LINGERS))
    board = ab.board("flow")
    tid = board.create("write out.txt", assignee="agent")["id"]
    dispatcher()

    wait_for(lambda: board.show(tid)["status"] not in ("ready", "running"),  # (one read: ready, then running)
             what="the task to finish", timeout=60)
    t = board.show(tid)
    assert t["status"] == "done", t
    assert git(repo, "show", f"{t['branch_name']}:out.txt") == "done\n"
    run = t["runs"][-1]
    assert run["outcome"] == "completed" and run["summary"] == "wrote out.txt"


def test_a_worker_reporting_on_a_worktree_task_is_told_its_report_is_applied_when_it_exits(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("told", workdir=str(repo))
    ab.add_profile("w", command=sh("echo x > x.txt && agentboard complete --summary 'wrote x'"))
    board = ab.board("told")
    t = board.create("write x", assignee="w")["id"]
    dispatcher()
    wait_for(lambda: board.show(t)["status"] == "done", what="the task to be done", timeout=60)
    run = next(r for r in board.runs(t) if r.get("profile") == "w")
    said = Path(run["log_path"]).read_text()
    assert f"{t}: received; applied when this worker exits" in said, said
    assert f"{t}: running" not in said
