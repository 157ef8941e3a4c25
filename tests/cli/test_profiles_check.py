"""`agentboard profiles check` and POST /api/profiles/{name}/check against the real agent CLIs
(installed by scripts/test into .cache/agentclis; skipped with a reason when missing, failed
under CI=true)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from testenv import real_cli

ROOT = Path(__file__).resolve().parents[2]


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
    assert "was not found on PATH" in by_name(reports["ghost"])["executable"]["detail"]
    assert by_name(reports["ghost"])["executable"]["fix"].startswith("agentboard profiles set ghost --command ")
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


# -- the endpoint setups of docs/agents.md (a provider of their own, its key where it names it) ---

def codex_home_with_provider(folder, url: str = "http://127.0.0.1:9", *, selected: bool = True):
    """A CODEX_HOME whose config.toml defines the provider `scripted` (key in $SCRIPTED_API_KEY),
    named as the model provider unless ``selected`` is False."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(
        'model = "gpt-5.1-codex"\n' + ('model_provider = "scripted"\n' if selected else "")
        + f'\n[model_providers.scripted]\nname = "scripted"\nbase_url = "{url}/v1"\nwire_api = "responses"\n'
        'env_key = "SCRIPTED_API_KEY"\nrequest_max_retries = 0\nstream_max_retries = 0\n')
    return folder


def opencode_config(url: str = "http://127.0.0.1:9", api_key: str = "sk-scripted") -> str:
    return json.dumps({"provider": {"scripted": {"npm": "@ai-sdk/openai-compatible", "name": "scripted",
                                                 "options": {"baseURL": f"{url}/v1", "apiKey": api_key},
                                                 "models": {"m1": {"name": "m1"}}}},
                       "model": "scripted/m1"})


@pytest.fixture
def no_keys(monkeypatch):
    """No credential of any agent CLI in this process's environment (the check looks there too)."""
    from agentboard.dispatch.profile_check import CREDENTIAL_ENV

    for var in {n for names in CREDENTIAL_ENV.values() for n in names} | {
            "SCRIPTED_API_KEY", "CODEX_HOME", "OPENCODE_CONFIG_CONTENT", "XDG_CONFIG_HOME"}:
        monkeypatch.delenv(var, raising=False)


def test_a_codex_profile_whose_config_names_its_model_provider_has_credentials_when_the_provider_key_is_set(
        cli, tmp_path, no_keys):
    exe = real_cli("codex")
    home = codex_home_with_provider(tmp_path / "codex-home")
    cli("profiles", "add", "cx", "--adapter", "codex", "--command", exe, "--env", f"CODEX_HOME={home}",
        "--env", "SCRIPTED_API_KEY=sk-scripted", "--env", f"HOME={tmp_path}")
    r = cli("profiles", "check", "cx", "--no-run", "--json")
    assert r.code == 0, (r.out, r.err)
    credentials = by_name(r.json())["credentials"]
    assert credentials["ok"] and not credentials["warn"], credentials
    assert "$SCRIPTED_API_KEY" in credentials["detail"] and "'scripted'" in credentials["detail"]
    assert str(home / "config.toml") in credentials["detail"]


def test_a_codex_profile_without_its_providers_key_fails_the_check_naming_that_key_not_openais(
        cli, tmp_path, no_keys, monkeypatch):
    exe = real_cli("codex")
    home = codex_home_with_provider(tmp_path / "codex-home")
    cli("profiles", "add", "cx", "--adapter", "codex", "--command", exe, "--env", f"CODEX_HOME={home}",
        "--env", f"HOME={tmp_path}")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")  # OpenAI's key does not sign in to that provider
    r = cli("profiles", "check", "cx", "--no-run", "--json")
    assert r.code == 1, (r.out, r.err)
    credentials = by_name(r.json())["credentials"]
    assert not credentials["ok"] and "$SCRIPTED_API_KEY" in credentials["detail"], credentials
    assert "OPENAI_API_KEY" not in credentials["detail"]
    assert credentials["fix"].startswith("set SCRIPTED_API_KEY in the profile's env")
    monkeypatch.setenv("SCRIPTED_API_KEY", "sk-scripted")  # the dispatcher's environment reaches its workers
    assert cli("profiles", "check", "cx", "--no-run", "--json").code == 0


