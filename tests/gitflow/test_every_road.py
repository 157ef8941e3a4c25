"""Every road to done passes the review and verification gates and integrates: a reviewed
worktree task approved through any surface (the CLI, REST single and bulk — the dashboard's own
routes —, the MCP tools, the reviewer agent's verdict, the Python API) ends with its branch on
the base branch and an ``integrated`` event; a task without review is merged when its worker
finishes; a person's done that would skip a task's review or checks is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from api.conftest import Api, start_api
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from agentboard.domain.errors import Conflict

from .conftest import cli, events, git, make_repo, sh, wait_for

# writes a file named after its task on the task's branch, commits it and reports
AGENT = ('f="$AGENTBOARD_TASK.txt"; echo "work of $AGENTBOARD_TASK" > "$f" && git add "$f" && '
         'git commit -qm "work of $AGENTBOARD_TASK" && agentboard complete --summary "wrote $f"')


def _on_base(repo: Path, branch: str, base: str = "main") -> bool:
    return subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", branch, base]).returncode == 0


def _mcp_complete(ab: Any, board: str, task_id: str) -> dict[str, Any]:
    """A person's `agentboard mcp` (on the home, no run) finishing the task named by AGENTBOARD_TASK."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")},
           "AGENTBOARD_HOME": str(ab.settings.home), "AGENTBOARD_BOARD": board, "AGENTBOARD_TASK": task_id,
           "AGENTBOARD_PROFILE": "person"}
    if ab.settings.database_url:
        env["AGENTBOARD_DATABASE_URL"] = ab.settings.database_url
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentboard", "mcp"], env=env)

    async def main() -> Any:
        async with Client(params, read_timeout_seconds=60) as client:
            return await client.call_tool("kanban_complete", {"summary": "looked good"})

    result = anyio.run(main)
    assert not result.is_error, result.content
    return dict(result.structured_content or {})


def _surfaces(ab: Any, api: Api, board: Any) -> dict[str, Callable[[str], Any]]:
    """One approval per surface, each given the id of a task in review."""
    from agentboard.dispatch import finish

    admin = api.as_admin

    def ok(resp: Any) -> Any:
        assert resp.status_code == 200, resp.text
        return resp.json()

    def run_cli(*args: str) -> Any:
        out = cli(ab.settings.home, *args)
        assert out.returncode == 0, out.stderr
        return out.stdout

    return {
        "cli review --approve": lambda t: run_cli("review", t, "--approve"),
        "cli complete": lambda t: run_cli("complete", t),
        "REST PATCH status done (the drawer's Approve, a drag)": lambda t: ok(
            admin.patch(f"/api/tasks/{t}", json={"status": "done"})),
        "REST bulk status done (Move to… Done)": lambda t: ok(
            admin.post("/api/tasks/bulk", json={"ids": [t], "action": "status", "status": "done"})),
        "REST review approved": lambda t: ok(admin.post(f"/api/tasks/{t}/review", json={"verdict": "approved"})),
        "REST complete by a person": lambda t: ok(admin.post(f"/api/tasks/{t}/complete", json={"summary": "ok"})),
        "MCP kanban_complete": lambda t: _mcp_complete(ab, "flow", t),
        "the reviewer agent's verdict": lambda t: finish.apply_verdict(
            ab.db, "flow", t, {"verdict": "approved", "score": 90, "summary": "good work"}),
        "Board.set_status": lambda t: board.set_status(t, "done"),
        "Board.update": lambda t: board.update(t, status="done"),
        "Board.approve": lambda t: board.approve(t),
        "Board.complete": lambda t: board.complete(t),
    }


def test_every_surface_approving_a_reviewed_worktree_task_merges_its_branch(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo), settings={"integrate": "merge", "max_parallel": 20})
    ab.add_profile("agent", command=sh(AGENT), max_concurrency=20)
    board = ab.board("flow")
    with start_api(ab) as api:
        surfaces = _surfaces(ab, api, board)
        tasks = {name: board.create(f"work for {name}", assignee="agent", review=True)["id"] for name in surfaces}
        dispatcher()
        wait_for(lambda: all(board.show(t)["status"] == "review" for t in tasks.values()), timeout=300,
                 what="every task to reach review")
        for name, approve in surfaces.items():
            tid = tasks[name]
            shown = board.show(tid)
            branch = shown["branch_name"]
            assert branch and not _on_base(repo, branch), (name, shown["workspace_kind"])
            approve(tid)
            t = board.show(tid)
            assert (t["status"], t["integration"]) == ("done", "merged"), (name, t["status"], t.get("block_reason"))
            assert _on_base(repo, branch), f"{name}: the branch is not on main"
            assert events(board, tid, "approved"), name
            integrated = events(board, tid, "integrated")
            assert len(integrated) == 1 and integrated[0]["payload"]["outcome"] == "merged", name
    assert sorted(p.name for p in repo.glob("t_*.txt")) == sorted(f"{t}.txt" for t in tasks.values())
    assert git(repo, "status", "--porcelain").strip() == ""


