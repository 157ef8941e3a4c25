"""Diagnostics find each condition on a board built to have it, and the fix command each one
suggests clears it (the real CLI on a real SQLite home; git, directories and pids are real)."""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

import pytest
from cli.conftest import task_id
from testenv import wait_for

import agentboard
from agentboard.kernel import runs as kr


def _findings(cli, *args):
    r = cli("diagnostics", "--json", *args)
    assert r.code == 0, r.err
    return r.json()


def _of(found, kind, task=None):
    return [f for f in found if f["kind"] == kind and (task is None or f["task_id"] == task)]


def _fix(cli, finding, monkeypatch=None):
    """Run a finding's fix command: an agentboard verb through the CLI, anything else in a shell."""
    argv = shlex.split(finding["fix"])
    if argv[0] == "agentboard":
        r = cli(*argv[1:])
        assert r.code == 0, (finding["fix"], r.err)
    else:
        subprocess.run(argv, check=True, capture_output=True)


def _db(home: Path):
    return agentboard.connect(str(home))


@pytest.fixture
def seeded(cli):
    cli("profiles", "add", "w", "--command", "true")
    return cli


def test_a_ready_task_for_a_missing_profile_is_found_and_assigning_it_clears_it(seeded):
    cli = seeded
    t = task_id(cli("create", "orphan", "--assignee", "ghost", "--json"))
    (f,) = _of(_findings(cli), "no_profile", t)
    assert "'ghost', which does not exist" in f["message"] and f["fix"] == f"agentboard assign {t} w"
    assert f["action"] == {"method": "PATCH", "path": f"/api/tasks/{t}", "body": {"assignee": "w"}}
    _fix(cli, f)
    assert not _of(_findings(cli), "no_profile", t)


def test_with_several_agents_a_task_without_one_gets_no_one_click_fix_that_would_pick_for_the_person(seeded):
    cli = seeded
    cli("profiles", "add", "a-reviewer", "--command", "true")
    t = task_id(cli("create", "orphan", "--assignee", "ghost", "--json"))
    (f,) = _of(_findings(cli), "no_profile", t)
    assert f["action"] is None
    assert f["fix"] == f"agentboard assign {t} PROFILE (one of: a-reviewer, w)"


def test_a_disabled_profile_and_a_command_not_on_path_are_found_and_fixed(seeded):
    cli = seeded
    cli("profiles", "add", "off", "--command", "true")
    cli("profiles", "set", "off", "--disabled")
    cli("profiles", "add", "lost", "--command", "/nonexistent/agent --go")
    a = task_id(cli("create", "a", "--assignee", "off", "--json"))
    b = task_id(cli("create", "b", "--assignee", "lost", "--json"))
    found = _findings(cli)
    (off,) = _of(found, "profile_disabled", a)
    (lost,) = _of(found, "command_not_found", b)
    assert "/nonexistent/agent" in lost["message"]
    _fix(cli, off)
    # the command's fix names the program to install; with one that exists it clears
    assert lost["fix"].startswith("agentboard profiles set lost --command")
    assert cli("profiles", "set", "lost", "--command", "true").code == 0
    found = _findings(cli)
    assert not _of(found, "profile_disabled", a) and not _of(found, "command_not_found", b)


def test_a_task_held_by_the_respawn_guard_is_released_by_unguard(seeded, cli_home):
    cli = seeded
    t = task_id(cli("create", "guarded", "--assignee", "w", "--json"))
    c = _db(cli_home)
    try:  # what the dispatcher records when its guard holds the task back
        kr.record_telemetry(c.db, "default", t, "respawn_guarded",
                            {"reason": "the last failure looks like an auth, quota or rate-limit error"})
    finally:
        c.close()
    (f,) = _of(_findings(cli, "--task", t), "respawn_guarded", t)
    assert f["fix"] == f"agentboard unguard {t}"
    _fix(cli, f)
    assert not _of(_findings(cli, "--task", t), "respawn_guarded", t)
    shown = cli("show", t, "--json").json()
    shown = shown.get("task", shown)
    assert shown["last_outcome"] == "unguarded"


