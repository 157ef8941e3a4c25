"""The agent CLI adapters against the real Claude Code, Codex, Gemini CLI and opencode.

`scripts/test` installs the four from the npm registry into `.cache/agentclis` in the repository.
With no credentials and no way out (every request goes to a closed loopback proxy), each CLI
must get past argument parsing with the adapter's exact command line and fail only where it
needs its service. Locally a missing install skips these tests with a reason; under CI=true it
fails them.
"""

from __future__ import annotations

import json
import os
import pwd
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testenv import real_cli

from agentboard.dispatch import adapters

from .conftest import wait_for

# what a CLI prints when it refuses its command line
REFUSALS = ("unexpected argument", "unknown option", "cannot be used with root", "error: invalid value",
            "Usage: codex exec", "Unknown argument", "Not enough arguments", "Invalid values",
            "Configuration is invalid", "Invalid configuration", "Skipping", "not running in a trusted directory",
            "overridden")


def offline_env(home: Path) -> dict[str, str]:
    """No credentials, a fresh home, and every request sent to a closed port."""
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TERM", "TMPDIR")}
    closed = "http://127.0.0.1:9"
    return {**keep, "HOME": str(home), "CODEX_HOME": str(home / ".codex"), "HTTPS_PROXY": closed,
            "HTTP_PROXY": closed, "https_proxy": closed, "http_proxy": closed, "NO_PROXY": "", "no_proxy": "",
            "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1", "XDG_DATA_HOME": str(home / ".local/share"),
            "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache")}


def workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".mcp.json").write_text(json.dumps(
        {"mcpServers": {"agentboard": {"command": sys.executable, "args": ["-m", "agentboard", "mcp"],
                                     "env": {"AGENTBOARD_TASK": "t_1"}}}}))
    prompt = tmp_path / "prompt.md"
    prompt.write_text("- Say hello, then report through kanban_complete.")
    return ws, prompt


def launch_for(adapter: str, executable: str, permission: str, tmp_path: Path, worker_uid: int | None = None,
               model: str | None = None) -> adapters.Launch:
    ws, prompt = workspace(tmp_path)
    profile = {"name": "p", "adapter": adapter, "command": executable, "permission": permission, "model": model}
    return adapters.build(profile, task_id="t_1", run_id=1, workspace=ws, prompt_file=prompt, board="default",
                          worker_uid=worker_uid)


def argv_for(adapter: str, executable: str, permission: str, tmp_path: Path, worker_uid: int | None = None) -> list[str]:
    return launch_for(adapter, executable, permission, tmp_path, worker_uid).argv


def run_claude(argv: list[str], env: dict[str, str], cwd: Path, user: int | None = None) -> tuple[int, str]:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, user=user, group=user, extra_groups=[] if user else None)
    return proc.returncode, proc.stdout + proc.stderr


def run_codex_until_turn(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 90.0) -> str:
    """Codex's output until it starts its first turn (then it would only retry its service), or exits."""
    return run_until(argv, env, cwd, (b'"turn.started"',), timeout)


def run_until(argv: list[str], env: dict[str, str], cwd: Path, markers: tuple[bytes, ...],
              timeout: float = 120.0) -> str:
    """A CLI's output (stdout and stderr) until it prints one of ``markers`` (then it would only
    retry its service), or exits."""
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    assert proc.stdout is not None
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not any(m in out for m in markers):
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return out.decode("utf-8", "replace")


def assert_parsed(output: str) -> None:
    for refusal in REFUSALS:
        assert refusal not in output, output


# -- claude --------------------------------------------------------------------------------------

def test_claude_default_permission_gets_past_its_arguments_and_stops_at_the_missing_login(tmp_path):
    claude = real_cli("claude")
    argv = argv_for("claude", claude, "edit", tmp_path)
    code, output = run_claude(argv, offline_env(tmp_path / "home"), tmp_path / "ws")
    assert_parsed(output)
    outcome = adapters.outcome_of("claude", adapters.json_events(output))
    assert not outcome.no_result, output
    assert outcome.is_error and "log" in (outcome.final_text or "").lower(), output
    assert classified("claude", output).failure == "auth", output
    assert code != 0


def test_claude_read_permission_is_accepted(tmp_path):
    claude = real_cli("claude")
    code, output = run_claude(argv_for("claude", claude, "read", tmp_path), offline_env(tmp_path / "home"),
                              tmp_path / "ws")
    assert_parsed(output)
    assert not adapters.outcome_of("claude", adapters.json_events(output)).no_result, output


