"""Bounded retries: crashes, the breaker's limits, protocol violations, rate limits, bad input."""

from __future__ import annotations

import json
import os
import shlex

import pytest

from .conftest import RESULT_OK, all_in, events, open_runs, wait_for


def _task(board, tid):
    detail = board.show(tid)
    return detail.get("task", detail)


def test_breaker_trips_at_the_default_limit(ab, board, dispatcher):
    ab.add_profile("crasher", command="sh -c 'echo boom >&2; exit 3'")
    t = board.create("always crashes", assignee="crasher")
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"blocked"}))
    task = _task(board, t["id"])
    assert task["block_kind"] == "gave_up"
    assert "global failure_limit of 2" in task["block_reason"]
    assert "exited with status 3" in task["last_failure_error"] and "boom" in task["last_failure_error"]
    assert [r["outcome"] for r in board.runs(t["id"])] == ["crashed", "crashed"]
    gave = events(board, t["id"], "gave_up")
    assert gave and gave[0]["payload"]["source"] == "global failure_limit" and gave[0]["payload"]["limit"] == 2


def test_breaker_with_max_retries_1(ab, board, dispatcher):
    ab.add_profile("crasher", command="sh -c 'exit 9'")
    t = board.create("crashes once", assignee="crasher", max_retries=1)
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"blocked"}))
    assert [r["outcome"] for r in board.runs(t["id"])] == ["crashed"]
    assert "task max_retries of 1" in _task(board, t["id"])["block_reason"]
    assert open_runs(ab.db) == 0


def test_protocol_violations_trip_the_breaker_after_three(ab, board, dispatcher):
    ab.add_profile("silent", command="sh -c 'echo working; exit 0'")
    t = board.create("finishes without reporting", assignee="silent", max_retries=10)
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"blocked"}))
    assert [r["outcome"] for r in board.runs(t["id"])] == ["protocol_violation"] * 3
    task = _task(board, t["id"])
    assert "3 protocol violations in a row" in task["block_reason"]
    assert "without reporting" in task["last_failure_error"]


def test_exit_75_is_a_rate_limit_not_a_failure(ab, board, dispatcher):
    ab.add_profile("limited", command="sh -c 'echo 429 Too Many Requests; exit 75'")
    t = board.create("rate limited", assignee="limited")
    dispatcher(rate_limit_cooldown=3600)
    wait_for(lambda: _task(board, t["id"])["status"] == "blocked", what="the task to wait out its rate limit")
    task = _task(board, t["id"])
    assert task["block_kind"] == "rate_limited" and task["consecutive_failures"] == 0
    assert task["cooldown_until"] > task["updated_at"] + 3000
    assert "resumes the task at" in task["block_reason"]
    assert [r["outcome"] for r in board.runs(t["id"])] == ["rate_limited"]


def test_a_rate_limited_task_is_resumed_by_the_dispatcher_when_its_cool_down_ends(ab, board, dispatcher):
    marker = ab.home / "limited-once"
    script = ab.home / "limited-once.sh"
    script.write_text(f"#!/bin/sh\nif [ -e {marker} ]; then\n"
                      "  echo '{\"success\": true, \"summary\": \"done after the limit\"}' > .board/result.json\n"
                      f"else\n  touch {marker}; echo '429 Too Many Requests'; exit 75\nfi\n")
    script.chmod(0o755)
    ab.add_profile("limited", command=str(script))
    t = board.create("rate limited once", assignee="limited")
    dispatcher(rate_limit_cooldown=2)
    wait_for(lambda: _task(board, t["id"])["status"] == "done", timeout=60, what="the task to resume and finish")
    assert [r["outcome"] for r in board.runs(t["id"])] == ["rate_limited", "completed"]
    unblocked = events(board, t["id"], "unblocked")
    assert unblocked and unblocked[0]["actor"] == "dispatcher"


def test_missing_command_is_a_spawn_failure_with_a_clear_reason(ab, board, dispatcher):
    ab.add_profile("ghost", command="no-such-agent-binary --go")
    ab.add_profile("fine", command=RESULT_OK)
    bad = board.create("needs a missing binary", assignee="ghost")
    good = board.create("unaffected", assignee="fine")
    dispatcher()
    wait_for(lambda: all_in(board, [bad["id"]], {"blocked"}) and all_in(board, [good["id"]], {"done"}))
    task = _task(board, bad["id"])
    assert "'no-such-agent-binary' was not found on PATH" in task["last_failure_error"]
    assert [r["outcome"] for r in board.runs(bad["id"])] == ["spawn_failed", "spawn_failed"]
    assert events(board, bad["id"], "spawn_failed")