def test_a_task_without_review_on_a_merge_board_is_merged_when_its_worker_finishes(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo), settings={"integrate": "merge"})
    ab.add_profile("agent", command=sh(AGENT))
    board = ab.board("flow")
    tid = board.create("document it", assignee="agent", verify=["test -f $AGENTBOARD_TASK.txt"])["id"]
    dispatcher()
    # the merge is made before the task is done; its record follows the completion
    wait_for(lambda: board.show(tid)["integration"], what="the task's integration to be recorded")
    t = board.show(tid)
    assert (t["status"], t["integration"]) == ("done", "merged")
    assert _on_base(repo, t["branch_name"]) and (repo / f"{tid}.txt").is_file()
    kinds = [e["kind"] for e in events(board, tid)]
    # verified first, then done, then merged
    assert kinds.index("verified") < kinds.index("completed") < kinds.index("integrated")
    done = next(col for col in board.view()["columns"] if col["status"] == "done")
    card = next(c for c in done["tasks"] if c["id"] == tid)
    assert card["integration"] == "merged"  # the card's "⎇ merged" pill


@pytest.mark.parametrize("mode", ["merge", "squash", "rebase"])
def test_a_landed_tasks_diff_is_the_work_that_landed_whatever_moved_on_the_base_since(
        ab, tmp_path, dispatcher, mode):
    from agentboard.dispatch import diffs

    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo), settings={"integrate": mode})
    ab.add_profile("agent", command=sh(AGENT))
    board = ab.board("flow")
    tid = board.create("document it", assignee="agent")["id"]
    dispatcher()
    wait_for(lambda: board.show(tid)["integration"], what="the task's integration to be recorded")
    (repo / "later.txt").write_text("someone else, later\n")
    git(repo, "add", "later.txt")
    git(repo, "commit", "-qm", "later on main")
    shown = diffs.task_diff(ab.db, "flow", tid)
    assert [f["path"] for f in shown["files"]] == [f"{tid}.txt"], shown["files"]
    assert shown["how"].startswith("what landed on the base")
    assert f"+work of {tid}" in diffs.raw_diff(ab.db, "flow", tid)[0]
    # the branch facts agree with the diff: what landed, not the nothing left to land
    facts, how = shown["git"], mode.rstrip("e") + "ed"  # merged, squashed, rebased
    assert (facts["landed"], facts["files"], facts["insertions"]) == (how, 1, 1), facts
    assert f"landed on main ({how}): 1 file(s) +1 -0" in facts["summary"]
    shown_cli = cli(ab.settings.home, "show", tid, "--board", "flow")
    assert f"landed on main ({how}): 1 file(s) +1 -0" in shown_cli.stdout, shown_cli.stdout + shown_cli.stderr


def test_a_board_that_wants_review_before_merging_keeps_the_branch_and_says_so(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo))
    out = cli(ab.settings.home, "boards", "set", "flow", "--integrate", "merge", "--review-before-integrate")
    assert out.returncode == 0 and "merge (reviewed tasks only)" in out.stdout, out.stderr
    ab.add_profile("agent", command=sh(AGENT))
    board = ab.board("flow")
    tid = board.create("document it", assignee="agent")["id"]
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "done", what="the task to be done")
    t = board.show(tid)
    assert t["integration"] == "left" and not _on_base(repo, t["branch_name"])
    left = events(board, tid, "integration_left")
    assert left and "reviewed tasks only" in left[0]["payload"]["reason"]


def test_a_finished_task_whose_merge_is_refused_is_blocked_with_the_reason(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo", {"notes.txt": "one\n"})
    ab.create_board("flow", workdir=str(repo), settings={"integrate": "merge"})
    edit = "echo agent > notes.txt && git commit -qam 'agent edit' && agentboard complete --summary edited"
    ab.add_profile("agent", command=sh(edit))
    board = ab.board("flow")
    (repo / "notes.txt").write_text("the owner's unsaved work\n")  # in the way of the merge
    before = git(repo, "rev-parse", "main").strip()
    tid = board.create("edit the notes", assignee="agent")["id"]
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "blocked", what="the task to be blocked")
    t = board.show(tid)
    assert (t["block_kind"], t["integration"]) == ("needs_input", "refused")
    assert "uncommitted changes in files this task changes (notes.txt)" in t["block_reason"]
    assert git(repo, "rev-parse", "main").strip() == before
    assert (repo / "notes.txt").read_text() == "the owner's unsaved work\n"
    assert events(board, tid, "integration_refused") and not events(board, tid, "completed")


@pytest.mark.parametrize("kind", ["checks", "review"])
def test_a_person_cannot_mark_done_a_task_whose_checks_or_review_it_would_skip(ab, tmp_path, kind):
    board = ab.board()
    ab.add_profile("agent", command="true")
    extra: dict[str, Any] = {"verify": ["python -m pytest -q"]} if kind == "checks" else {"review": True}
    tid = board.create("guarded", assignee="agent", **extra)["id"]
    board.block(tid, "waiting for a person")
    before = board.show(tid)
    said = "has checks (`python -m pytest -q`) that must pass" if kind == "checks" else "requires review"
    with start_api(ab) as api:
        r = api.as_admin.patch(f"/api/tasks/{tid}", json={"status": "done"})
        assert r.status_code == 409 and said in r.json()["error"]["message"]
        r = api.as_admin.post("/api/tasks/bulk", json={"ids": [tid], "action": "status", "status": "done"})
        assert r.status_code == 200 and r.json()["results"][0]["error"]["code"] == "conflict"
    out = cli(ab.settings.home, "complete", tid)
    assert out.returncode == 4 and said in out.stderr and len(out.stderr.strip().splitlines()) == 1
    for move in (lambda: board.set_status(tid, "done"), lambda: board.update(tid, status="done"),
                 lambda: board.complete(tid)):
        with pytest.raises(Conflict, match=said.replace("(", r"\(").replace(")", r"\)")):
            move()
    after = board.show(tid)
    assert (after["status"], after["updated_at"]) == (before["status"], before["updated_at"])
    assert not events(board, tid, "completed")
