"""What approval does with a task's branch: merge, squash, rebase, a pull request through `gh`,
or a refusal that blocks the task with nothing half-done."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import cli, events, git, make_repo, sh, wait_for

# edits notes.txt on its branch and commits, then reports (the task has review on)
EDIT = ("printf 'line one\\nchanged by the agent\\n' > notes.txt && git commit -qam 'agent edit' && "
        "agentboard complete --summary 'edited notes'")


def to_review(ab: Any, tmp_path: Path, dispatcher: Any, integrate: str, *, agent: str = EDIT,
              files: dict[str, str] | None = None,
              before: Callable[[Path], None] | None = None) -> tuple[Any, dict[str, Any], Path]:
    """A task whose agent (``agent``, a shell command) worked on ``files`` in a repository of
    its own (``before`` prepares it further), in review on a board integrating by ``integrate``."""
    repo = make_repo(tmp_path / "repo", files or {"notes.txt": "line one\nline two\n", "other.txt": "x\n"})
    if before is not None:
        before(repo)
    ab.create_board("flow", workdir=str(repo), settings={"integrate": integrate})
    ab.add_profile("agent", command=sh(agent))
    board = ab.board("flow")
    task = board.create("Edit the notes", assignee="agent", review=True)
    dispatcher()
    wait_for(lambda: board.show(task["id"])["status"] == "review", what="the task to reach review")
    return board, board.show(task["id"]), repo


@pytest.mark.parametrize("mode", ["merge", "squash", "rebase"])
def test_approval_lands_the_branch_on_the_base_branch(ab, tmp_path, dispatcher, mode):
    board, task, repo = to_review(ab, tmp_path, dispatcher, mode)
    # the owner committed elsewhere meanwhile and left an unrelated file edited: neither is in the way
    (repo / "other.txt").write_text("y\n")
    git(repo, "commit", "-qam", "owner commit")
    (repo / "README.md").write_text("owner's uncommitted edit\n")
    before = git(repo, "rev-parse", "main").strip()
    out = board.approve(task["id"])
    assert out["status"] == "done"
    assert (repo / "notes.txt").read_text() == "line one\nchanged by the agent\n"
    assert (repo / "README.md").read_text() == "owner's uncommitted edit\n"
    parents = git(repo, "log", "-1", "--format=%P", "main").split()
    subject = git(repo, "log", "-1", "--format=%s", "main").strip()
    if mode == "merge":
        assert parents[0] == before and len(parents) == 2
        assert subject == f"Merge {task['branch_name']}: Edit the notes ({task['id']})"
    elif mode == "squash":
        assert parents == [before] and subject == f"Edit the notes ({task['id']})"
    else:
        assert parents == [before] and subject == "agent edit"
    done = board.show(task["id"])
    expected = {"merge": "merged", "squash": "squashed", "rebase": "rebased"}[mode]
    assert done["integration"] == expected
    assert events(board, task["id"], "integrated")[-1]["payload"]["commit"] == git(repo, "rev-parse", "main").strip()


def test_a_dirty_target_refuses_the_merge_with_nothing_half_done_and_approving_again_once_clean_merges(
        ab, tmp_path, dispatcher):
    board, task, repo = to_review(ab, tmp_path, dispatcher, "merge")
    (repo / "notes.txt").write_text("the owner's unsaved work\n")
    before = git(repo, "rev-parse", "main").strip()
    out = cli(ab.home, "review", task["id"], "--approve")
    assert out.returncode == 4, out.stderr  # not approved: a script must not go on
    assert "not approved -> blocked (needs input)" in out.stdout and "notes.txt" in out.stdout
    t = board.show(task["id"])
    assert (t["status"], t["block_kind"], t["integration"]) == ("blocked", "needs_input", "refused")
    assert "uncommitted changes in files this task changes (notes.txt)" in t["block_reason"]
    assert git(repo, "rev-parse", "main").strip() == before
    assert (repo / "notes.txt").read_text() == "the owner's unsaved work\n"
    assert git(repo, "status", "--porcelain").strip() == "M notes.txt"
    assert events(board, task["id"], "integration_refused")
    # the owner puts their edit away; approving again merges, without another run or review
    git(repo, "checkout", "--", "notes.txt")
    again = cli(ab.home, "review", task["id"], "--approve")
    assert again.returncode == 0, again.stderr
    t = board.show(task["id"])
    assert (t["status"], t["integration"]) == ("done", "merged")
    assert (repo / "notes.txt").read_text() == "line one\nchanged by the agent\n"
    assert len([r for r in t["runs"] if r.get("profile") == "agent"]) == 1  # no second agent run


def test_approving_a_blocked_task_changes_no_branch(ab, tmp_path, dispatcher):
    board, task, repo = to_review(ab, tmp_path, dispatcher, "merge")
    assert cli(ab.home, "review", task["id"], "--reject", "not like this").returncode == 0  # blocked
    before = git(repo, "rev-parse", "main").strip()
    out = cli(ab.home, "review", task["id"], "--approve")
    assert out.returncode == 4 and "cannot approve" in out.stderr, (out.stdout, out.stderr)
    assert git(repo, "rev-parse", "main").strip() == before
    assert board.show(task["id"])["status"] == "blocked"


def test_a_base_that_moved_in_a_conflicting_way_refuses_the_merge(ab, tmp_path, dispatcher):
    board, task, repo = to_review(ab, tmp_path, dispatcher, "squash")
    (repo / "notes.txt").write_text("line one\nchanged by the owner\n")
    git(repo, "commit", "-qam", "owner change")
    before = git(repo, "rev-parse", "main").strip()
    t = board.approve(task["id"])
    assert t["status"] == "blocked" and "conflicts with the task's branch in notes.txt" in t["block_reason"]
    assert git(repo, "rev-parse", "main").strip() == before
    assert git(repo, "status", "--porcelain").strip() == ""


def fake_gh(bin_dir: Path, record: Path, *, authenticated: bool = True) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    gh = bin_dir / "gh"
    gh.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\n' \"$*\" >> {record}\n"
        "if [ \"$1\" = auth ]; then " + ("exit 0" if authenticated else "echo 'not logged in' >&2; exit 1") + "; fi\n"
        "if [ \"$1\" = pr ] && [ \"$2\" = create ]; then echo 'Creating pull request'; "
        "echo 'https://github.example/acme/proj/pull/7'; exit 0; fi\n"
        "exit 3\n")
    gh.chmod(gh.stat().st_mode | stat.S_IEXEC)


def test_pr_pushes_the_branch_and_opens_a_pull_request_with_gh(ab, tmp_path, dispatcher, monkeypatch):
    board, task, repo = to_review(ab, tmp_path, dispatcher, "pr")
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    record = tmp_path / "gh-args.txt"
    fake_gh(tmp_path / "bin", record)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    before = git(repo, "rev-parse", "main").strip()
    t = board.approve(task["id"])
    assert t["status"] == "done"
    shown = board.show(task["id"])
    assert shown["pr_url"] == "https://github.example/acme/proj/pull/7" and shown["integration"] == "pr_opened"
    args = record.read_text().splitlines()
    assert args[0] == "auth status"
    assert args[1].startswith(f"pr create --base main --head {task['branch_name']} --title Edit the notes ({task['id']})")
    assert git(origin, "rev-parse", task["branch_name"]).strip() == git(repo, "rev-parse", task["branch_name"]).strip()
    assert git(repo, "rev-parse", "main").strip() == before
    out = cli(ab.home, "show", task["id"])
    assert "https://github.example/acme/proj/pull/7" in out.stdout


def test_pr_without_an_authenticated_gh_blocks_the_task_saying_what_to_do(ab, tmp_path, dispatcher, monkeypatch):
    board, task, repo = to_review(ab, tmp_path, dispatcher, "pr")
    fake_gh(tmp_path / "bin", tmp_path / "gh-args.txt", authenticated=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    t = board.approve(task["id"])
    assert t["status"] == "blocked" and "gh auth login" in t["block_reason"]


def test_integrate_none_leaves_the_branch_and_says_so(ab, tmp_path, dispatcher):
    board, task, repo = to_review(ab, tmp_path, dispatcher, "none")
    before = git(repo, "rev-parse", "main").strip()
    board.approve(task["id"])
    assert git(repo, "rev-parse", "main").strip() == before
    assert board.show(task["id"])["integration"] == "left"
    assert events(board, task["id"], "integration_left")


def test_boards_set_checks_the_base_branch_and_the_mode(ab, tmp_path):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("cfg", workdir=str(repo))
    bad = cli(ab.home, "boards", "set", "cfg", "--base", "nope")
    assert bad.returncode == 2 and "has no branch 'nope'" in bad.stderr
    wrong = cli(ab.home, "boards", "set", "cfg", "--integrate", "yolo")
    assert wrong.returncode == 2
    git(repo, "branch", "develop")
    ok = cli(ab.home, "boards", "set", "cfg", "--base", "develop", "--integrate", "squash")
    assert ok.returncode == 0, ok.stderr
    assert "base develop, integrate squash" in ok.stdout
    assert "integrate  squash" in cli(ab.home, "boards", "show", "cfg").stdout


def test_the_api_checks_git_settings_and_serves_the_branch_and_its_diff(ab, tmp_path, dispatcher):
    import httpx

    from agentboard.api import create_app
    from agentboard.api.serve import BackgroundServer
    from agentboard.kernel import tokens

    board, task, repo = to_review(ab, tmp_path, dispatcher, "none")
    admin = tokens.create(ab.db, "admin", role="admin")["token"]
    server = BackgroundServer(create_app(ab.settings, ab.db)).start()
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {admin}"}, timeout=30) as http:
            bad = http.patch("/api/boards/flow", json={"settings": {"base": "nope", "integrate": "merge"}})
            assert bad.status_code == 400 and "has no branch 'nope'" in bad.text
            flow = next(b for b in ab.boards() if b["slug"] == "flow")
            assert flow["settings"].get("integrate") == "none" and "base" not in flow["settings"]  # unchanged
            detail = http.get(f"/api/tasks/{task['id']}").json()
            assert detail["workspace_kind"] == "worktree" and detail["branch_name"] == f"ab/{task['id']}"
            git_facts = detail["git"]
            assert (git_facts["base"], git_facts["ahead"], git_facts["behind"], git_facts["files"]) == ("main", 1, 0, 1)
            diff = http.get(f"/api/tasks/{task['id']}/diff").json()
            assert [f["path"] for f in diff["files"]] == ["notes.txt"]
            assert (diff["additions"], diff["deletions"]) == (1, 1)
            assert "+changed by the agent" in diff["shown"][0]["diff"]
            paged = http.get(f"/api/tasks/{task['id']}/diff", params={"per_page": 1, "page": 5}).json()
            assert (paged["page"], paged["pages"]) == (1, 1)
    finally:
        server.stop()


# plants a file into another task's live worktree through its own branch (git add -f gets it past
# the exclude agentboard writes), then reports
PLANT = ("mkdir -p .worktrees/t_victim && printf 'echo planted > marker\\n' > .worktrees/t_victim/check.sh && "
         "printf 'changed by the agent\\n' > notes.txt && git add -f .worktrees notes.txt && "
         "git commit -qm 'an innocent change' && agentboard complete --summary 'edited notes'")


@pytest.mark.parametrize("mode", ["merge", "squash", "rebase"])
def test_a_branch_holding_files_under_worktrees_is_refused_and_no_other_task_workspace_is_written(
        ab, tmp_path, dispatcher, mode):
    def victim_worktree(repo: Path) -> None:
        (repo / ".worktrees" / "t_victim").mkdir(parents=True)
        (repo / ".worktrees" / "t_victim" / "check.sh").write_text("echo the victim's own check\n")

    board, task, repo = to_review(ab, tmp_path, dispatcher, mode, agent=PLANT, files={"notes.txt": "line one\n"},
                                  before=victim_worktree)
    victim = repo / ".worktrees" / "t_victim"
    before = git(repo, "rev-parse", "main").strip()
    t = board.approve(task["id"])
    assert (t["status"], t["integration"]) == ("blocked", "refused")
    assert "agentboard's own folders (.worktrees/t_victim/check.sh)" in t["block_reason"]
    assert (victim / "check.sh").read_text() == "echo the victim's own check\n"
    assert git(repo, "rev-parse", "main").strip() == before


def test_a_branch_that_would_write_over_an_ignored_file_of_the_target_is_refused(ab, tmp_path, dispatcher):
    plant = ("printf 'API_KEY=stolen\\n' > .env && printf 'changed by the agent\\n' > notes.txt && "
             "git add -f .env notes.txt && git commit -qm 'config' && agentboard complete --summary 'done'")
    board, task, repo = to_review(ab, tmp_path, dispatcher, "merge", agent=plant,
                                  files={"notes.txt": "line one\n", ".gitignore": ".env\n"},
                                  before=lambda repo: (repo / ".env").write_text("API_KEY=the owner's own\n"))
    t = board.approve(task["id"])
    assert t["status"] == "blocked"
    assert "would write over files the target" in t["block_reason"] and "(.env)" in t["block_reason"]
    assert (repo / ".env").read_text() == "API_KEY=the owner's own\n"


# reports, then goes on committing on its branch for a few seconds before it exits
GOES_ON = (EDIT + " && sleep 1 && echo 'import os' > backdoor.py && git add backdoor.py && "
           "git commit -qm 'after the report' && sleep 10")


def test_approving_while_the_worker_that_reported_still_runs_is_refused_and_lands_nothing_unreviewed(
        ab, tmp_path, dispatcher):
    from agentboard.domain.errors import Conflict

    board, task, repo = to_review(ab, tmp_path, dispatcher, "merge", agent=GOES_ON)
    before = git(repo, "rev-parse", "main").strip()
    with pytest.raises(Conflict, match=r"still running .*would land unreviewed"):
        board.approve(task["id"])
    assert git(repo, "rev-parse", "main").strip() == before and board.show(task["id"])["status"] == "review"
    # once it has exited, what is on its branch is what a person looks at and approves
    wait_for(lambda: board.runs(task["id"])[-1]["exit_code"] is not None, timeout=60, what="the worker's exit")
    assert board.approve(task["id"])["status"] == "done"
    assert (repo / "backdoor.py").exists()


def test_tasks_finishing_at_once_on_one_repository_all_land_none_refused_for_a_moved_base(tmp_path):
    """Several integrations into one repository at the same moment (a fleet's tasks finishing
    together): each lands on top of the others, none is refused because the base moved."""
    import threading

    from agentboard.dispatch import integrate

    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n"})
    tasks = []
    for i in range(8):
        git(repo, "checkout", "-q", "-b", f"ab/t_{i:08x}", "main")
        (repo / f"f{i}.txt").write_text(f"{i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"work {i}")
        tasks.append({"id": f"t_{i:08x}", "title": f"task {i}", "branch_name": f"ab/t_{i:08x}"})
    git(repo, "checkout", "-q", "main")
    start = threading.Barrier(len(tasks))
    outcomes: list[Any] = [None] * len(tasks)

    def land(i: int) -> None:
        start.wait()
        try:
            outcomes[i] = integrate.integrate(repo, tasks[i], "merge", "main").outcome
        except integrate.Refused as exc:
            outcomes[i] = str(exc)

    threads = [threading.Thread(target=land, args=(i,)) for i in range(len(tasks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes == ["merged"] * len(tasks)
    assert sorted(p.name for p in repo.glob("f*.txt")) == [f"f{i}.txt" for i in range(8)]