def test_claude_full_permission_as_root_is_refused_naming_the_setting_to_change(tmp_path):
    claude = real_cli("claude")
    with pytest.raises(adapters.AdapterError) as err:
        argv_for("claude", claude, "full", tmp_path, worker_uid=0)
    assert "--permission edit" in str(err.value) and "root" in str(err.value)


def test_claude_full_permission_is_accepted_for_a_user_that_is_not_root(tmp_path):
    claude = real_cli("claude")
    user: int | None = None
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("nobody").pw_uid
        except KeyError:
            pytest.skip("running as root with no `nobody` user to run Claude Code as")
        for p in [tmp_path, *tmp_path.parents]:
            p.chmod(p.stat().st_mode | stat.S_IXOTH)
    argv = argv_for("claude", claude, "full", tmp_path, worker_uid=user)
    home = tmp_path / "home"
    env = offline_env(home)
    if user is not None:
        for p in (home, tmp_path / "ws"):
            os.chown(p, user, user)
    code, output = run_claude(argv, env, tmp_path / "ws", user=user)
    assert_parsed(output)
    assert "--dangerously-skip-permissions" in argv
    assert not adapters.outcome_of("claude", adapters.json_events(output)).no_result, output


def classified(adapter: str, output: str) -> adapters.Outcome:
    return adapters.outcome_of(adapter, adapters.json_events(output), output)


#: what each CLI, started by a dispatcher running as root with the profile's default
#: permission, meets with no credentials and no network: a login it lacks, or its service
ROOT_RUNS = {
    "claude": ("needs_input", "/login"),
    "gemini": ("needs_input", "GEMINI_API_KEY"),
    "opencode": ("needs_input", "opencode auth login"),
}


#: what the CLI meets and how its failure is classified do not depend on the database: SQLite only
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("adapter", ["claude", "codex", "gemini", "opencode"])
def test_a_dispatcher_running_as_root_runs_each_cli_in_its_default_mode_and_classifies_the_failure(
        ab, board, dispatcher, tmp_path, adapter):
    exe = real_cli(adapter)
    if os.geteuid() != 0:
        pytest.skip("the dispatcher is not running as root here")
    home = tmp_path / "agent-home"
    env = {k: v for k, v in offline_env(home).items() if k not in ("PATH", "LANG", "TERM", "TMPDIR")}
    model = "anthropic/claude-sonnet-4-5" if adapter == "opencode" else None
    ab.add_profile(adapter, adapter=adapter, command=exe, env=env, model_name=model)
    t = board.create("say hello", assignee=adapter, max_retries=1)
    # a worker waiting for its network changes nothing on the board: only a pass reads its
    # output, so the passes come every two seconds here rather than every minute
    dispatcher(dispatch_interval=2)
    run = wait_for(lambda: [r for r in board.runs(t["id"]) if r.get("outcome")], timeout=300,
                   what="the run to end")[0]
    assert run["outcome"] != "spawn_failed", run
    log = (ab.home / "boards/default/logs" / f"{t['id']}.log").read_text()
    assert_parsed(log)
    task = board.show(t["id"])
    task = task.get("task", task)
    if adapter == "codex":
        # Codex waits for its network without end: the dispatcher sees it waiting in its output,
        # stops it and retries it after a back-off (not counted against the failure limit)
        assert run["outcome"] == "crashed" and "could not reach its service" in run["error"], run
        assert "waiting for its network" in run["error"], run
        assert '"turn.started"' in log and classified("codex", log).failure == "network", log
        assert task["status"] in ("ready", "running") and task["block_kind"] is None, task
        assert task["consecutive_failures"] == 0, task
        return
    kind, fix = ROOT_RUNS[adapter]
    assert (task["status"], task["block_kind"]) == ("blocked", kind), (task, log)
    assert fix in task["block_reason"], task["block_reason"]
    assert len(board.runs(t["id"])) == 1  # a missing login is not retried


