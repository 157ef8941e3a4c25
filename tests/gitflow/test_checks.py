"""Checked at creation and the small truths around a task's report: errors that say what to do
instead of a task that gives up later, and outputs that say what happened."""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import agentboard

from .conftest import cli, events, git, make_repo, sh, wait_for


def test_a_worktree_task_on_a_board_without_a_git_target_is_refused(ab, tmp_path):
    ab.create_board("plain")
    out = cli(ab.home, "create", "Refactor", "--board", "plain", "--workspace", "worktree")
    assert out.returncode == 2
    assert "board 'plain' has no target directory" in out.stderr and "--workdir" in out.stderr
    folder = tmp_path / "notgit"
    folder.mkdir()
    ab.create_board("nogit", workdir=str(folder))
    out = cli(ab.home, "create", "Refactor", "--board", "nogit", "--workspace", "worktree")
    assert out.returncode == 2 and "is not a git repository" in out.stderr
    assert ab.board("plain").list() == [] and ab.board("nogit").list() == []


def test_an_unknown_assignee_is_flagged_on_every_surface(ab, tmp_path):
    board = ab.board()
    t = board.create("Someone's job", assignee="nobody-here")
    assert "no profile named 'nobody-here'" in t["warnings"][0]
    out = cli(ab.home, "create", "Another", "--assignee", "nobody-here")
    assert "no profile named 'nobody-here'" in out.stderr
    cards = [c for col in board.view()["columns"] for c in col["tasks"]]
    assert [c.get("assignee_unknown") for c in cards if c["id"] == t["id"]] == [True]
    ab.add_profile("worker", command="true")
    fine = board.create("Known", assignee="worker")
    assert "warnings" not in fine


def test_a_missing_base_branch_blocks_the_task_for_a_person_at_once(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("nb", workdir=str(repo), settings={"base": "release"})
    ab.add_profile("agent", command=sh("agentboard complete --summary done"))
    board = ab.board("nb")
    task = board.create("Work", assignee="agent")
    dispatcher()
    wait_for(lambda: board.show(task["id"])["status"] == "blocked", what="the task to be blocked")
    t = board.show(task["id"])
    assert t["block_kind"] == "needs_input"
    assert "no branch 'release'" in t["block_reason"] and "boards set" in t["block_reason"]
    assert not events(board, task["id"], "gave_up")
    git(repo, "branch", "release")
    board.unblock(task["id"])
    wait_for(lambda: board.show(task["id"])["status"] == "done", what="the task to finish from release")
    assert board.show(task["id"])["base_branch"] == "release"


def test_a_complete_held_for_verification_says_so(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("hold", workdir=str(repo))
    ab.add_profile("agent", command=sh("agentboard complete --summary done > complete-said.txt 2>&1"))
    board = ab.board("hold")
    task = board.create("Work", assignee="agent", verify=["true"])
    dispatcher()
    wait_for(lambda: board.show(task["id"])["status"] == "done", what="the task to be verified")
    said = (repo / ".worktrees" / task["id"] / "complete-said.txt").read_text()
    assert "held until verification passes" in said and "running" not in said


def test_show_with_an_unknown_board_names_it(ab):
    t = ab.board().create("x")
    out = cli(ab.home, "show", t["id"], "--board", "nope")
    assert out.returncode == 3 and "there is no board 'nope'" in out.stderr


def test_watch_completed_includes_tasks_finished_through_review(ab):
    board = ab.board()
    t = board.create("reviewed", assignee="w", review=True)
    board.claim(t["id"])
    board.complete(t["id"], summary="done")
    board.approve(t["id"])
    out = cli(ab.home, "watch", "--kinds", "completed", "--since", "0", "--once", "--json")
    assert out.returncode == 0, out.stderr
    assert '"approved"' in out.stdout and t["id"] in out.stdout


def test_the_mcp_server_reports_its_version(ab):
    env = {**os.environ, "AGENTBOARD_HOME": str(ab.home), "AGENTBOARD_BOARD": "default"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentboard", "mcp"], env=env)

    async def main() -> Any:
        async with Client(params, read_timeout_seconds=60) as client:
            return client.server_info

    info = anyio.run(main)
    assert info.name == "agentboard" and info.version == agentboard.__version__
