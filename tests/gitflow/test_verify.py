"""Verification retried with back-off, its failures in the next attempt's context, and the
commands changed after creation."""

from __future__ import annotations

from pathlib import Path

from .conftest import cli, events, make_repo, sh, wait_for


def test_failed_verification_is_retried_after_growing_back_off_delays(ab, tmp_path, dispatcher):
    repo = make_repo(tmp_path / "repo")
    count = tmp_path / "count"
    check = (f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}; "
             "if [ $n -lt 2 ]; then echo \"check failed on try $n\"; exit 1; fi")
    ab.create_board("bo", workdir=str(repo))
    ab.add_profile("agent", command=sh("n=$(date +%s%N); cat .board/history.md > seen-history-$n.txt; "
                                       "cp .board/context.md seen-context-$n.txt; "
                                       "echo $n >> attempts.txt && git add attempts.txt && git commit -qm attempt; "
                                       "agentboard complete --summary done"))
    board = ab.board("bo")
    task = board.create("Pass the check", assignee="agent", verify=[check])
    dispatcher(verify_backoff=(1.0, 3.0, 9.0), verify_backoff_jitter=0.0)
    wait_for(lambda: board.show(task["id"])["status"] == "done", timeout=180, what="the task to pass on its third try")

    failed = events(board, task["id"], "verify_failed")
    assert [e["payload"]["retry_in"] for e in failed] == [1.0, 3.0]
    claims = events(board, task["id"], "claimed")
    assert len(claims) == 3, "the default failure limit (2) did not give up: back-off allows more tries"
    for fail, next_claim in zip(failed, claims[1:], strict=True):
        # the next attempt was not claimed before its back-off ran out (recorded times, no timing assertion)
        assert next_claim["created_at"] >= fail["created_at"] + fail["payload"]["retry_in"] - 0.05
    seen = sorted(Path(board.show(task["id"])["workspace_path"]).glob("seen-history-*.txt"))
    assert len(seen) == 3
    third = seen[-1].read_text()
    assert "check failed on try 0" in third and "check failed on try 1" in third
    # a retry starts on the same branch with the earlier attempts' commits, and its context says so
    contexts = sorted(Path(board.show(task["id"])["workspace_path"]).glob("seen-context-*.txt"))
    assert "This is a retry" not in contexts[0].read_text()
    assert f"This is a retry: the branch ab/{task['id']} keeps the commits of the earlier attempts (2 commit(s)" \
        in contexts[-1].read_text()


def test_edit_verify_changes_the_commands(ab, tmp_path):
    ab.create_board("ev")
    task = ab.board("ev").create("Something", verify=["false"])
    out = cli(ab.home, "edit", task["id"], "--verify", "true", "--verify", "echo ok")
    assert out.returncode == 0, out.stderr
    assert ab.board("ev").show(task["id"])["verify"] == ["true", "echo ok"]
    cleared = cli(ab.home, "edit", task["id"], "--verify", "")
    assert cleared.returncode == 0, cleared.stderr
    assert ab.board("ev").show(task["id"])["verify"] == []


def test_the_board_names_the_projects_virtualenv_with_env_setup(ab, tmp_path, dispatcher):
    import shutil

    from .conftest import make_project

    repo = make_project(tmp_path / "proj")
    (repo / "envs").mkdir()
    shutil.move(str(repo / ".venv"), str(repo / "envs" / "proj"))  # not where it would be detected
    ab.create_board("envs", workdir=str(repo))
    bad = cli(ab.home, "boards", "set", "envs", "--env-setup", "envs/nope")
    assert bad.returncode == 2 and "not a virtualenv" in bad.stderr
    ok = cli(ab.home, "boards", "set", "envs", "--env-setup", "envs/proj")
    assert ok.returncode == 0, ok.stderr
    ab.add_profile("agent", command=sh("python -c 'import projmarker' && agentboard complete --summary ok"))
    board = ab.board("envs")
    task = board.create("Use the project's python", assignee="agent",
                        verify=['python -c "import projmarker, sys; print(sys.prefix)"'])
    dispatcher()
    wait_for(lambda: board.show(task["id"])["status"] == "done", what="the task to pass in the project's env")
    run = board.show(task["id"])["runs"][-1]
    tail = run["metadata"]["verification"]["commands"][0]["output_tail"]
    assert tail.strip() == str(repo / "envs" / "proj")