def test_a_model_provider_chosen_by_a_config_override_in_the_profiles_command_is_the_one_checked(
        cli, tmp_path, no_keys):
    exe = real_cli("codex")
    home = codex_home_with_provider(tmp_path / "codex-home", selected=False)
    cli("profiles", "add", "cx", "--adapter", "codex", "--command", f"{exe} -c model_provider=scripted",
        "--env", f"CODEX_HOME={home}", "--env", "SCRIPTED_API_KEY=sk-scripted", "--env", f"HOME={tmp_path}")
    r = cli("profiles", "check", "cx", "--no-run", "--json")
    assert r.code == 0, (r.out, r.err)
    assert "$SCRIPTED_API_KEY" in by_name(r.json())["credentials"]["detail"]
    cli("profiles", "set", "cx", "--command", exe)  # without the override: OpenAI's, and no key or login for it
    plain = cli("profiles", "check", "cx", "--no-run", "--json")
    assert plain.code == 1 and "$OPENAI_API_KEY" in by_name(plain.json())["credentials"]["detail"]


def test_the_sign_in_advice_of_a_codex_profile_with_a_provider_of_its_own_names_the_providers_key(tmp_path, no_keys):
    from agentboard.dispatch.adapters import LOGIN
    from agentboard.dispatch.agent_config import login_fix

    home = codex_home_with_provider(tmp_path / "codex-home")
    fix = login_fix("codex", {"command": "codex", "env": {"CODEX_HOME": str(home)}})
    assert fix.startswith("set SCRIPTED_API_KEY in the profile's env") and "'scripted'" in fix
    assert "OPENAI_API_KEY" not in fix
    assert login_fix("codex", {"command": "codex", "env": {"HOME": str(tmp_path)}}) == LOGIN["codex"]
    assert login_fix("claude", {"env": {"CODEX_HOME": str(home)}}) == LOGIN["claude"]


@pytest.mark.parametrize("where", ["content", "env reference", "config file"])
def test_an_opencode_profile_with_its_providers_api_key_in_its_config_has_credentials(
        cli, tmp_path, no_keys, where):
    exe = real_cli("opencode")
    env = ["--env", f"HOME={tmp_path}"]
    if where == "content":
        env += ["--env", f"OPENCODE_CONFIG_CONTENT={opencode_config()}"]
    elif where == "env reference":
        env += ["--env", "OPENCODE_CONFIG_CONTENT=" + opencode_config(api_key="{env:SCRIPTED_KEY}"),
                "--env", "SCRIPTED_KEY=sk-scripted"]
    else:
        folder = tmp_path / ".config" / "opencode"
        folder.mkdir(parents=True)
        (folder / "opencode.jsonc").write_text("// the user's config\n" + opencode_config())
    cli("profiles", "add", "oc", "--adapter", "opencode", "--command", exe, *env)
    r = cli("profiles", "check", "oc", "--no-run", "--json")
    assert r.code == 0, (r.out, r.err)
    credentials = by_name(r.json())["credentials"]
    assert credentials["ok"] and not credentials["warn"], credentials
    assert "apiKey of provider 'scripted'" in credentials["detail"]
    assert "sk-scripted" not in credentials["detail"]


def test_an_opencode_key_that_names_an_unset_variable_is_no_credential(cli, tmp_path, no_keys):
    exe = real_cli("opencode")
    cli("profiles", "add", "oc", "--adapter", "opencode", "--command", exe, "--env", f"HOME={tmp_path}",
        "--env", "OPENCODE_CONFIG_CONTENT=" + opencode_config(api_key="{env:SCRIPTED_KEY}"))
    credentials = by_name(cli("profiles", "check", "oc", "--no-run", "--json").json())["credentials"]
    assert credentials["warn"] and "none found" in credentials["detail"]


