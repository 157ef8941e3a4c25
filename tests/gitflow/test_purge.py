"""What a purge leaves on disk: `archive --purge` removes a task's worker logs, its clean worktree
and its merged `ab/` branch, keeps (and names) what holds work, and `gc` finds what a purge
left in the board's target once the task is gone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from .conftest import cli, git, make_repo, sh, wait_for

# commits a file named after its task on its branch, then reports
COMMIT = ("echo \"work of $AGENTBOARD_TASK\" > \"$AGENTBOARD_TASK.txt\" && git add -A && "
          "git commit -qm \"work of $AGENTBOARD_TASK\" && agentboard complete --summary committed")
# reports, changing nothing: the test leaves an edit in its worktree once it is done (what a worker
# leaves uncommitted is committed on its branch when it exits, docs/git-workflow.md)
MESSY = "agentboard complete --summary 'looked around'"


def code_board(ab: Any, tmp_path: Path) -> tuple[Any, Path]:
    repo = make_repo(tmp_path / "repo")
    ab.create_board("code", workdir=str(repo))
    ab.add_profile("committer", command=sh(COMMIT))
    ab.add_profile("messy", command=sh(MESSY))
    return ab.board("code"), repo


def run_to_done(board: Any, dispatcher: Any, *specs: tuple[str, str]) -> list[str]:
    ids = [board.create(title, assignee=who)["id"] for title, who in specs]
    dispatcher()
    wait_for(lambda: all(board.show(t)["status"] == "done" for t in ids), what="the tasks to be done", timeout=60)
    return ids


def branches(repo: Path) -> set[str]:
    return set(git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split())


def logs_of(ab: Any, task_id: str) -> list[Path]:
    return sorted((ab.home / "boards" / "code" / "logs").glob(f"{task_id}.*"))


def purge(ab: Any, task_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    out = cli(ab.home, "archive", task_id, "--purge", *args)
    assert out.returncode == 0, out.stderr
    return out


def gc(ab: Any, *args: str) -> dict[str, Any]:
    out = cli(ab.home, "gc", "--board", "code", "--json", *args)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_purging_a_task_whose_branch_is_merged_removes_its_worktree_branch_and_logs(ab, tmp_path, dispatcher):
    board, repo = code_board(ab, tmp_path)
    merged, squashed = run_to_done(board, dispatcher, ("merged by hand", "committer"), ("squashed", "committer"))
    wt = {t: repo / ".worktrees" / t for t in (merged, squashed)}
    assert all(p.is_dir() for p in wt.values()) and {f"ab/{merged}", f"ab/{squashed}"} <= branches(repo)
    assert [p.name for p in logs_of(ab, merged)][:1] == [f"{merged}.log"]
    # the owner merges one branch and squashes the other onto main
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", f"ab/{merged}")
    git(repo, "merge", "-q", "--squash", f"ab/{squashed}")
    git(repo, "commit", "-qm", "squashed")

    out = json.loads(purge(ab, merged, "--json").stdout)
    assert out["purged"] is True and out["kept"] == []
    assert out["branches_removed"] == [{"repo": str(repo), "branch": f"ab/{merged}"}]
    assert str(wt[merged]) in out["files_removed"] and str(ab.home / "boards/code/logs" / f"{merged}.log") in \
        out["files_removed"]
    assert not wt[merged].exists() and f"ab/{merged}" not in branches(repo) and logs_of(ab, merged) == []
    assert git(repo, "worktree", "list").count(".worktrees") == 1  # git forgot the worktree too

    text = purge(ab, squashed).stdout
    assert f"removed branch ab/{squashed} in {repo}" in text and f"removed {wt[squashed]}" in text
    assert not wt[squashed].exists() and f"ab/{squashed}" not in branches(repo) and logs_of(ab, squashed) == []
    # the owner's checkout and history are untouched, and gc finds nothing left
    assert git(repo, "status", "--porcelain") == "" and (repo / f"{merged}.txt").exists()
    rep = gc(ab, "--dry-run")
    assert (rep["worktrees_removed"], rep["branches_removed"], rep["kept"]) == ([], [], [])


def test_purging_a_task_with_unmerged_commits_keeps_its_branch_and_says_how_to_remove_it(ab, tmp_path, dispatcher):
    board, repo = code_board(ab, tmp_path)
    unmerged, messy = run_to_done(board, dispatcher, ("not merged", "committer"), ("uncommitted", "messy"))
    (repo / ".worktrees" / messy / "wip.txt").write_text("wip\n")  # an edit left in its worktree since
    tip = git(repo, "rev-parse", f"ab/{unmerged}").strip()

    text = purge(ab, unmerged).stdout
    # its worktree holds no uncommitted work: it goes, its commit stays on the branch
    assert not (repo / ".worktrees" / unmerged).exists() and logs_of(ab, unmerged) == []
    assert git(repo, "rev-parse", f"ab/{unmerged}").strip() == tip
    assert f"kept {repo}: branch ab/{unmerged}: 1 commit(s) not merged into main" in text
    assert f"git -C {repo} branch -D ab/{unmerged}" in text

    out = json.loads(purge(ab, messy, "--json").stdout)
    [kept] = out["kept"]
    wt = repo / ".worktrees" / messy
    assert kept["path"] == str(wt) and "1 uncommitted change(s)" in kept["why"] and f"ab/{messy}" in kept["why"]
    assert f"git -C {repo} worktree remove --force {wt}" in kept["how"]
    assert (wt / "wip.txt").read_text() == "wip\n" and f"ab/{messy}" in branches(repo)
    assert out["branches_removed"] == [] and logs_of(ab, messy) == []
    # gc keeps both too, and says so each time
    rep = gc(ab)
    whys = {(k["path"], k.get("branch")): k["why"] for k in rep["kept"]}
    assert "1 uncommitted change(s)" in whys[(str(wt), f"ab/{messy}")]
    assert "1 commit(s) not merged into main" in whys[(str(repo), f"ab/{unmerged}")]
    assert rep["branches_removed"] == [] and rep["worktrees_removed"] == [] and wt.is_dir()
    # once the owner merges the branch, gc removes it
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", f"ab/{unmerged}")
    rep = gc(ab)
    assert rep["branches_removed"] == [{"repo": str(repo), "branch": f"ab/{unmerged}", "task": unmerged}]


def test_gc_dry_run_lists_an_orphaned_worktree_branch_and_log_and_gc_removes_them(ab, tmp_path, dispatcher):
    from agentboard.kernel import purge as kernel_purge

    board, repo = code_board(ab, tmp_path)
    merged, unmerged = run_to_done(board, dispatcher, ("merged", "committer"), ("not merged", "committer"))
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", f"ab/{merged}")
    # purged the way an older version did: the rows only, everything on disk left behind
    for t in (merged, unmerged):
        kernel_purge.purge(ab.db, "code", t, home=ab.home)
    wt = {t: repo / ".worktrees" / t for t in (merged, unmerged)}
    assert all(p.is_dir() for p in wt.values()) and logs_of(ab, merged)

    shown = cli(ab.home, "gc", "--board", "code", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0].startswith("would remove 0 scratch workspace(s), 2 worktree(s), 1 branch(es)")
    assert f"would remove {wt[merged]}" in shown.stdout
    assert f"would remove branch ab/{merged} in {repo} (task {merged} no longer exists)" in shown.stdout
    assert f"kept {repo}: branch ab/{unmerged} of task {unmerged}, which no longer exists: 1 commit(s)" in shown.stdout
    assert f"git -C {repo} branch -D ab/{unmerged}" in shown.stdout
    dry = gc(ab, "--dry-run")
    assert all(p.is_dir() for p in wt.values()) and f"ab/{merged}" in branches(repo) and logs_of(ab, merged)

    rep = gc(ab)
    assert sorted(rep["worktrees_removed"]) == sorted(dry["worktrees_removed"]) == sorted(map(str, wt.values()))
    assert rep["branches_removed"] == dry["branches_removed"] == [
        {"repo": str(repo), "branch": f"ab/{merged}", "task": merged}]
    assert rep["logs_removed"] == dry["logs_removed"] >= 2
    assert not any(p.exists() for p in wt.values()) and logs_of(ab, merged) == logs_of(ab, unmerged) == []
    assert f"ab/{merged}" not in branches(repo) and f"ab/{unmerged}" in branches(repo)
    # what stays is said again, and nothing else is found
    again = gc(ab)
    assert (again["worktrees_removed"], again["branches_removed"], again["logs_removed"]) == ([], [], 0)
    assert [k["branch"] for k in again["kept"]] == [f"ab/{unmerged}"]


def test_gc_keeps_an_orphaned_branch_a_task_starts_from_and_never_touches_another_homes_branches(ab, tmp_path):
    from agentboard.dispatch import gc as gcmod
    from agentboard.kernel import purge as kernel_purge

    board, repo = code_board(ab, tmp_path)
    gone = board.create("purged long ago")["id"]
    git(repo, "branch", f"ab/{gone}")  # its branch: nothing on it but main
    kernel_purge.purge(ab.db, "code", gone, home=ab.home)
    # a task of another home working in the same repository: unknown here, and not ours to remove
    git(repo, "branch", "ab/t_0badc0de")
    (repo / ".worktrees").mkdir()
    git(repo, "worktree", "add", "-q", str(repo / ".worktrees" / "t_0badc0de"), "ab/t_0badc0de")
    child = board.create("builds on it")
    ab.db.write(lambda tx: tx.execute("UPDATE tasks SET branch_name = 'mine', base_branch = :b WHERE id = :i",
                                      {"b": f"ab/{gone}", "i": child["id"]}))
    rep = gcmod.collect(ab.db, ab.home, boards=["code"])
    [kept] = rep["kept"]
    assert kept["branch"] == f"ab/{gone}" and f"task {child['id']} works on or from it" in kept["why"]
    assert rep["branches_removed"] == [] and rep["worktrees_removed"] == [] and f"ab/{gone}" in branches(repo)
    board.archive(child["id"])
    rep = gcmod.collect(ab.db, ab.home, boards=["code"])
    assert rep["branches_removed"] == [{"repo": str(repo), "branch": f"ab/{gone}", "task": gone}]
    assert rep["kept"] == [] and rep["worktrees_removed"] == []
    assert "ab/t_0badc0de" in branches(repo) and (repo / ".worktrees" / "t_0badc0de").is_dir()


def test_a_purge_over_rest_removes_the_merged_worktree_task_and_answers_what_it_kept(ab, tmp_path, dispatcher):
    from api.conftest import start_api

    board, repo = code_board(ab, tmp_path)
    merged, unmerged = run_to_done(board, dispatcher, ("merged", "committer"), ("not merged", "committer"))
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", f"ab/{merged}")
    with start_api(ab) as api:
        r = api.as_admin.delete(f"/api/tasks/{merged}")
        assert r.status_code == 200, r.text
        assert r.json()["branches_removed"] == [{"repo": str(repo), "branch": f"ab/{merged}"}]
        assert r.json()["kept"] == [] and r.json()["workspace"]["branch"] == f"ab/{merged}"
        r = api.as_admin.delete(f"/api/tasks/{unmerged}")
        assert r.status_code == 200, r.text
        [kept] = r.json()["kept"]
    assert kept["branch"] == f"ab/{unmerged}" and "not merged into main" in kept["why"]
    assert not (repo / ".worktrees" / merged).exists() and not (repo / ".worktrees" / unmerged).exists()
    assert branches(repo) >= {f"ab/{unmerged}"} and f"ab/{merged}" not in branches(repo)
    [event] = [e for e in board.events(0, limit=1000) if e["kind"] == "purged" and e["payload"]["task"] == merged]
    assert event["payload"]["workspace"]["path"] == str(repo / ".worktrees" / merged)


def test_deleting_a_board_for_good_removes_its_tasks_merged_worktrees_and_branches_and_keeps_the_rest(
        ab, tmp_path, dispatcher):
    """A board's home folder goes with it; its worktree tasks also left worktrees and ``ab/``
    branches in its target: the delete removes those a purge would, and names what it kept."""
    board, repo = code_board(ab, tmp_path)
    merged, unmerged = run_to_done(board, dispatcher, ("merged", "committer"), ("kept", "committer"))
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", f"ab/{merged}")

    out = cli(ab.home, "boards", "rm", "code", "--delete", "--json")
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert sorted(w["id"] for w in answer["worktrees"]) == sorted([merged, unmerged])
    assert {"repo": str(repo), "branch": f"ab/{merged}"} in answer["branches_removed"]
    assert not (repo / ".worktrees" / merged).exists() and f"ab/{merged}" not in branches(repo)
    # the unmerged branch holds the only copy of its commit: kept, with the command that removes it
    assert f"ab/{unmerged}" in branches(repo)
    (kept,) = [k for k in answer["kept"] if k.get("branch") == f"ab/{unmerged}"]
    assert f"git -C {repo} branch -D ab/{unmerged}" in kept["how"]
    assert git(repo, "status", "--porcelain") == ""