def test_non_executable_command(ab, board, dispatcher, tmp_path):
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    ab.add_profile("noexec", command=str(script))
    t = board.create("not executable", assignee="noexec", max_retries=1)
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"blocked"}))
    assert "is not executable" in _task(board, t["id"])["last_failure_error"]


def test_the_same_error_in_several_tasks_is_systemic(ab, board, dispatcher):
    ab.add_profile("ghost", command="missing-agent-cli run {task_id}")
    ids = [board.create(f"t{i}", assignee="ghost", max_retries=5)["id"] for i in range(4)]
    dispatcher()
    wait_for(lambda: all_in(board, ids, {"blocked"}))
    for tid in ids:
        assert len(board.runs(tid)) == 1  # blocked at once, not after 5 tries each
        assert "systemic failure" in _task(board, tid)["block_reason"]


def test_workspace_that_cannot_be_created(ab, board, dispatcher, tmp_path):
    ab.add_profile("fine", command=RESULT_OK)
    (tmp_path / "a-file").write_text("not a folder")
    bad = tmp_path / "a-file" / "agentboard-cannot-exist"
    t = board.create("bad dir", assignee="fine", workspace=f"dir:{bad}", max_retries=1)
    other = board.create("good", assignee="fine")
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"blocked"}) and all_in(board, [other["id"]], {"done"}))
    assert f"cannot create workspace {bad}" in _task(board, t["id"])["last_failure_error"]


def test_worktree_on_a_folder_that_is_not_a_git_repository(ab, board, dispatcher, tmp_path):
    import shutil
    import subprocess

    import pytest

    from agentboard.domain.errors import InvalidInput

    plain = tmp_path / "plain"
    plain.mkdir()
    ab.add_profile("fine", command=RESULT_OK)
    # refused when the task is created ...
    with pytest.raises(InvalidInput, match="is not a git repository"):
        board.create("worktree please", assignee="fine", workspace=f"worktree:{plain}", max_retries=1)
    assert board.list() == []
    # ... and a repository that stopped being one by the time the task runs fails its start
    subprocess.run(["git", "init", "-q", str(plain)], check=True)
    t = board.create("worktree please", assignee="fine", workspace=f"worktree:{plain}", max_retries=1)
    shutil.rmtree(plain / ".git")
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"blocked"}))
    assert "is not a git repository" in _task(board, t["id"])["last_failure_error"]


def test_unknown_and_disabled_profiles_are_skipped_with_an_event(ab, board, dispatcher):
    from agentboard.kernel import profiles

    ab.add_profile("off", command=RESULT_OK)
    profiles.update(ab.db, "off", enabled=False)
    t1 = board.create("nobody", assignee="nosuchprofile")
    t2 = board.create("disabled", assignee="off")
    d = dispatcher(start=False)
    d.run_pass()
    d.run_pass()
    e1 = events(board, t1["id"], "profile_skipped")
    e2 = events(board, t2["id"], "profile_skipped")
    assert len(e1) == 1 and "does not exist" in e1[0]["payload"]["reason"]
    assert len(e2) == 1 and "disabled" in e2[0]["payload"]["reason"]
    assert all_in(board, [t1["id"], t2["id"]], {"ready"})


def _capped_profiles(ab, tmp_path):
    """Profiles ``one`` (one run at a time) and ``many``, whose workers wait until the returned
    gate file exists, then report success."""
    gate = tmp_path / "gate"
    hold = "sh -c " + shlex.quote(
        f"while [ ! -f {gate} ]; do sleep 0.05; done; "
        "echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json")
    ab.add_profile("one", command=hold, max_concurrency=1)
    ab.add_profile("many", command=hold)
    return gate


def test_caps_per_profile_and_global(ab, board, dispatcher, tmp_path):
    gate = _capped_profiles(ab, tmp_path)
    ids = [board.create(f"one {i}", assignee="one")["id"] for i in range(3)]
    ids += [board.create(f"many {i}", assignee="many")["id"] for i in range(5)]
    d = dispatcher(start=False, max_parallel=4)
    rep = d.run_pass()
    spawned = [s["profile"] for s in rep["spawned"]]
    assert len(spawned) == 4 and spawned.count("one") == 1
    assert len(d.run_pass()["spawned"]) == 0
    gate.write_text("go")
    d.start()
    wait_for(lambda: all_in(board, ids, {"done"}))


