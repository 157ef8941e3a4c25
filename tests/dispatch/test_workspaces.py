"""Workspaces and board target directories with real git repositories; gc's safety rules."""

from __future__ import annotations

import os
import shlex
import subprocess
import time

import pytest

from agentboard.dispatch import gc, targets
from agentboard.domain.errors import Conflict, InvalidInput

from .conftest import RESULT_OK, all_in, events, wait_for


def git(cwd, *args):
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout


def make_repo(path):
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "t")
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-qm", "init")
    return path


def _cli(ab, *args):
    env = {**os.environ, "AGENTBOARD_HOME": str(ab.home)}
    if ab.settings.database_url:
        env["AGENTBOARD_DATABASE_URL"] = ab.settings.database_url
    return subprocess.run(["agentboard", *args], capture_output=True, text=True, env=env)


def test_target_validation(ab, tmp_path):
    repo = make_repo(tmp_path / "repo")
    with pytest.raises(InvalidInput, match="relative"):
        targets.validate_target(ab.db, "projects/x", "linked-existing")
    with pytest.raises(InvalidInput, match="system"):
        targets.validate_target(ab.db, "/etc", "linked-existing")
    with pytest.raises(InvalidInput, match="home folder"):
        targets.validate_target(ab.db, os.path.expanduser("~"), "linked-existing")
    with pytest.raises(InvalidInput, match="credentials"):
        targets.validate_target(ab.db, os.path.expanduser("~/.ssh"), "linked-existing")
    with pytest.raises(InvalidInput, match="does not exist"):
        targets.validate_target(ab.db, str(tmp_path / "nope"), "linked-existing")
    (repo / "README.md").write_text("edited by the owner\n")
    with pytest.raises(InvalidInput, match="uncommitted changes"):
        targets.validate_target(ab.db, str(repo), "linked-existing")
    git(repo, "commit", "-qam", "owner edit")
    assert targets.validate_target(ab.db, str(repo), "linked-existing") == str(repo)
    with pytest.raises(InvalidInput, match="not empty"):
        targets.validate_target(ab.db, str(repo), "linked-new")
    fresh = tmp_path / "new" / "place"
    with pytest.raises(InvalidInput, match=f"target directory {fresh} does not exist"):
        targets.validate_target(ab.db, str(fresh), "linked-new")
    assert not fresh.exists()
    assert targets.validate_target(ab.db, str(fresh), "linked-new", create=True) == str(fresh) and fresh.is_dir()
    ab.create_board("one", workdir=str(repo), workdir_mode="linked-existing")
    with pytest.raises(Conflict, match="already the target directory of board 'one'"):
        targets.validate_target(ab.db, str(repo), "linked-existing", "two")


def test_boards_create_workdir_validates_from_the_cli(ab, tmp_path):
    repo = make_repo(tmp_path / "repo")
    (repo / "dirty.txt").write_text("x")
    bad = _cli(ab, "boards", "create", "code", "--workdir", str(repo))
    assert bad.returncode == 2 and "uncommitted changes" in bad.stderr
    os.remove(repo / "dirty.txt")
    ok = _cli(ab, "boards", "create", "code", "--workdir", str(repo), "--json")
    assert ok.returncode == 0, ok.stderr
    assert ab.db.read(lambda tx: tx.scalar("SELECT workdir_mode FROM boards WHERE slug = 'code'")) == "linked-existing"