def test_a_breaker_trip_and_a_long_block_are_found_and_unblock_clears_them(seeded, cli_home):
    cli = seeded
    tripped = task_id(cli("create", "tripped", "--assignee", "w", "--json"))
    waiting = task_id(cli("create", "waiting", "--assignee", "w", "--json"))
    c = _db(cli_home)
    try:
        kr.give_up(c.db, "default", tripped, "the same error on 5 tasks: auth failed")
    finally:
        c.close()
    assert cli("block", waiting, "needs the API key").code == 0
    env = {"AGENTBOARD_BLOCKED_ALERT_HOURS": "0"}
    found = cli("diagnostics", "--json", env=env).json()
    (g,) = _of(found, "gave_up", tripped)
    (b,) = _of(found, "blocked_long", waiting)
    assert "needs the API key" in b["message"]
    _fix(cli, g)
    _fix(cli, b)
    found = cli("diagnostics", "--json", env=env).json()
    assert not _of(found, "gave_up") and not _of(found, "blocked_long")


def test_a_run_past_its_claim_is_found_and_reclaim_clears_it(seeded):
    cli = seeded
    t = task_id(cli("create", "claimed by hand", "--assignee", "w", "--json"))
    assert cli("claim", t, "--ttl", "1s").code == 0
    wait_for(lambda: _of(_findings(cli), "orphan_run", t), timeout=60, what="the claim to expire")
    (f,) = _of(_findings(cli), "orphan_run", t)
    assert "claim expired" in f["message"] and f["fix"] == f"agentboard reclaim {t}"
    _fix(cli, f)
    assert not _of(_findings(cli), "orphan_run", t)


def test_a_spent_budget_is_found_and_clearing_it_releases_its_tasks(seeded):
    cli = seeded
    assert cli("budget", "set", "--board", "default", "--max-runs", "0").code == 0
    (f,) = _of(_findings(cli), "budget_spent")
    assert f["fix"] == "agentboard budget clear --board default"
    assert f["action"]["method"] == "DELETE"
    _fix(cli, f)
    assert not _of(_findings(cli), "budget_spent")


def test_a_missing_or_dirty_target_directory_is_found_and_its_fix_clears_it(seeded, tmp_path):
    cli = seeded
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    (repo / "README").write_text("hi\n")
    subprocess.run(git + ["add", "README"], check=True)
    subprocess.run(git + ["commit", "-qm", "first"], check=True)
    assert cli("boards", "create", "proj", "--workdir", str(repo)).code == 0, "board with a target directory"
    # an untracked file (a person's own script, say) is theirs: no finding, nothing to stash
    (repo / "stray.txt").write_text("uncommitted\n")
    assert not _of(_findings(cli, "--board", "proj"), "target_dirty")
    (repo / "README").write_text("edited, not committed\n")
    (f,) = _of(_findings(cli, "--board", "proj"), "target_dirty")
    assert "README" in f["message"] and "stray.txt" not in f["message"]
    subprocess.run(shlex.split(f["fix"])[:1] + ["-c", "user.email=t@example.com", "-c", "user.name=t"]
                   + shlex.split(f["fix"])[1:], check=True, capture_output=True)
    assert not _of(_findings(cli, "--board", "proj"), "target_dirty")
    assert (repo / "stray.txt").exists()  # the fix left it where it was
    gone = tmp_path / "gone"
    gone.mkdir()
    assert cli("boards", "create", "away", "--workdir", str(gone)).code == 0
    gone.rmdir()
    (m,) = _of(_findings(cli, "--board", "away"), "target_missing")
    _fix(cli, m)
    assert not _of(_findings(cli, "--board", "away"), "target_missing")


def test_a_large_write_ahead_log_is_found_and_gc_clears_it(seeded, cli_home):
    cli = seeded
    env = {"AGENTBOARD_WAL_ALERT_MB": "0"}
    c = _db(cli_home)  # an open connection keeps the log file from being removed on the last close
    try:
        c.db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM tasks"))
        for i in range(20):
            cli("create", f"t{i}", "--assignee", "w")
        (f,) = _of(cli("diagnostics", "--json", env=env).json(), "wal_large")
        assert f["fix"] == "agentboard gc"
        r = cli("gc", "--json", env=env)
        assert r.code == 0 and r.json()["wal_checkpointed"] is True
        assert not _of(cli("diagnostics", "--json", env=env).json(), "wal_large")
    finally:
        c.close()


def test_a_healthy_board_has_nothing_to_report(seeded):
    cli = seeded
    assert cli("dispatch", "--wait", "--max", "0").code == 0  # a dispatcher has passed over the board
    cli("create", "fine", "--assignee", "w")
    r = cli("diagnostics")
    assert r.code == 0 and r.out.strip() == "nothing wrong found"