def test_a_profiles_cap_counts_the_tasks_another_host_runs(ab, board, dispatcher, tmp_path):
    """Where a cap exists a pass counts every host's running tasks (and only there: without a
    cap it reads none of theirs); here another host's run takes the capped profile's one place."""
    from agentboard.kernel import runs

    gate = _capped_profiles(ab, tmp_path)
    elsewhere, waiting = (board.create(f"one {i}", assignee="one")["id"] for i in range(2))
    free = board.create("many 0", assignee="many")["id"]
    runs.claim(ab.db, "default", elsewhere, host="host-elsewhere", pid=4242)
    d = dispatcher(start=False, max_parallel=4)
    rep = d.run_pass()
    assert [s["task"] for s in rep["spawned"]] == [free]
    assert board.show(waiting)["status"] == "ready"
    gate.write_text("go")
    d.start()
    wait_for(lambda: all_in(board, [free], {"done"}))


def test_a_capped_profile_with_a_long_queue_does_not_hold_back_the_tasks_behind_it(ab, board, dispatcher, tmp_path):
    """Thirty older tasks of a profile capped at one run at a time lead the queue; the task of
    another profile behind them still starts in the same pass (however far down it waits)."""
    gate = _capped_profiles(ab, tmp_path)
    ids = [board.create(f"one {i}", assignee="one")["id"] for i in range(30)]
    other = board.create("many 0", assignee="many")["id"]
    d = dispatcher(start=False, max_parallel=4)
    rep = d.run_pass()
    assert sorted(s["profile"] for s in rep["spawned"]) == ["many", "one"]
    assert board.show(other)["status"] == "running"
    gate.write_text("go")
    d.start()
    wait_for(lambda: all_in(board, [*ids, other], {"done"}))


def test_worker_env_has_the_task_identity_and_no_dispatcher_secrets(ab, board, dispatcher, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTBOARD_LLM_API_KEY", "sk-dispatcher-secret")
    monkeypatch.setenv("AGENTBOARD_TOKEN", "dashboard-session-token")
    monkeypatch.setenv("PGPASSWORD", "hunter2")
    out = tmp_path / "env.txt"
    ab.add_profile("envdump", command="sh -c " + shlex.quote(
        f"env > {out}; echo '{{\"success\": true, \"summary\": \"ok\"}}' > .board/result.json"),
        env={"MY_AGENT_FLAG": "on"})
    t = board.create("dump env", assignee="envdump", tenant="acme")
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"done"}))
    env = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    run = board.runs(t["id"])[0]
    assert env["AGENTBOARD_TASK"] == t["id"] and env["AGENTBOARD_RUN_ID"] == str(run["id"])
    assert env["AGENTBOARD_BOARD"] == "default" and env["AGENTBOARD_TENANT"] == "acme"
    assert env["AGENTBOARD_WORKSPACE"] == run["workspace_path"] and env["MY_AGENT_FLAG"] == "on"
    assert "AGENTBOARD_LLM_API_KEY" not in env and "PGPASSWORD" not in env
    assert "dashboard-session-token" not in out.read_text() and "sk-dispatcher-secret" not in out.read_text()
    assert any(os.access(os.path.join(p, "agentboard"), os.X_OK) for p in env["PATH"].split(":"))


def test_a_task_a_person_moves_to_todo_stays_held_through_the_dispatchers_passes_until_moved_to_ready(ab, board):
    """The safety net promotes a todo task whose parents are done (a missed promotion); one a
    person put in todo is held there — whatever its assignee — until a person moves it to ready."""
    from agentboard.dispatch.dispatcher import Dispatcher

    ab.add_profile("w", command=RESULT_OK)
    ab.add_profile("other", command="true")
    t = board.create("hold me", assignee="w")
    held = board.set_status(t["id"], "todo", actor="ana")
    assert (held["status"], held["block_kind"]) == ("todo", "held")
    assert held["block_reason"] == "held in todo by ana: move it to ready to let it run"
    board.assign(t["id"], "other")  # a new assignee does not release it
    ab.settings.dispatch_interval = 0  # the safety net on every pass
    d = Dispatcher(ab.db, ab.settings)
    try:
        for _ in range(3):
            d.run_pass()
        assert board.show(t["id"])["status"] == "todo"
        board.assign(t["id"], "w")
        ready = board.set_status(t["id"], "ready", actor="ana")
        assert (ready["status"], ready["block_kind"], ready["block_reason"]) == ("ready", None, None)
        d.run_pass()
        wait_for(lambda: d.run_pass() is not None and board.show(t["id"])["status"] == "done", timeout=60,
                 what=f"it ran ({board.show(t['id'])['status']})")
    finally:
        d.stop()
    # a todo task with no hold whose parents are done is still promoted by the safety net
    u = board.create("missed promotion", assignee="w")
    ab.db.write(lambda tx: tx.execute("UPDATE tasks SET status = 'todo' WHERE id = :id", {"id": u["id"]}))
    from agentboard.kernel import dispatching
    assert dispatching.promote_pending(ab.db, "default") == [u["id"]]


