"""`boards`, `profiles` and `goals` from the command line, and board isolation."""

from __future__ import annotations

from pathlib import Path

from .conftest import assert_one_line_error, task_id


def test_board_lifecycle(cli, cli_home: Path, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    r = cli("boards", "create", "Research", "--name", "Research team", "--description", "papers",
            "--icon", "R", "--color", "#336699", "--workdir", str(target), "--json")
    assert r.code == 0, r.err
    assert r.json()["slug"] == "research" and r.json()["default_workdir"] == str(target)
    listed = cli("boards", "list", "--json").json()
    assert [(b["slug"], b["current"]) for b in listed] == [("default", True), ("research", False)]

    # the human list marks the current board with "*" and leaves the others' mark blank
    rows = cli("boards", "list").lines()[1:]
    assert rows[0].startswith("*  default") and rows[1].startswith("   research")

    assert cli("boards", "switch", "research").code == 0
    assert (cli_home / "current_board").read_text().strip() == "research"
    tid = task_id(cli("create", "read the paper", "--json"))
    assert cli("show", tid, "--json").json()["board"] == "research"
    shown = cli("boards", "show", "--json").json()
    assert shown["slug"] == "research" and shown["current"] is True and shown["counts"]["todo"] == 1
    assert "research" in cli("boards", "show").out

    assert cli("boards", "rename", "research", "Reading group").code == 0
    assert cli("boards", "show", "research", "--json").json()["name"] == "Reading group"

    (cli_home / "boards" / "research").mkdir(parents=True, exist_ok=True)
    (cli_home / "boards" / "research" / "notes.txt").write_text("keep me")
    r = cli("boards", "rm", "research")
    assert r.code == 0 and "archived" in r.out
    assert not (cli_home / "current_board").exists()  # back to the default board
    assert [b["slug"] for b in cli("boards", "list", "--json").json()] == ["default"]
    assert_one_line_error(cli("boards", "switch", "research"), 4, "archived")
    assert cli("boards", "restore", "research").code == 0
    assert (cli_home / "boards" / "research" / "notes.txt").read_text() == "keep me"
    assert cli("show", tid, "--board", "research", "--json").json()["title"] == "read the paper"

    r = cli("boards", "rm", "research", "--delete")
    assert r.code == 0 and "deleted" in r.out
    assert_one_line_error(cli("boards", "show", "research"), 3, "no board")
    assert not (cli_home / "boards" / "research").exists()


def test_board_create_switch_flag(cli) -> None:
    assert cli("boards", "create", "ops", "--switch").code == 0
    assert cli("boards", "show", "--json").json()["slug"] == "ops"


def test_boards_are_isolated(cli, counts) -> None:
    cli("boards", "create", "alpha")
    cli("boards", "create", "beta")
    a = task_id(cli("create", "alpha only", "--board", "alpha", "--json"))
    assert cli("list", "--board", "beta", "--json").json() == []
    before = counts()
    # a task id finds its own board; a --board naming another one is refused, changing nothing
    for args in (["show", a], ["complete", a], ["comment", a, "hi"], ["archive", a], ["runs", a], ["tail", a, "--once"]):
        assert_one_line_error(cli(*args, "--board", "beta"), 2, f"task {a} is on board 'alpha', not 'beta'")
    assert counts() == before
    b = task_id(cli("create", "beta task", "--board", "beta", "--json"))
    before = counts()
    assert_one_line_error(cli("link", a, b), 2, "across boards")
    assert_one_line_error(cli("link", a, b, "--board", "beta"), 2, "on board 'alpha'")
    assert counts() == before
    # the environment variable picks the board, and --board beats it
    assert [t["id"] for t in cli("list", "--json", env={"AGENTBOARD_BOARD": "alpha"}).json()] == [a]
    assert [t["id"] for t in cli("list", "--board", "beta", "--json", env={"AGENTBOARD_BOARD": "alpha"}).json()] == [b]


def test_profiles(cli, counts) -> None:
    r = cli("profiles", "add", "coder", "--command", "claude -p", "--adapter", "claude", "--description",
            "writes Python", "--max-concurrency", "2", "--env", "MODEL=opus", "--env", "DEBUG=1",
            "--orchestrator", "--json")
    assert r.code == 0, r.err
    p = r.json()
    assert (p["adapter"], p["max_concurrency"], p["env"], p["orchestrator"], p["enabled"]) == (
        "claude", 2, {"MODEL": "opus", "DEBUG": "1"}, True, True)
    cli("profiles", "add", "idle", "--command", "true", "--disabled")
    listed = cli("profiles", "list", "--json").json()
    assert [(x["name"], x["enabled"]) for x in listed] == [("coder", True), ("idle", False)]
    assert "writes Python" in cli("profiles", "list").out

    r = cli("profiles", "set", "coder", "--env", "DEBUG=", "--env", "TOKEN=abc", "--max-concurrency", "4",
            "--no-orchestrator", "--json")
    assert r.code == 0, r.err
    assert (r.json()["env"], r.json()["max_concurrency"], r.json()["orchestrator"]) == (
        {"MODEL": "opus", "TOKEN": "abc"}, 4, False)
    assert cli("profiles", "describe", "coder", "--text", "refactors and tests").code == 0
    assert cli("profiles", "show", "coder", "--json").json()["description"] == "refactors and tests"
    assert "refactors and tests" in cli("profiles", "show", "coder").out
    before = counts()
    assert_one_line_error(cli("profiles", "set", "coder", "--adapter", "nope"), 2, "unknown adapter")
    assert_one_line_error(cli("profiles", "set", "coder"), 2, "nothing to change")
    assert counts() == before
    assert cli("profiles", "rm", "idle").code == 0
    assert [x["name"] for x in cli("profiles", "list", "--json").json()] == ["coder"]
    assert_one_line_error(cli("profiles", "rm", "idle"), 3, "no profile")


def test_a_profile_permission_defaults_to_edit_and_can_be_changed(cli) -> None:
    assert cli("profiles", "add", "coder", "--command", "codex", "--adapter", "codex", "--json").json()["permission"] == "edit"
    assert cli("profiles", "set", "coder", "--permission", "read", "--json").json()["permission"] == "read"
    assert "read" in cli("profiles", "show", "coder").out
    assert_one_line_error(cli("profiles", "set", "coder", "--permission", "root"), 2, "unknown permission",
                          "edit, full, read")


def test_a_profile_with_an_unknown_adapter_or_too_many_slots_is_refused_naming_what_is_wrong(cli, counts) -> None:
    before = counts()
    assert_one_line_error(cli("profiles", "add", "p", "--adapter", "bogus"), 2, "unknown adapter 'bogus'", "claude")
    assert_one_line_error(cli("profiles", "add", "p", "--command", "/bin/true", "--max-concurrency", "20000"), 2,
                          "max_concurrency=20000", "at most 10000")
    assert counts() == before


def test_a_goal_id_finds_its_own_board_and_a_wrong_board_names_the_goals(cli, counts) -> None:
    cli("boards", "create", "proto")
    cli("boards", "create", "calc", "--switch")
    g = cli("goals", "create", "goal with verify", "--board", "proto", "--json").json()["id"]
    shown = cli("goals", "show", g, "--json")
    assert shown.code == 0, shown.err
    assert shown.json()["board"] == "proto" and shown.json()["id"] == g
    assert cli("goals", "show", g, "--board", "proto", "--json").json()["id"] == g
    assert cli("supervisor", "goal", g, "--json").json()["id"] == g
    before = counts()
    assert_one_line_error(cli("goals", "show", g, "--board", "calc"), 2,
                          f"goal {g} is on board 'proto', not 'calc'; leave out --board")
    assert_one_line_error(cli("goals", "cancel", g, "--board", "calc"), 2, "is on board 'proto'")
    assert_one_line_error(cli("goals", "show", g, "--board", "nope"), 3, "there is no board 'nope'",
                          "a goal id finds its own board")
    assert_one_line_error(cli("goals", "show", "g_00000000"), 3, "no goal g_00000000")
    assert counts() == before
    assert cli("goals", "cancel", g).code == 0
    assert cli("goals", "list", "--board", "proto", "--status", "cancelled", "--json").json()[0]["id"] == g


def test_goals(cli) -> None:
    cli("profiles", "add", "w", "--command", "true")
    r = cli("goals", "create", "Ship v2", "--body", "the big one", "--acceptance", "all tests pass",
            "--acceptance", "docs updated", "--priority", "3", "--json")
    assert r.code == 0, r.err
    g = r.json()
    assert g["id"].startswith("g_") and g["acceptance"] == ["all tests pass", "docs updated"]
    t1 = task_id(cli("create", "part 1", "--goal", g["id"], "--assignee", "w", "--json"))
    cli("create", "part 2", "--goal", g["id"], "--assignee", "w", "--json")
    cli("complete", t1)
    listed = cli("goals", "list", "--json").json()
    assert [(x["id"], x["done"], x["total"]) for x in listed] == [(g["id"], 1, 2)]
    assert "1/2" in cli("goals", "list").out
    shown = cli("goals", "show", g["id"], "--json").json()
    assert {t["title"] for t in shown["tasks"]} == {"part 1", "part 2"}
    human = cli("goals", "show", g["id"]).out
    assert "all tests pass" in human and "part 2" in human
    assert cli("goals", "cancel", g["id"]).code == 0
    assert cli("goals", "list", "--status", "cancelled", "--json").json()[0]["id"] == g["id"]
    assert_one_line_error(cli("goals", "cancel", g["id"]), 4, "only an active goal")
    assert [x["id"] for x in cli("goals", "list", "--board", "default", "--json").json()] == [g["id"]]


def test_a_goal_is_edited_from_the_cli_and_an_edit_that_says_nothing_or_contradicts_itself_changes_nothing(
        cli, counts) -> None:
    g = cli("goals", "create", "Ship v2", "--acceptance", "all tests pass", "--json").json()["id"]
    out = cli("goals", "edit", g, "--title", "Ship v3", "--acceptance", "tests pass", "--acceptance", "docs",
              "--priority", "5", "--verify", "make check", "--json")
    assert out.code == 0, out.err
    edited = out.json()
    assert (edited["title"], edited["acceptance"], edited["priority"], edited["verify"]) == (
        "Ship v3", ["tests pass", "docs"], 5, ["make check"])
    assert cli("goals", "edit", g, "--no-verify", "--json").json()["verify"] == []
    before = counts()
    assert_one_line_error(cli("goals", "edit", g), 2, "nothing to change")
    assert_one_line_error(cli("goals", "edit", g, "--verify", "x", "--no-verify"), 2, "not both")
    assert_one_line_error(cli("goals", "edit", g, "--verify", "check:nope"), 2, "no named check 'nope'")
    assert_one_line_error(cli("goals", "edit", "g_00000000", "--title", "x"), 3, "g_00000000")
    assert counts() == before
    cli("boards", "create", "old")
    old = cli("goals", "create", "left behind", "--board", "old", "--json").json()["id"]
    assert cli("boards", "rm", "old").code == 0
    assert_one_line_error(cli("goals", "edit", old, "--title", "renamed"), 2, "board 'old' is archived")


def test_a_goal_whose_tasks_are_done_says_which_verdict_settles_it_and_a_reopened_one_forgets_the_old(cli) -> None:
    cli("profiles", "add", "w", "--command", "true")
    g = cli("goals", "create", "Ship v3", "--acceptance", "users can log in", "--json").json()
    t = task_id(cli("create", "login page", "--goal", g["id"], "--assignee", "w", "--json"))
    cli("complete", t)
    assert cli("goals", "show", g["id"], "--json").json()["status"] == "verifying"
    shown = cli("goals", "show", g["id"]).out
    assert f"waits for a verdict: agentboard supervisor verdict {g['id']} --pass" in shown
    refused = cli("goals", "cancel", g["id"])
    assert_one_line_error(refused, 4, "waits for a verdict")
    assert f"agentboard supervisor verdict {g['id']}" in refused.err
    # the verdict that cancel pointed at settles it
    assert cli("supervisor", "verdict", g["id"], "the login page works", "--pass").code == 0
    done = cli("goals", "show", g["id"], "--json").json()
    assert (done["status"], done["evidence"]) == ("done", "the login page works")
    # a task reopened: the goal is active again, and the old verdict's evidence is gone with it
    cli("create", "2FA", "--goal", g["id"], "--assignee", "w", "--json")
    again = cli("goals", "show", g["id"], "--json").json()
    assert (again["status"], again["evidence"]) == ("active", None)


def test_removing_a_profile_warns_of_and_lists_the_unfinished_tasks_still_assigned_to_it(cli) -> None:
    cli("profiles", "add", "w", "--command", "true")
    ready = task_id(cli("create", "ready one", "--assignee", "w", "--json"))
    waiting = task_id(cli("create", "todo one", "--assignee", "w", "--parent", ready, "--json"))
    done = task_id(cli("create", "done one", "--assignee", "w", "--json"))
    cli("complete", done)
    r = cli("profiles", "rm", "w")
    assert r.code == 0 and r.out.strip() == "profile w removed"
    (warning,) = r.err.strip().splitlines()
    assert warning.startswith("warning: 2 unfinished task(s) are still assigned to 'w'")
    assert ready in warning and waiting in warning and done not in warning
    assert "agentboard assign ID PROFILE" in warning
    cli("profiles", "add", "w", "--command", "true")
    assert cli("profiles", "rm", "w", "--json").json()["waiting"] == [ready, waiting]
    cli("profiles", "add", "idle", "--command", "true")
    quiet = cli("profiles", "rm", "idle")
    assert quiet.code == 0 and quiet.err == ""


def test_the_tasks_of_an_archived_board_take_no_comment_edit_or_assignee_and_its_list_says_it_is_archived(
        cli, counts) -> None:
    cli("boards", "create", "old")
    t = task_id(cli("create", "left behind", "--board", "old", "--json"))
    assert cli("boards", "rm", "old").code == 0
    before = counts()
    for argv in (["comment", t, "one more thing"], ["edit", t, "--title", "renamed"], ["assign", t, "someone"]):
        assert_one_line_error(cli(*argv), 2, "board 'old' is archived; restore it before changing its tasks")
    assert counts() == before
    listed = cli("list", "--board", "old")
    assert listed.code == 0 and "board 'old' is archived" in listed.err and "boards restore old" in listed.err
    assert cli("boards", "restore", "old").code == 0
    assert cli("comment", t, "one more thing").code == 0
    assert cli("list", "--board", "old").err == ""


def test_the_tasks_of_an_archived_board_are_not_moved_by_block_unblock_archive_restore_reopen_or_release(
        cli, counts) -> None:
    cli("boards", "create", "old")
    todo, blocked, done, archived = (task_id(cli("create", f"task {i}", "--board", "old", "--json")) for i in range(4))
    triaged = task_id(cli("create", "an idea", "--board", "old", "--triage", "--json"))
    assert cli("block", blocked, "waiting on a vendor").code == 0
    assert cli("block", done, "nearly").code == 0 and cli("complete", done, "--summary", "closed by hand").code == 0
    assert cli("archive", archived).code == 0
    assert cli("boards", "rm", "old").code == 0
    before = counts()
    for argv in (["block", todo, "no"], ["unblock", blocked], ["archive", todo], ["restore", archived],
                 ["reopen", done], ["release", triaged]):
        assert_one_line_error(cli(*argv), 2, "board 'old' is archived; restore it before changing its tasks")
    assert counts() == before
    assert cli("boards", "restore", "old").code == 0
    assert cli("unblock", blocked).code == 0 and cli("restore", archived).code == 0
    assert cli("release", triaged).code == 0 and cli("reopen", done).code == 0


def test_an_env_setup_that_is_no_virtualenv_is_named_by_the_path_given(cli, tmp_path: Path) -> None:
    target = tmp_path / "proj"
    target.mkdir()
    cli("boards", "create", "calc", "--workdir", str(target))
    missing = tmp_path / "nonexist"
    assert_one_line_error(cli("boards", "set", "calc", "--env-setup", str(missing)), 2,
                          f"env_setup '{missing}' is not a virtualenv (no bin/ folder in {missing})")
    # a relative one is looked for in the target, and named there
    assert_one_line_error(cli("boards", "set", "calc", "--env-setup", "venv2"), 2,
                          f"(no bin/ folder in {target / 'venv2'})")