def test_worktree_tasks_commit_on_their_branch_and_gc_keeps_worktrees_with_unmerged_work(ab, dispatcher, tmp_path):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("code", workdir=str(repo), workdir_mode="linked-existing")
    board = ab.board("code")
    commit = "sh -c " + shlex.quote(
        "echo \"change by $AGENTBOARD_TASK\" > feature.txt && git add feature.txt && "
        "git -c user.email=a@b -c user.name=agent commit -qm \"feature for $AGENTBOARD_TASK\" && "
        "echo '{\"success\": true, \"summary\": \"committed\"}' > .board/result.json")
    dirty = "sh -c " + shlex.quote(
        "echo wip > wip.txt && echo '{\"success\": true, \"summary\": \"left wip\"}' > .board/result.json")
    ab.add_profile("committer", command=commit)
    ab.add_profile("messy", command=dirty)
    ab.add_profile("tidy", command=RESULT_OK)
    a = board.create("commit a feature", assignee="committer")
    b = board.create("leave work uncommitted", assignee="messy")
    c = board.create("touch nothing", assignee="tidy", branch="tidy-branch")
    ids = [a["id"], b["id"], c["id"]]
    dispatcher()
    wait_for(lambda: all_in(board, ids, {"done"}))
    wt = {t: repo / ".worktrees" / t for t in ids}
    assert board.runs(a["id"])[0]["workspace_path"] == str(wt[a["id"]])
    log = git(repo, "log", "--format=%s", f"ab/{a['id']}")
    assert f"feature for {a['id']}" in log
    assert "feature.txt" in git(repo, "show", "--name-only", "--format=", f"ab/{a['id']}")
    assert git(repo, "status", "--porcelain") == ""  # the owner's checkout is untouched
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert git(wt[c["id"]], "rev-parse", "--abbrev-ref", "HEAD").strip() == "tidy-branch"
    assert (wt[a["id"]] / ".board" / "task.json").exists()
    assert ".board" not in git(wt[a["id"]], "status", "--porcelain")
    for t in ids:
        board.archive(t)
    rep = gc.collect(ab.db, ab.home, boards=["code"])
    kept = {k["path"]: k["why"] for k in rep["kept"]}
    # what the messy worker left uncommitted was committed on its branch when its success was accepted
    assert "wip.txt" in git(repo, "show", "--name-only", "--format=", f"ab/{b['id']}")
    assert "not on any other branch" in kept[str(wt[b["id"]])] and (wt[b["id"]] / "wip.txt").exists()
    assert "not on any other branch" in kept[str(wt[a["id"]])] and wt[a["id"]].exists()
    assert rep["worktrees_removed"] == [str(wt[c["id"]])] and not wt[c["id"]].exists()


def test_non_git_target_runs_one_task_at_a_time_in_the_folder(ab, dispatcher, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    ab.create_board("docs", workdir=str(folder), workdir_mode="linked-existing")
    board = ab.board("docs")
    ab.add_profile("w", command=RESULT_OK)
    ids = [board.create(f"t{i}", assignee="w")["id"] for i in range(3)]
    d = dispatcher(start=False)
    rep = d.run_pass()
    assert len(rep["spawned"]) == 1 and rep["spawned"][0]["workspace"] == str(folder)
    d.start()
    wait_for(lambda: all_in(board, ids, {"done"}))


def test_gc_removes_finished_scratch_workspaces_but_not_ones_children_need(ab, board, dispatcher):
    ab.add_profile("w", command=RESULT_OK)
    parent = board.create("parent", assignee="w")
    lone = board.create("lone", assignee="w")
    dispatcher()
    wait_for(lambda: all_in(board, [parent["id"], lone["id"]], {"done"}))
    child = board.create("child waits for a person", parents=[parent["id"]])  # no assignee: stays todo
    ws = ab.home / "boards/default/workspaces"
    assert (ws / parent["id"]).exists() and (ws / lone["id"]).exists()
    old_log = ab.home / "boards/default/logs/old.log"
    old_log.write_text("x")
    os.utime(old_log, (time.time() - 40 * 86400,) * 2)
    rep = gc.collect(ab.db, ab.home, boards=["default"])
    assert str(ws / lone["id"]) in rep["workspaces_removed"] and not (ws / lone["id"]).exists()
    assert (ws / parent["id"]).exists() and child["status"] == "todo"
    assert rep["logs_removed"] == 1 and not old_log.exists()
    assert (ab.home / "boards/default/logs" / f"{lone['id']}.log").exists()
    assert events(board, lone["id"], "workspace_removed")
    out = _cli(ab, "gc", "--event-retention-days", "0", "--json")
    assert out.returncode == 0, out.stderr
    assert not (ws / lone["id"]).exists()


def test_relative_dir_workspace_is_refused_at_creation(board):
    with pytest.raises(InvalidInput, match="relative"):
        board.create("bad", workspace="dir:relative/path")


def test_a_new_worktree_branch_is_shown_to_its_worker_as_git_would_describe_it(ab, dispatcher, tmp_path):
    from agentboard.dispatch import diffs

    repo = make_repo(tmp_path / "repo")
    ab.create_board("code", workdir=str(repo), workdir_mode="linked-existing")
    board = ab.board("code")
    ab.add_profile("tidy", command=RESULT_OK)
    t = board.create("touch nothing", assignee="tidy")
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"done"}))
    wt = repo / ".worktrees" / t["id"]
    shown = (wt / ".board" / "context.md").read_text()
    task = board.show(t["id"])
    detail = {"workspace_kind": "worktree", "workspace_path": str(wt), "branch_name": task["branch_name"],
              "base_branch": task["base_branch"]}
    asked = diffs.with_git(dict(detail))["git"]
    known = diffs.with_new_branch(dict(detail))["git"]
    assert known == asked  # what was written without asking git is what git says
    assert f"**Git:** {asked['summary']}" in shown