def test_a_worker_that_ends_its_turn_once_its_budget_is_spent_is_not_nudged_its_run_closes_for_the_budget(
        ab, board, tmp_path):
    """Told to stop (its heartbeat answers ``stop``), an agent ends its turn without a report:
    the run closes as the budget's (blocked, not a counted protocol violation) and no process is
    started again in the spent scope."""
    from agentboard.dispatch.dispatcher import Dispatcher
    from agentboard.kernel import budgets

    go = tmp_path / "go"
    ab.add_profile("w", command="sh -c " + shlex.quote(f"while [ ! -e {go} ]; do sleep 0.05; done; exit 0"))
    t = board.create("spends", assignee="w")
    d = Dispatcher(ab.db, ab.settings)
    try:
        d.run_pass()
        wait_for(lambda: board.show(t["id"])["status"] == "running", what="the worker running")
        budgets.set_budget(ab.db, "board", "default", budgets.Limits.build(max_runs=0))  # spent now
        go.write_text("")
        wait_for(lambda: d.run_pass() is not None and board.show(t["id"])["status"] != "running",
                 timeout=60, what="the run closed")
    finally:
        d.stop()
    shown = board.show(t["id"])
    assert (shown["status"], shown["block_kind"]) == ("blocked", "budget"), shown
    runs = [r for r in shown["runs"] if not r.get("synthetic")]
    assert [r["outcome"] for r in runs] == ["blocked"]
    assert shown["consecutive_failures"] == 0
    kinds = [e["kind"] for e in events(board, t["id"])]
    assert "nudged" not in kinds and kinds.count("spawned") == 1, kinds


def test_a_result_file_may_carry_the_tasks_one_line_result_and_a_blank_one_is_refused(ab, board, dispatcher):
    import shlex

    ab.add_profile("answers", command="sh -c " + shlex.quote(
        "echo '{\"success\": true, \"summary\": \"counted the lines\", \"result\": \"4,211 lines\"}' "
        "> .board/result.json"))
    ab.add_profile("blank", command="sh -c " + shlex.quote(
        "echo '{\"success\": true, \"summary\": \"counted\", \"result\": \" \"}' > .board/result.json"))
    t = board.create("count the lines", assignee="answers")
    b = board.create("count again", assignee="blank")
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"done"}) and all_in(board, [b["id"]], {"done", "review", "blocked"}))
    assert _task(board, t["id"])["result"] == "4,211 lines"
    errors = [e for e in events(board, b["id"]) if "$.result: must be a non-empty string" in json.dumps(e)]
    assert errors, events(board, b["id"])


def test_a_program_removed_or_installed_on_path_is_found_as_it_is_now(tmp_path):
    """A program found on a PATH is remembered for a few seconds (a burst starts the same one
    many times), but never past its removal, its loss of the execute bit or its replacement by a
    folder; and a program not found is looked for again at once."""
    from agentboard.agentcli import AdapterError, resolve_executable

    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    path = f"{first}{os.pathsep}{second}"
    with pytest.raises(AdapterError, match="was not found on PATH"):
        resolve_executable("ab-test-agent", path, tmp_path)
    late = second / "ab-test-agent"
    late.write_text("#!/bin/sh\nexit 0\n")
    late.chmod(0o755)
    assert resolve_executable("ab-test-agent", path, tmp_path) == str(late)  # installed since: found now
    early = first / "ab-test-agent"
    early.write_text("#!/bin/sh\nexit 0\n")
    early.chmod(0o755)
    late.chmod(0o644)  # no longer a program: the other one is
    assert resolve_executable("ab-test-agent", path, tmp_path) == str(early)
    early.unlink()
    late.chmod(0o755)
    assert resolve_executable("ab-test-agent", path, tmp_path) == str(late)
    late.unlink()
    late.mkdir()
    with pytest.raises(AdapterError, match="was not found on PATH"):
        resolve_executable("ab-test-agent", path, tmp_path)