def test_a_claude_run_that_exits_0_without_its_result_event_is_a_crash_not_a_success(ab, board, dispatcher, tmp_path):
    # what Claude Code 2.1 did when refusing a flag: one line, exit 0, no JSON at all
    exe = tmp_path / "claude"
    exe.write_text("#!/bin/sh\n[ \"$1\" = --version ] && { echo '2.1.197 (Claude Code)'; exit 0; }\n"
                   "echo 'a flag cannot be used here'\nexit 0\n")
    exe.chmod(0o755)
    ab.add_profile("claude", adapter="claude", command=str(exe))
    t = board.create("say hello", assignee="claude", max_retries=1)
    dispatcher()
    run = wait_for(lambda: [r for r in board.runs(t["id"]) if r.get("outcome")], what="the run to end")[0]
    assert run["outcome"] == "crashed", run
    assert "without its final result event" in run["error"] and "a flag cannot be used here" in run["error"]


# -- codex ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("permission", ["edit", "full", "read"])
def test_codex_gets_past_its_arguments_in_each_permission_mode_and_stops_at_its_service(tmp_path, permission):
    codex = real_cli("codex")
    argv = argv_for("codex", codex, permission, tmp_path)
    output = run_codex_until_turn(argv, offline_env(tmp_path / "home"), tmp_path / "ws")
    assert_parsed(output)
    assert '"thread.started"' in output, output


def test_codexs_command_line_names_the_board_servers_identity_but_never_holds_its_token(tmp_path):
    """A command line is readable by every local user (``ps``): Codex is told which variables of
    its own environment to hand the board's server, not their values; other servers keep theirs,
    and one that cannot start (here: no such program) is left out, not fatal to the run."""
    codex = real_cli("codex")
    ws, prompt = workspace(tmp_path)
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "agentboard": {"command": sys.executable, "args": ["-m", "agentboard", "mcp"],
                       "env": {"AGENTBOARD_TASK": "t_1", "AGENTBOARD_TOKEN": "abt_secret-run-token"}},
        "docs": {"command": "docs-server", "env": {"DOCS_ROOT": "/srv/docs"}}}}))
    profile = {"name": "p", "adapter": "codex", "command": codex, "permission": "edit"}
    argv = adapters.build(profile, task_id="t_1", run_id=1, workspace=ws, prompt_file=prompt, board="default").argv
    assert not [a for a in argv if "abt_secret-run-token" in a]
    assert 'mcp_servers.agentboard.env_vars=["AGENTBOARD_TASK", "AGENTBOARD_TOKEN"]' in argv
    assert 'mcp_servers.docs.env={ "DOCS_ROOT" = "/srv/docs" }' in argv
    output = run_codex_until_turn(argv, offline_env(tmp_path / "home"), ws)
    assert_parsed(output)
    assert '"thread.started"' in output, output


# -- the permission setting ---------------------------------------------------------------------

def test_a_profile_keeps_its_permission_and_the_codex_command_line_follows_it(ab, board, tmp_path):
    codex = real_cli("codex")
    p = ab.add_profile("coder", adapter="codex", command=codex, permission="read")
    assert p["permission"] == "read"
    ws, prompt = workspace(tmp_path)
    argv = adapters.build(p, task_id="t_1", run_id=1, workspace=ws, prompt_file=prompt, board="default").argv
    assert argv[argv.index("--sandbox") + 1] == "read-only"
    assert ab.add_profile("other", adapter="codex", command=codex)["permission"] == "edit"


# -- versions ------------------------------------------------------------------------------------

def fake_cli(path: Path, version_line: str, counter: Path) -> str:
    path.write_text(f"#!/bin/sh\necho probe >> {counter}\necho '{version_line}'\n")
    path.chmod(0o755)
    return str(path)


def test_an_unsupported_version_is_refused_with_how_to_install_a_supported_one(tmp_path):
    old = fake_cli(tmp_path / "codex", "codex-cli 0.50.0", tmp_path / "probes")
    with pytest.raises(adapters.AdapterError) as err:
        argv_for("codex", old, "edit", tmp_path)
    message = str(err.value)
    assert "0.50.0" in message and "not supported" in message and "npm install -g @openai/codex" in message


def test_an_executable_that_prints_no_version_is_refused(tmp_path):
    other = fake_cli(tmp_path / "claude", "hello", tmp_path / "probes")
    with pytest.raises(adapters.AdapterError) as err:
        argv_for("claude", other, "edit", tmp_path)
    assert "did not print a Claude Code version" in str(err.value)