def test_ready_tasks_that_no_dispatcher_passes_over_get_an_info_finding_naming_the_command_that_starts_one(seeded):
    cli = seeded
    t = task_id(cli("create", "waits for ever", "--assignee", "w", "--json"))
    (f,) = _of(_findings(cli), "no_dispatcher")
    assert f["severity"] == "info" and f["concerns"] == "board" and f["subject"] == "default"
    assert "1 task(s) are ready on board 'default'" in f["message"] and "no dispatcher has run a pass" in f["message"]
    assert f["fix"] == "agentboard dispatcher" and f["facts"] == {"ready": 1, "last_pass": None}
    assert _of(_findings(cli, "--task", t), "no_dispatcher")  # the task's own view says why it waits
    text = cli("diagnostics").out
    assert "info: [no_dispatcher] board default:" in text and "fix: agentboard dispatcher" in text
    # a pass (here one-shot: `agentboard dispatch`) is what clears it
    assert cli("dispatch", "--wait", "--max", "0").code == 0
    assert not _of(_findings(cli), "no_dispatcher")


def test_a_profile_whose_program_is_a_relative_path_is_found_for_its_ready_task_with_the_absolute_path_fix(
        cli, tmp_path, monkeypatch):
    (tmp_path / "agents").mkdir()
    script = tmp_path / "agents" / "run.sh"
    script.write_text("#!/bin/sh\nagentboard complete --summary ok\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)  # where the person typed the relative path
    assert cli("profiles", "add", "rel", "--command", "./agents/run.sh").code == 0
    t = task_id(cli("create", "t", "--assignee", "rel", "--json"))
    for found in (_findings(cli), _findings(cli, "--task", t)):
        (f,) = _of(found, "command_not_found", t)
        assert "'./agents/run.sh' is a relative path" in f["message"] and "a new empty folder" in f["message"]
        assert f["severity"] == "error" and f["concerns"] == "profile" and f["subject"] == "rel"
        assert f["fix"] == f"agentboard profiles set rel --command {script}"
    # the dispatcher fails to start it, as the finding says
    assert "does not exist" in cli("dispatch", "--wait").out
    _fix(cli, f)
    assert cli("unblock", t).code in (0, 4)
    assert not _of(_findings(cli), "command_not_found")
    assert cli("dispatch", "--wait").code == 0
    assert cli("show", t, "--json").json()["status"] == "done"


def test_a_relative_program_that_the_boards_target_holds_is_no_finding(cli, tmp_path):
    target = tmp_path / "proj"
    (target / "agents").mkdir(parents=True)
    (target / "agents" / "run.sh").write_text("#!/bin/sh\n")
    assert cli("boards", "create", "proj", "--workdir", str(target)).code == 0
    cli("profiles", "add", "rel", "--command", "./agents/run.sh")
    t = task_id(cli("create", "t", "--assignee", "rel", "--board", "proj", "--json"))
    assert not _of(_findings(cli), "command_not_found", t)


def test_promote_force_starts_a_task_over_unfinished_parents_as_a_recorded_override(seeded):
    cli = seeded
    parent = task_id(cli("create", "parent", "--assignee", "w", "--json"))
    child = task_id(cli("create", "child", "--assignee", "w", "--parent", parent, "--json"))
    r = cli("promote", child)
    assert r.code == 4 and f"agentboard promote {child} --force" in r.err
    r = cli("promote", child, "--force", "--json")
    assert r.code == 0 and r.json()["status"] == "ready"
    # the claim no longer sends it back to todo for its unfinished parent
    r = cli("claim", child, "--json")
    assert r.code == 0 and r.json()["claimed"] is True


def test_ready_tasks_waiting_on_a_profile_at_its_cap_are_found_and_raising_the_cap_clears_it(cli):
    cli("profiles", "add", "solo", "--command", "true", "--max-concurrency", "1")
    busy = task_id(cli("create", "busy", "--assignee", "solo", "--json"))
    waiting = task_id(cli("create", "waiting", "--assignee", "solo", "--json"))
    assert cli("claim", busy).code == 0
    env = {"AGENTBOARD_CAP_WAIT_MINUTES": "0"}
    (f,) = _of(cli("diagnostics", "--json", env=env).json(), "at_cap", waiting)
    assert "at its concurrency cap of 1" in f["message"]
    assert f["fix"] == "agentboard profiles set solo --max-concurrency 2"
    _fix(cli, f)
    assert not _of(cli("diagnostics", "--json", env=env).json(), "at_cap")


def test_a_parked_notification_target_is_found_and_resuming_it_clears_it(seeded, cli_home):
    from agentboard.kernel import notifications as kn
    from agentboard.notify import subscriptions

    cli = seeded
    c = _db(cli_home)
    sub = subscriptions.add(c.db, "default", "board", "default", "json://127.0.0.1:9/hook")
    task_id(cli("create", "something to tell", "--assignee", "w", "--json"))
    (leased,) = kn.claim_due(c.db, "host-a", lease=60)
    kn.failed(c.db, "host-a", int(leased["id"]), "connection refused", retry_at=time.time() + 60, park_after=1)
    c.close()
    (f,) = _of(_findings(cli), "notify_parked")
    assert "connection refused" in f["message"] and "127.0.0.1" in f["message"]
    assert f["fix"] == f"agentboard notify resume {sub['id']}"
    assert f["action"]["path"] == f"/api/notify/subscriptions/{sub['id']}/resume"
    _fix(cli, f)
    assert not _of(_findings(cli), "notify_parked")


def test_wakes_waiting_on_a_disabled_supervisor_are_found_and_enabling_it_clears_it(seeded):
    cli = seeded
    cli("profiles", "add", "boss", "--command", "true")
    assert cli("supervisor", "enable", "boss").code == 0
    assert cli("profiles", "set", "boss", "--disabled").code == 0
    t = task_id(cli("create", "stuck", "--assignee", "w", "--json"))
    assert cli("block", t, "which database?", "--kind", "needs_input").code == 0
    (f,) = _of(_findings(cli), "supervisor_unavailable")
    assert "wake(s) wait" in f["message"] and "'boss' is disabled" in f["message"]
    assert f["fix"] == "agentboard profiles set boss --enabled" and f["severity"] == "error"
    _fix(cli, f)
    assert not _of(_findings(cli), "supervisor_unavailable")


@pytest.mark.parametrize(("url", "fix"), [
    ("postgresql://postgres@127.0.0.1:1/nowhere", "start the database server"),
    ("postgresql://postgres@127.0.0.1:5432/agentboard_no_such_database", "createdb agentboard_no_such_database"),
])
def test_a_database_that_cannot_be_opened_is_reported_as_a_finding_in_json_too(tmp_path, url, fix):
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "AGENTBOARD_HOME": str(tmp_path / "home"), "AGENTBOARD_DATABASE_URL": url}
    out = subprocess.run([sys.executable, "-m", "agentboard", "diagnostics", "--json"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 6, out.stderr
    (f,) = json.loads(out.stdout)
    assert f["kind"] == "database_unreachable" and f["severity"] == "error" and fix in f["fix"]


def test_a_task_running_on_a_host_whose_dispatcher_went_silent_is_found_from_another_host(seeded, cli_home):
    from agentboard.kernel import monitoring

    cli = seeded
    t = task_id(cli("create", "on host b", "--assignee", "w", "--json"))
    c = _db(cli_home)
    try:
        run_id = int(kr.claim(c.db, "default", t, ttl=900)["run_id"])
        kr.record_spawn(c.db, "default", t, run_id, pid=999_999, host="host-b")
        monitoring.mark_pass(c.db, "host-b", time.time(), None)
        assert not _of(_findings(cli), "orphan_run", t)  # its dispatcher passes: nothing wrong
        monitoring.mark_pass(c.db, "host-b", time.time() - 3600, None)
    finally:
        c.close()
    (f,) = _of(cli("diagnostics", "--json", env={"AGENTBOARD_HOST_ID": "host-a"}).json(), "orphan_run", t)
    assert "host 'host-b' has not run a dispatcher pass for 36" in f["message"]
    assert "its claim lapses in" in f["message"] and f["fix"] == f"agentboard reclaim {t}"


def test_a_goal_left_verifying_is_found_and_its_verdict_clears_it(seeded):
    cli = seeded
    g = cli("goals", "create", "ship the parser", "--json").json()["id"]
    t = task_id(cli("create", "the parser", "--assignee", "w", "--goal", g, "--json"))
    assert cli("complete", t, "--summary", "written").code == 0
    assert cli("goals", "show", g, "--json").json()["status"] == "verifying"
    assert not _of(_findings(cli), "goal_verifying")  # just done: not yet left waiting
    env = {"AGENTBOARD_BLOCKED_ALERT_HOURS": "0"}
    (f,) = _of(cli("diagnostics", "--json", env=env).json(), "goal_verifying")
    assert (f["concerns"], f["subject"]) == ("goal", g)
    assert "ship the parser" in f["message"] and "nobody has given it a verdict" in f["message"]
    (seen,) = _of(cli("diagnostics", "--json", "--task", t, env=env).json(), "goal_verifying")  # its task's view
    assert seen["subject"] == g
    _fix(cli, f)
    assert cli("goals", "show", g, "--json").json()["status"] == "done"
    assert not _of(cli("diagnostics", "--json", env=env).json(), "goal_verifying")
