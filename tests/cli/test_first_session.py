"""What a person trips over in a first session, done the way they did it: the real CLI in a
subprocess on a real home (and the REST API on a real server where the dashboard asks it)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .test_subprocess import AB, run


def new_task(title: str, *args: str) -> str:
    return str(json.loads(run("create", title, "--json", *args).stdout)["id"])


def diagnostics(*args: str) -> list[dict[str, object]]:
    return list(json.loads(run("diagnostics", "--json", *args).stdout))


# -- one task's diagnostics ------------------------------------------------------------------------


def test_a_tasks_diagnostics_show_only_what_concerns_that_task(cli_home: Path) -> None:
    run("profiles", "add", "w", "--command", "true")
    a = new_task("a", "--assignee", "w")
    b = new_task("b", "--assignee", "w")
    run("budget", "set", "--task", b, "--max-runs", "0")
    # the whole board's view has B's spent budget
    assert any(f["kind"] == "budget_spent" and f["subject"] == b for f in diagnostics())
    # A's view does not, in JSON nor in text
    assert not [f for f in diagnostics("--task", a) if f["kind"] == "budget_spent"]
    assert b not in run("diagnostics", "--task", a).stdout
    # B's view has it, labelled as B's own
    (own,) = [f for f in diagnostics("--task", b) if f["kind"] == "budget_spent"]
    assert own["concerns"] == "task" and own["subject"] == b and own["task_id"] == b
    # the board's spent budget concerns every task of the board, and says it is the board's
    run("budget", "set", "--board", "default", "--max-runs", "0")
    (board,) = [f for f in diagnostics("--task", a) if f["kind"] == "budget_spent"]
    assert board["concerns"] == "board" and board["subject"] == "default" and board["task_id"] is None
    text = run("diagnostics", "--task", a).stdout
    assert "[budget_spent] its board default:" in text and b not in text


def test_the_drawers_diagnostics_of_one_task_leave_out_another_tasks_budget(home: Path) -> None:
    import time

    from api.conftest import start_api

    import agentboard
    from agentboard.kernel import budgets, monitoring

    with agentboard.connect(str(home)) as ab, start_api(ab) as api:
        ab.add_profile("w", command="true")
        a = ab.board().create("a", assignee="w")["id"]
        b = ab.board().create("b", assignee="w")["id"]
        budgets.set_budget(ab.db, "task", b, budgets.Limits.build(max_runs=0))
        monitoring.mark_pass(ab.db, "dispatcher-host", time.time(), None)  # a dispatcher passes over the board
        c = api.as_admin
        # what the drawer asks (GET /api/diagnostics?task=ID): A's has no finding, so no banner and no Fix
        assert c.get("/api/diagnostics", params={"task": a}).json() == []
        found = c.get("/api/diagnostics", params={"task": b}).json()
        assert [(f["kind"], f["subject"], f["action"]["path"]) for f in found] == [
            ("budget_spent", b, f"/api/budgets/task/{b}")]


# -- profiles whose program is missing ----------------------------------------------------------------


def test_adding_a_profile_whose_program_is_not_on_path_warns_and_names_it(cli_home: Path) -> None:
    p = run("profiles", "add", "coder", "--command", "claude-coder --task {task_id}")
    assert "warning:" in p.stderr and "'claude-coder' was not found on PATH" in p.stderr
    assert "profiles set coder --command" in p.stderr
    # it is kept (the program may be installed later)
    assert json.loads(run("profiles", "show", "coder", "--json").stdout)["command"].startswith("claude-coder")
    # a program that exists: no warning
    assert "warning" not in run("profiles", "set", "coder", "--command", "true").stderr


def test_an_agent_cli_profile_added_as_the_agents_page_says_runs_the_cli_on_path(cli_home: Path) -> None:
    p = run("profiles", "add", "coder", "--adapter", "claude", "--description", "writes and fixes code")
    assert "profile coder added (claude: claude)" in p.stdout
    assert json.loads(run("profiles", "show", "coder", "--json").stdout)["command"] == "claude"
    # a script's profile has no default: one line saying what to give, and nothing added
    p = run("profiles", "add", "script", check=False)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert "needs --command CMD" in p.stderr and "--adapter claude|codex|gemini|opencode" in p.stderr
    assert [x["name"] for x in json.loads(run("profiles", "list", "--json").stdout)] == ["coder"]


def test_a_script_given_to_an_interpreter_that_does_not_exist_is_caught_at_add_set_and_check(
        cli_home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "agents" / "missing.sh"
    p = run("profiles", "add", "s", "--command", f"sh {missing}")
    assert f"script '{missing}' (run by sh) does not exist" in p.stderr
    p = run("profiles", "check", "s", "--no-run", check=False)
    assert p.returncode == 1 and "NOT READY" in p.stdout and f"script '{missing}'" in p.stdout
    missing.parent.mkdir()
    missing.write_text("echo hi\n")
    assert "warning" not in run("profiles", "set", "s", "--command", f"bash -e {missing}").stderr
    p = run("profiles", "check", "s", "--no-run")
    assert "s (command): ok" in p.stdout
    py = tmp_path / "gone.py"
    assert f"script '{py}' (run by python3) does not exist" in run(
        "profiles", "set", "s", "--command", f"python3 -u {py}").stderr
    # inline code and modules are not scripts
    assert "warning" not in run("profiles", "set", "s", "--command", "python3 -c 'print(1)'").stderr


def test_a_task_blocked_by_a_profile_that_cannot_start_points_diagnostics_at_the_profile(
        cli_home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.sh"
    run("profiles", "add", "p", "--command", f"sh {missing}")
    t = new_task("work", "--assignee", "p")
    run("block", t, "failed twice", "--kind", "gave_up")
    found = diagnostics("--task", t)
    prof = [f for f in found if f["kind"] == "command_not_found"]
    assert prof, found
    assert prof[0]["concerns"] == "profile" and prof[0]["subject"] == "p" and prof[0]["severity"] == "error"
    assert prof[0]["fix"].startswith("agentboard profiles set p --command")
    assert found[0]["kind"] == "command_not_found"  # the profile first, before any unblock
    text = run("diagnostics", "--task", t).stdout
    assert "[command_not_found] its profile p:" in text and str(missing) in text


# -- typos ------------------------------------------------------------------------------------------


def test_a_typo_in_an_assignee_suggests_the_profile_it_was_meant_to_be(cli_home: Path) -> None:
    run("profiles", "add", "fixer", "--command", "true")
    p = run("create", "fix the bug", "--assignee", "fixr")
    assert p.stderr.startswith("warning: no profile named 'fixr' (did you mean 'fixer'?):")
    t = new_task("other")
    assert "did you mean 'fixer'?" in run("assign", t, "fixe").stderr
    # a name close to nothing gets no suggestion
    p = run("create", "for a person", "--assignee", "alice")
    assert "no profile named 'alice'" in p.stderr and "did you mean" not in p.stderr


# -- settings -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("var", "value", "says"), [
    ("AGENTBOARD_FAILURE_LIMIT", "abc", "invalid setting failure_limit='abc': must be a whole number from 1 to 100000 "
                                        "(from AGENTBOARD_FAILURE_LIMIT)"),
    ("AGENTBOARD_FAILURE_LIMIT", "0", "invalid setting failure_limit=0: must be a whole number from 1 to 100000"),
    ("AGENTBOARD_VERIFY", "maybe", "invalid setting verify='maybe': must be true or false"),
    ("AGENTBOARD_API_PORT", "70000", "invalid setting api_port='70000': must be a whole number from 1 to 65535"),
    ("AGENTBOARD_REVIEWER_AGENT", "bob", "invalid setting reviewer_agent='bob': must be auto, on, off, llm, heuristic"),
    ("AGENTBOARD_CLAIM_TTL", "-5", "invalid setting claim_ttl='-5': must be a whole number from 1 to 100000000 "
                                   "(from AGENTBOARD_CLAIM_TTL)"),
    ("AGENTBOARD_DISPATCH_INTERVAL", "0", "invalid setting dispatch_interval='0': must be a number from 0.1 to 86400"),
    ("AGENTBOARD_ATTACHMENT_MAX_BYTES", "-5", "invalid setting attachment_max_bytes='-5': must be a whole number from 1"),
    ("AGENTBOARD_LLM_TIMEOUT", "1e400", "invalid setting llm_timeout='1e400': must be a number from 0.1 to 86400"),
    ("AGENTBOARD_VERIFY_BACKOFF", "10,-1", "invalid setting verify_backoff='10,-1': must be a list of numbers, each "
                                           "from 0 to 100000000"),
    ("AGENTBOARD_LOG_FORMAT", "abc", "invalid setting log_format='abc': must be text, json or auto "
                                     "(from AGENTBOARD_LOG_FORMAT)"),
])
def test_a_bad_setting_is_refused_naming_its_valid_range_or_choices(cli_home: Path, var: str, value: str,
                                                                      says: str) -> None:
    before = (cli_home / "agentboard.db").read_bytes()
    p = run("list", env={var: value}, check=False)
    assert p.returncode == 2 and p.stderr.startswith("error: " + says), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and var in p.stderr
    assert (cli_home / "agentboard.db").read_bytes() == before


def test_every_setting_refuses_a_value_of_the_wrong_type_saying_what_it_must_be(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import fields

    from agentboard import config
    from agentboard.domain.errors import InvalidInput

    typed = [f for f in fields(config.Settings) if str(f.type) in ("int", "float", "bool", "tuple[float, ...]")]
    assert len(typed) > 30
    for f in typed:
        var = "AGENTBOARD_" + f.name.upper()
        monkeypatch.setenv(var, "not-a-value")
        with pytest.raises(InvalidInput) as err:
            config.load(home)
        assert str(err.value).startswith(f"invalid setting {f.name}='not-a-value': must be "), str(err.value)
        assert str(err.value).endswith(f"(from {var})")
        monkeypatch.delenv(var)


def test_every_number_setting_has_a_range_and_refuses_values_outside_it(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import fields

    from agentboard import config
    from agentboard.domain.errors import InvalidInput

    numbers = [f for f in fields(config.Settings) if str(f.type) in ("int", "float", "tuple[float, ...]")]
    checked_elsewhere = {"max_parallel", "failure_limit"} | {
        k for k in ("notify_poll_interval", "notify_retry_base", "notify_retry_max", "notify_lease", "notify_timeout",
                    "notify_batch_delay", "notify_digest_window", "notify_park_after", "notify_digest_after")}
    for f in numbers:
        if f.name in checked_elsewhere:
            continue
        assert f.name in config.RANGES, f"{f.name} has no range"
        var = "AGENTBOARD_" + f.name.upper()
        for bad in ("-1e12", "1e400", "nan"):
            monkeypatch.setenv(var, bad)
            with pytest.raises(InvalidInput) as err:
                config.load(home)
            assert " from " in str(err.value) and str(err.value).endswith(f"(from {var})"), str(err.value)
        monkeypatch.setenv(var, str(getattr(config.Settings(home=home), f.name)).strip("()").rstrip(","))
        config.load(home)  # the default itself is within the range
        monkeypatch.delenv(var)


def test_a_dispatcher_with_a_claim_ttl_out_of_range_does_not_start(cli_home: Path) -> None:
    p = run("dispatcher", env={"AGENTBOARD_CLAIM_TTL": "-5"}, check=False)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "error: invalid setting claim_ttl='-5': must be a whole number from 1 to 100000000 (from AGENTBOARD_CLAIM_TTL)"]


# -- block reasons --------------------------------------------------------------------------------------


def test_a_worker_that_dies_with_a_traceback_blocks_its_task_with_a_one_line_reason(
        cli_home: Path, tmp_path: Path) -> None:
    from dispatch.conftest import wait_for

    script = tmp_path / "agent.sh"
    script.write_text("echo 'starting the agent'\necho '-----'\n"
                      "printf 'Traceback (most recent call last):\\n  File \"agent.py\", line 3, in <module>\\n"
                      "    main()\\nKeyError: missing config key\\n' >&2\nexit 1\n")
    run("profiles", "add", "p", "--command", f"sh {script}")
    t = new_task("work", "--assignee", "p")
    one = {"AGENTBOARD_FAILURE_LIMIT": "1"}

    def blocked() -> dict[str, object] | None:
        run("dispatch", env=one)
        task = json.loads(run("show", t, "--json", env=one).stdout)
        return task if task["status"] == "blocked" else None

    task = wait_for(blocked, what="the task gives up")
    reason = str(task["block_reason"])
    assert "\n" not in reason and len(reason) <= 300
    assert reason.startswith("gave up: 1 consecutive failures") and reason.endswith("KeyError: missing config key")
    # diagnostics and show say that one line
    (gave_up,) = [f for f in diagnostics("--task", t) if f["kind"] == "gave_up"]
    assert "\n" not in str(gave_up["message"]) and "KeyError: missing config key" in str(gave_up["message"])
    (line,) = [ln for ln in run("show", t, env=one).stdout.splitlines() if ln.startswith("blocked ")]
    assert line.endswith("last output: KeyError: missing config key") and "starting the agent" not in line
    # the run's log keeps the whole output
    log = run("log", t, env=one).stdout
    assert "starting the agent" in log and 'File "agent.py", line 3' in log


def test_a_multi_line_block_reason_is_kept_to_its_first_line_on_the_task(cli_home: Path) -> None:
    t = new_task("work")
    run("block", t, "\n\nwaiting for the API key\nsteps tried:\n- env\n- config\n")
    task = json.loads(run("show", t, "--json").stdout)
    assert task["block_reason"] == "waiting for the API key"
    events = [json.loads(line) for line in run("tail", t, "--once", "--json").stdout.splitlines() if line.strip()]
    (blocked,) = [e for e in events if e["kind"] == "blocked"]
    assert "- config" in blocked["payload"]["detail"]


# -- a board's target directory ---------------------------------------------------------------------------


def test_a_board_whose_target_directory_does_not_exist_is_refused_unless_create_is_given(
        cli_home: Path, tmp_path: Path) -> None:
    typo = tmp_path / "projcet"
    before = json.loads(run("boards", "list", "--json").stdout)
    p = run("boards", "create", "x", "--workdir", str(typo), check=False)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert p.stderr.startswith(f"error: target directory {typo} does not exist") and "--create" in p.stderr
    assert not typo.exists() and json.loads(run("boards", "list", "--json").stdout) == before
    # a relative path is resolved first, and named as the absolute path it means
    p = subprocess.run([*AB, "boards", "create", "y", "--workdir", "no-such-dir"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert p.returncode == 2 and f"target directory {tmp_path / 'no-such-dir'} does not exist" in p.stderr
    # --create makes it
    row = json.loads(run("boards", "create", "x", "--workdir", str(typo), "--create", "--json").stdout)
    assert row["default_workdir"] == str(typo) and typo.is_dir()


def test_the_rest_api_and_the_python_api_refuse_a_missing_target_directory_too(home: Path, tmp_path: Path) -> None:
    from api.conftest import start_api

    import agentboard
    from agentboard.domain.errors import InvalidInput

    missing = tmp_path / "nowhere"
    with agentboard.connect(str(home)) as ab, start_api(ab) as api:
        with pytest.raises(InvalidInput, match="does not exist"):
            ab.create_board("py", workdir=str(missing))
        r = api.as_admin.post("/api/boards", json={"slug": "web", "workdir": str(missing)})
        assert r.status_code == 400 and f"target directory {missing} does not exist" in r.json()["error"]["message"]
        assert not missing.exists() and [b["slug"] for b in ab.boards()] == ["default"]
        r = api.as_admin.post("/api/boards", json={"slug": "web", "workdir": str(missing), "create": True})
        assert r.status_code == 201 and missing.is_dir()
        ab.create_board("py", workdir=str(tmp_path / "made"), create=True)
        assert (tmp_path / "made").is_dir()


def test_a_dispatch_never_makes_an_empty_folder_in_place_of_a_missing_target(cli_home: Path, tmp_path: Path) -> None:
    target = tmp_path / "project"
    target.mkdir()
    run("boards", "create", "proj", "--workdir", str(target))
    target.rmdir()  # moved away after the board was made
    run("profiles", "add", "w", "--command", "true")
    t = new_task("work", "--assignee", "w", "--board", "proj")
    run("dispatch")
    assert not target.exists()
    task = json.loads(run("show", t, "--json").stdout)
    assert task["status"] != "running"
    assert any(f["kind"] == "target_missing" for f in diagnostics("--task", t))


# -- supervision and the board's budget --------------------------------------------------------------------


def test_supervision_runs_spend_their_own_budget_and_stay_out_of_the_boards_list(cli_home: Path) -> None:
    from dispatch.conftest import wait_for

    done = f"{sys.executable} -m agentboard complete --summary done"
    run("profiles", "add", "boss", "--command", done)
    run("profiles", "add", "w", "--command", done)
    run("supervisor", "enable", "boss")
    run("budget", "set", "--board", "default", "--max-runs", "1")
    stuck = new_task("stuck", "--assignee", "w")
    run("block", stuck, "which database should this use?")  # wakes the supervisor

    def settled() -> list[dict[str, object]]:
        # the supervisor's command completes without marking its wake handled, so the wake
        # re-fires once and is then escalated to a person: wait until no wake is open and
        # every supervision task is done
        run("dispatch")
        wakes = json.loads(run("supervisor", "wakes", "--json").stdout)
        rows = json.loads(run("list", "--supervision", "--json").stdout)
        jobs = [r for r in rows if r["id"] != stuck]
        open_wakes = [w for w in wakes if w["status"] in ("pending", "running")]
        return [] if open_wakes or any(r["status"] != "done" for r in jobs) else jobs

    jobs = wait_for(settled, what="the supervisor's tasks run and complete")
    assert 1 <= len(jobs) <= 2  # the wake's run and its one re-fire
    # the board's list (and columns) leave them out unless asked for
    listed = [r["id"] for r in json.loads(run("list", "--json").stdout)]
    assert not [j for j in jobs if j["id"] in listed]
    # the board's one run is still there for the work
    work = new_task("the real work", "--assignee", "w")
    wait_for(lambda: run("dispatch") and json.loads(run("show", work, "--json").stdout)["status"] == "done",
             what="the work runs on the board's budget")
    # budget show says what spent what
    text = run("budget", "show").stdout
    assert "board default (counts work): runs 1 run / 1 run" in text, text
    assert "spent on board default (all time): work 1 run" in text
    m = re.search(r"; supervision (\d+) runs?, .*, counted against its own supervision budget", text)
    assert m and int(m.group(1)) >= 1, text
    (board,) = [b for b in json.loads(run("budget", "show", "--board", "default", "--json").stdout)
                if b["scope"] == "board"]
    assert board["spent"]["runs"] == 1 and board["by"]["supervision"]["spent"]["runs"] == int(m.group(1))


def test_with_supervision_budget_off_supervision_runs_count_against_the_board(cli_home: Path) -> None:
    from dispatch.conftest import wait_for

    done = f"{sys.executable} -m agentboard complete --summary done"
    run("profiles", "add", "boss", "--command", done)
    run("profiles", "add", "w", "--command", done)
    run("supervisor", "enable", "boss")
    assert "against the board's budget" in run("supervisor", "budget", "shared").stdout
    run("budget", "set", "--board", "default", "--max-runs", "1")
    stuck = new_task("stuck", "--assignee", "w")
    run("block", stuck, "which database should this use?")

    def supervised() -> list[dict[str, object]]:
        run("dispatch")
        rows = json.loads(run("list", "--supervision", "--json").stdout)
        return [r for r in rows if r["id"] != stuck and r["status"] == "done"]

    wait_for(supervised, what="the supervisor's task runs and completes")
    work = new_task("the real work", "--assignee", "w")
    run("dispatch")
    task = json.loads(run("show", work, "--json").stdout)
    assert (task["status"], task["block_kind"]) == ("blocked", "budget")
    assert "board default (counts work and supervision): runs 1 run / 1 run" in run("budget", "show").stdout


def test_the_board_view_hides_supervision_tasks_unless_asked(home: Path) -> None:
    from api.conftest import start_api

    import agentboard
    from agentboard.kernel import supervision

    with agentboard.connect(str(home)) as ab, start_api(ab) as api:
        ab.add_profile("boss", command="true")
        ab.add_profile("w", command="true")
        supervision.set_supervisor(ab.db, "default", "boss")
        board = ab.board()
        stuck = board.create("stuck", assignee="w")["id"]
        board.block(stuck, "which database should this use?")
        supervision.take_due(ab.db, "default")
        c = api.as_admin

        def ids(view: dict[str, object]) -> set[str]:
            return {t["id"] for col in view["columns"] for t in col["tasks"]}  # type: ignore[index, union-attr]

        plain = c.get("/api/board", params={"board": "default"}).json()
        full = c.get("/api/board", params={"board": "default", "supervision": True}).json()
        extra = ids(full) - ids(plain)
        assert len(extra) == 1 and stuck in ids(plain)
        assert plain["hidden_supervision"] == 1 and full["total"] == plain["total"] + 1
        listed = {t["id"] for t in c.get("/api/tasks", params={"board": "default"}).json()}
        assert listed == {stuck}
        assert {t["id"] for t in c.get("/api/tasks", params={"supervision": True}).json()} == {stuck} | extra