def test_the_version_is_read_once_per_executable_until_it_changes(tmp_path):
    probes = tmp_path / "probes"
    exe = fake_cli(tmp_path / "claude", "2.1.197 (Claude Code)", probes)
    for i in range(3):
        (tmp_path / f"run{i}").mkdir()
        argv_for("claude", exe, "edit", tmp_path / f"run{i}")
    assert probes.read_text().count("probe") == 1
    later = time.time() + 5
    os.utime(exe, (later, later))
    (tmp_path / "run3").mkdir()
    argv_for("claude", exe, "edit", tmp_path / "run3")
    assert probes.read_text().count("probe") == 2


# -- gemini --------------------------------------------------------------------------------------

@pytest.mark.parametrize("permission", ["edit", "full", "read"])
def test_gemini_reads_its_arguments_and_settings_in_each_permission_mode_and_stops_at_the_missing_login(
        tmp_path, permission):
    gemini = real_cli("gemini")
    ln = launch_for("gemini", gemini, permission, tmp_path)
    env = {**offline_env(tmp_path / "home"), **ln.env}
    proc = subprocess.run(ln.argv, env=env, cwd=tmp_path / "ws", capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    output = proc.stdout + proc.stderr
    assert_parsed(output)
    # the workspace settings were read (Gemini CLI warns about their tools.allowed key) and kept out of git
    assert (tmp_path / "ws/.gemini/settings.json").exists()
    if permission != "full":
        assert "tools.allowed in settings.json" in output, output
    out = classified("gemini", output)
    assert out.failure == "auth", output
    assert proc.returncode != 0


def test_gemini_with_a_key_and_no_network_fails_only_at_its_service_and_is_classified_as_network(tmp_path):
    gemini = real_cli("gemini")
    ln = launch_for("gemini", gemini, "edit", tmp_path, model="gemini-2.5-flash")
    env = {**offline_env(tmp_path / "home"), **ln.env, "GEMINI_API_KEY": "not-a-real-key"}
    output = run_until(ln.argv, env, tmp_path / "ws", (b"fetch failed",), timeout=300)
    assert_parsed(output)
    assert '"type":"init"' in output and '"model":"gemini-2.5-flash"' in output, output
    assert classified("gemini", output).failure == "network", output


# -- opencode ------------------------------------------------------------------------------------

@pytest.mark.parametrize("permission", ["edit", "full", "read"])
def test_opencode_reads_its_arguments_and_config_in_each_permission_mode_and_stops_at_the_missing_login(
        tmp_path, permission):
    opencode = real_cli("opencode")
    ln = launch_for("opencode", opencode, permission, tmp_path, model="anthropic/claude-sonnet-4-5")
    env = {**offline_env(tmp_path / "home"), **ln.env}
    proc = subprocess.run(ln.argv, env=env, cwd=tmp_path / "ws", capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    output = proc.stdout + proc.stderr
    assert_parsed(output)
    assert '"type":"error"' in output, output  # past the config and the arguments: a session ran
    out = classified("opencode", output)
    assert out.failure == "auth", output
    assert proc.returncode != 0


def test_opencode_with_a_key_and_no_network_fails_only_at_its_service_and_is_classified_as_network(tmp_path):
    opencode = real_cli("opencode")
    ln = launch_for("opencode", opencode, "edit", tmp_path, model="anthropic/claude-sonnet-4-5")
    env = {**offline_env(tmp_path / "home"), **ln.env, "ANTHROPIC_API_KEY": "not-a-real-key"}
    output = run_until(ln.argv, env, tmp_path / "ws", (b"Unable to connect", b"Cannot connect"), timeout=300)
    assert_parsed(output)
    assert classified("opencode", output).failure == "network", output


def test_opencode_refuses_a_model_without_its_provider_naming_the_setting(tmp_path):
    opencode = real_cli("opencode")
    with pytest.raises(adapters.AdapterError) as err:
        launch_for("opencode", opencode, "edit", tmp_path, model="claude-sonnet-4-5")
    assert "provider/model" in str(err.value) and "--model" in str(err.value)


# -- codex, classified ---------------------------------------------------------------------------

def test_codex_with_no_network_is_classified_as_a_network_failure(tmp_path):
    codex = real_cli("codex")
    argv = argv_for("codex", codex, "edit", tmp_path)
    output = run_until(argv, offline_env(tmp_path / "home"), tmp_path / "ws", (b"waiting for network",), timeout=300)
    assert_parsed(output)
    assert classified("codex", output).failure == "network", output
