"""A profile's program is looked up on the PATH its workers get (the user's without agentboard's
own virtualenv), so `profiles check`, the warning of `profiles add` and `diagnostics` say "ok"
only for what the dispatcher can start; and what they say to do fixes what is wrong."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from agentboard.domain.worker_env import agentboard_dirs, user_path


def _only_in_agentboards_venv() -> str:
    """A console script of agentboard's own virtualenv that the user's PATH does not have."""
    own = os.pathsep.join(sorted(agentboard_dirs()))
    for name in ("uvicorn", "alembic", "mcp", "fastapi", "dotenv"):
        if shutil.which(name, path=own) and not shutil.which(name, path=user_path()):
            return name
    pytest.skip("no program of agentboard's virtualenv is missing from the user's PATH here")


@pytest.fixture
def activated(monkeypatch: pytest.MonkeyPatch) -> None:
    """agentboard's virtualenv first on PATH, as `source .venv/bin/activate` (the README) leaves it."""
    own = os.pathsep.join(sorted(agentboard_dirs()))
    monkeypatch.setenv("PATH", own + os.pathsep + os.environ.get("PATH", os.defpath))


def _by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def test_a_program_only_agentboards_own_virtualenv_has_is_not_ok_anywhere_as_the_dispatcher_cannot_start_it(
        cli, activated) -> None:
    program = _only_in_agentboards_venv()
    added = cli("profiles", "add", "venvonly", "--command", f"{program} --help")
    assert added.code == 0
    assert "only agentboard's own virtualenv has it" in added.err
    check = cli("profiles", "check", "venvonly", "--json")
    assert check.code == 1
    (item,) = check.json()["checks"]
    assert (item["name"], item["ok"]) == ("executable", False)
    assert "was not found on PATH" in item["detail"] and item["fix"]
    t = cli("create", "t", "--assignee", "venvonly", "--json").json()["id"]
    found = cli("diagnostics", "--json").json()
    assert [f["kind"] for f in found if f["task_id"] == t] == ["command_not_found"]
    # the dispatcher agrees: it cannot start it
    passed = cli("dispatch", "--wait")
    assert f"could not start {t}" in passed.out and "was not found on PATH" in passed.out


def test_the_command_line_check_shows_the_interpreter_a_worker_runs_not_agentboards_own(cli, tmp_path,
                                                                                       activated) -> None:
    theirs = shutil.which("python3", path=user_path())
    if theirs is None:
        pytest.skip("no python3 on the user's PATH outside agentboard's virtualenv")
    agent = tmp_path / "agent.py"
    agent.write_text("print('hi')\n")
    cli("profiles", "add", "py", "--command", f"python3 {agent}")
    check = cli("profiles", "check", "py", "--json")
    assert check.code == 0, check.out
    shown = _by_name(check.json())["command line"]["detail"]
    assert shown.split()[0] == theirs
    assert not shown.startswith(os.path.dirname(sys.executable) + os.sep)


def test_a_script_that_is_not_executable_is_told_to_chmod_it_everywhere(cli, tmp_path: Path) -> None:
    script = tmp_path / "noexec.sh"
    script.write_text("echo hi\n")
    script.chmod(0o644)
    added = cli("profiles", "add", "noexec", "--command", str(script))
    assert f"`chmod +x {script}`" in added.err and "until it exists" not in added.err
    cli("create", "t", "--assignee", "noexec")
    (finding,) = [f for f in cli("diagnostics", "--json").json() if f["kind"] == "command_not_found"]
    assert finding["fix"] == f"chmod +x {script}"
    check = cli("profiles", "check", "noexec", "--json")
    assert check.code == 1
    assert [(c["ok"], c["fix"]) for c in check.json()["checks"]] == [(False, f"chmod +x {script}")]
    # following the fix clears all three
    script.chmod(0o755)
    assert cli("profiles", "check", "noexec").code == 0
    assert not [f for f in cli("diagnostics", "--json").json() if f["kind"] == "command_not_found"]


def test_every_failing_command_line_check_has_a_fix(cli, tmp_path: Path) -> None:
    cli("profiles", "add", "missing", "--command", f"{tmp_path}/nowhere/agent.sh --fast")
    cli("profiles", "add", "relative", "--command", "./agents/run.sh")
    reports = {r["profile"]: r for r in cli("profiles", "check", "--json").json()}
    failing = [(p, c) for p, r in reports.items() for c in r["checks"] if not c["ok"]]
    assert {p for p, _ in failing} == {"missing", "relative"}
    assert all(c["fix"] for _, c in failing), failing
    (rel,) = [c for p, c in failing if p == "relative"]
    assert rel["fix"].startswith("agentboard profiles set relative --command ")