def test_a_codex_home_under_the_temp_folder_is_a_warning_naming_a_home_outside_it(cli, tmp_path, no_keys):
    exe = real_cli("codex")
    home = codex_home_with_provider(Path(tempfile.gettempdir()) / f"agentboard-test-{uuid.uuid4().hex[:8]}")
    try:
        cli("profiles", "add", "cx", "--adapter", "codex", "--command", exe, "--env", f"CODEX_HOME={home}",
            "--env", "SCRIPTED_API_KEY=sk-scripted", "--env", f"HOME={tmp_path}")
        r = cli("profiles", "check", "cx", "--no-run", "--json")
        assert r.code == 0, (r.out, r.err)  # a warning, not a failure
        warning = by_name(r.json())["Codex home"]
        assert warning["ok"] and warning["warn"], warning
        assert str(home) in warning["detail"] and "codex-linux-sandbox" in warning["detail"]
        assert "agentboard profiles set cx --env CODEX_HOME=" in warning["fix"] and "outside" in warning["fix"]
        text = cli("profiles", "check", "cx", "--no-run")
        assert "warn Codex home: CODEX_HOME" in text.out
    finally:
        shutil.rmtree(home, ignore_errors=True)
    cli("profiles", "set", "cx", "--env", "CODEX_HOME=/srv/codex-home")
    assert "Codex home" not in by_name(cli("profiles", "check", "cx", "--no-run", "--json").json())


class ModelServer:
    """The scripted model server (tests/fakes/model_server.py), a process of its own."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir()
        self.script_file = folder / "script.json"
        self.script({"text": "OK"})
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fakes" / "model_server.py"),
                                      str(self.script_file), str(folder / "requests.jsonl")],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def script(self, *turns: dict) -> None:
        self.script_file.write_text(json.dumps({"turns": list(turns),
                                                "usage": {"input_tokens": 12, "output_tokens": 1}}))


@pytest.fixture
def model_server(tmp_path):
    server = ModelServer(tmp_path / "model")
    try:
        assert server.url.startswith("http://127.0.0.1:"), server.url
        yield server
    finally:
        server.proc.terminate()
        server.proc.wait(10)


@pytest.mark.parametrize(("adapter", "named"), [("codex", "gpt-5.1-codex"), ("opencode", "scripted/m1")])
def test_a_turn_names_the_model_the_profiles_config_names(cli, tmp_path, no_keys, model_server, adapter, named):
    env = ["--env", f"HOME={tmp_path}"]
    if adapter == "codex":
        home = codex_home_with_provider(tmp_path / "codex-home", model_server.url)
        env += ["--env", f"CODEX_HOME={home}", "--env", "SCRIPTED_API_KEY=sk-scripted"]
    else:
        env += ["--env", f"OPENCODE_CONFIG_CONTENT={opencode_config(model_server.url)}",
                "--env", "OPENCODE_DISABLE_MODELS_FETCH=1"]
    cli("profiles", "add", "agent", "--adapter", adapter, "--command", real_cli(adapter), *env)
    r = cli("profiles", "check", "agent", "--no-run", "--turn", "--json")
    turn = by_name(r.json())["turn"]
    assert turn["ok"], turn
    assert f"{named} replied 'OK'" in turn["detail"], turn
    assert "default model" not in turn["detail"]


def test_a_turn_whose_key_a_codex_provider_refuses_names_that_providers_key_in_its_fix(
        cli, tmp_path, no_keys, model_server):
    model_server.script({"status": 401})
    home = codex_home_with_provider(tmp_path / "codex-home", model_server.url)
    cli("profiles", "add", "cx", "--adapter", "codex", "--command", real_cli("codex"), "--env", f"HOME={tmp_path}",
        "--env", f"CODEX_HOME={home}", "--env", "SCRIPTED_API_KEY=sk-refused")
    r = cli("profiles", "check", "cx", "--no-run", "--turn", "--json")
    assert r.code == 1
    turn = by_name(r.json())["turn"]
    assert not turn["ok"] and "could not sign in" in turn["detail"], turn
    assert turn["fix"].startswith("set SCRIPTED_API_KEY in the profile's env"), turn
    assert "OPENAI_API_KEY" not in turn["fix"]
