"""`agentboard profiles check` and POST /api/profiles/{name}/check against the real agent CLIs
(installed by scripts/test into .cache/agentclis; skipped with a reason when missing, failed
under CI=true)."""

from __future__ import annotations

import os

import pytest
from testenv import real_cli


def by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


@pytest.mark.parametrize(("adapter", "login"), [("claude", "/login"), ("gemini", "GEMINI_API_KEY")])
def test_a_profile_without_a_login_is_ready_but_for_it_and_the_check_names_the_fix(cli, tmp_path, adapter, login):
    exe = real_cli(adapter)
    home = tmp_path / "agent-home"
    home.mkdir()
    assert cli("profiles", "add", "agent", "--adapter", adapter, "--command", exe, "--env", f"HOME={home}").code == 0
    r = cli("profiles", "check", "agent", "--json")
    assert r.code == 1, r.err
    report = r.json()
    checks = by_name(report)
    assert report["ok"] is False and report["adapter"] == adapter
    assert checks["executable"]["ok"] and exe in checks["executable"]["detail"]
    assert checks["command line"]["ok"] and "<prompt>" in checks["command line"]["detail"]
    assert "Say hello" not in checks["command line"]["detail"]
    assert checks["flags accepted"]["ok"], checks["flags accepted"]
    assert checks["MCP wiring"]["ok"]
    assert not checks["credentials"]["ok"] and login in checks["credentials"]["fix"]
    text = cli("profiles", "check", "agent")
    assert "FAIL credentials" in text.out and "fix:" in text.out


def test_a_profile_with_its_key_in_its_env_passes_every_check(cli, tmp_path):
    exe = real_cli("codex")
    cli("profiles", "add", "coder", "--adapter", "codex", "--command", exe, "--env", "OPENAI_API_KEY=sk-test",
        "--env", f"HOME={tmp_path}")
    r = cli("profiles", "check", "coder", "--json")
    assert r.code == 0, (r.out, r.err)
    checks = by_name(r.json())
    assert [c["name"] for c in r.json()["checks"]] == ["executable", "command line", "flags accepted", "MCP wiring",
                                                        "credentials"]
    assert "$OPENAI_API_KEY" in checks["credentials"]["detail"]
    assert "mcp_servers.agentboard" in checks["command line"]["detail"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the root refusal needs a dispatcher running as root")
def test_full_permission_for_claude_as_root_fails_the_check_naming_the_setting_to_change(cli):
    exe = real_cli("claude")
    cli("profiles", "add", "risky", "--adapter", "claude", "--command", exe, "--permission", "full")
    r = cli("profiles", "check", "risky", "--json")
    assert r.code == 1
    line = by_name(r.json())["command line"]
    assert not line["ok"] and "root" in line["detail"]
    assert "agentboard profiles set risky --permission edit" in line["fix"]


def test_an_unsupported_version_fails_the_check_with_how_to_install_a_supported_one(cli, tmp_path):
    old = tmp_path / "gemini"
    old.write_text("#!/bin/sh\necho 0.1.0\n")
    old.chmod(0o755)
    cli("profiles", "add", "old", "--adapter", "gemini", "--command", str(old))
    r = cli("profiles", "check", "old", "--json")
    assert r.code == 1
    exe = by_name(r.json())["executable"]
    assert not exe["ok"] and "0.1.0" in exe["detail"] and "not supported" in exe["detail"]
    assert "npm install -g @google/gemini-cli" in exe["fix"]


def test_every_profile_is_checked_when_none_is_named(cli):
    cli("profiles", "add", "shell", "--command", "echo hi")
    cli("profiles", "add", "ghost", "--command", "no-such-agent-binary --go")
    r = cli("profiles", "check", "--json")
    reports = {rep["profile"]: rep for rep in r.json()}
    assert reports["shell"]["ok"] and not reports["ghost"]["ok"]
    assert "was not found on PATH" in by_name(reports["ghost"])["command line"]["detail"]
    assert r.code == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="the root warning needs a dispatcher running as root")
def test_adding_a_full_permission_claude_profile_as_root_warns_with_the_setting_to_change(cli):
    r = cli("profiles", "add", "risky", "--adapter", "claude", "--command", "claude", "--permission", "full")
    assert r.code == 0
    assert "Claude Code refuses permission = full" in r.err
    assert "agentboard profiles set risky --permission edit" in r.err
    fixed = cli("profiles", "set", "risky", "--permission", "edit")
    assert fixed.code == 0 and "warning" not in fixed.err


def test_a_script_given_by_a_relative_path_is_a_warning_naming_the_absolute_path_to_give(cli, tmp_path):
    added = cli("profiles", "add", "researcher", "--command", "python3 research.py {task_id}")
    assert added.code == 0
    assert "warning: profile researcher: script 'research.py' (run by python3) is a relative path" in added.err
    assert "agentboard profiles set researcher --command 'python3 /path/to/research.py {task_id}'" in added.err
    r = cli("profiles", "check", "researcher", "--json")
    assert r.code == 0, (r.out, r.err)  # a warning, not a failure: the task's repository may hold it
    report = r.json()
    script = by_name(report)["executable"]
    assert report["ok"] and script["ok"] and script["warn"]
    assert "resolves in each task's workspace" in script["detail"] and "absolute path" in script["detail"]
    assert script["fix"] == "agentboard profiles set researcher --command 'python3 /path/to/research.py {task_id}'"
    text = cli("profiles", "check", "researcher")
    assert "warn executable: script 'research.py'" in text.out and "fix:" in text.out
    agent = tmp_path / "research.py"
    agent.write_text("print('hi')\n")
    fixed = cli("profiles", "set", "researcher", "--command", f"python3 {agent} {{task_id}}")
    assert fixed.code == 0 and "warning" not in fixed.err
    assert not any(c["warn"] for c in cli("profiles", "check", "researcher", "--json").json()["checks"])


def test_inline_code_a_module_or_a_placeholder_is_no_relative_script():
    from agentboard.dispatch.profile_check import relative_script

    assert relative_script("python3 -u agent.py {task_id}") == ("agent.py", "python3")
    assert relative_script("FOO=1 sh agents/fix.sh") == ("agents/fix.sh", "sh")
    assert relative_script("./agent.sh {task_id}") == ("./agent.sh", None)
    for fine in ("python3 -m mypkg.agent", "sh -c 'echo hi'", "python3 {script}", "sh /abs/run.sh",
                 "mytool --task {task_id}", "/usr/bin/python3 /abs/a.py", ""):
        assert relative_script(fine) is None, fine
