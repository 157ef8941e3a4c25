"""Each agent CLI's success and failure output, recorded in its real format
(tests/fakes/recordings, taken from the CLIs' source and documentation), read by its adapter and
replayed through the dispatcher by tests/fakes/replay_cli."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from agentboard.dispatch import adapters

from .conftest import FAKES, events, wait_for

RECORDINGS = FAKES / "recordings"
REPLAY = FAKES / "replay_cli"


def recording(name: str) -> str:
    return (RECORDINGS / name).read_text().replace("{RESET}", str(int(time.time()) + 3600))


def outcome(cli: str, name: str) -> adapters.Outcome:
    text = recording(name)
    return adapters.outcome_of(cli, adapters.json_events(text), text)


# -- reading the recordings -----------------------------------------------------------------------

@pytest.mark.parametrize(("cli", "tokens", "cost"), [
    ("claude", (2362, 135), 0.0412825),
    ("codex", (24763, 122), None),
    ("gemini", (15521, 373), None),
    ("opencode", (11402 + 214 + 11392, 96 + 14), 0.035646 + 0.0044322),
])
def test_a_successful_run_gives_its_usage_cost_final_message_and_tool_calls(cli, tokens, cost):
    out = outcome(cli, f"{cli}-success.jsonl")
    assert (out.input_tokens, out.output_tokens) == tokens
    assert out.cost_usd == (pytest.approx(cost) if cost is not None else None)
    assert out.final_text == "Wrote notes.md and reported the task complete."
    assert out.tool_uses == 2
    assert not out.is_error and not out.no_result and out.failure is None


@pytest.mark.parametrize(("cli", "name", "failure", "reset_in"), [
    ("claude", "claude-auth.jsonl", "auth", None),
    ("claude", "claude-rate-limit.jsonl", "rate_limit", 3600),
    ("claude", "claude-network.jsonl", "network", None),
    ("codex", "codex-rate-limit.jsonl", "rate_limit", 2 * 3600 + 5 * 60),
    ("codex", "codex-network.jsonl", "network", None),
    ("gemini", "gemini-rate-limit.jsonl", "rate_limit", 4352),
    ("gemini", "gemini-network.jsonl", "network", None),
    ("opencode", "opencode-auth.jsonl", "auth", None),
    ("opencode", "opencode-network.jsonl", "network", None),
    # no internet but a service on the local network that answered 500: opencode's own line
    # about its model catalog is not the service's failure
    ("opencode", "opencode-server-error.jsonl", None, None),
])
def test_a_failed_run_is_classified_with_its_reset_time(cli, name, failure, reset_in):
    out = outcome(cli, name)
    assert out.is_error and out.failure == failure, out
    if reset_in is None:
        assert out.retry_at is None
    else:
        assert out.retry_at == pytest.approx(time.time() + reset_in, abs=5)
    assert out.error


def test_the_tool_calls_in_a_growing_log_are_counted_once(tmp_path):
    log = tmp_path / "run.log"
    lines = recording("gemini-success.jsonl").splitlines(keepends=True)
    log.write_text("".join(lines[:5]) + lines[5][:20])  # a line still being written
    calls, offset = adapters.progress("gemini", log, 0)
    assert calls == 1
    log.write_text("".join(lines))
    calls, offset = adapters.progress("gemini", log, offset)
    assert calls == 1 and offset == log.stat().st_size
    assert adapters.progress("gemini", log, offset) == (0, offset)


# -- replayed through the dispatcher -----------------------------------------------------------------

def replay_cli(tmp_path: Path, cli: str, name: str) -> str:
    """An executable named after the CLI that replays ``name`` as that CLI."""
    folder = tmp_path / f"bin-{name}"
    folder.mkdir()
    exe = folder / cli
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {REPLAY} {cli} {RECORDINGS / name} \"$@\"\n")
    exe.chmod(0o755)
    return str(exe)


def task_row(board, task_id):
    detail = board.show(task_id)
    return detail.get("task", detail)


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini", "opencode"])
def test_a_replayed_success_completes_the_task_with_its_usage_and_the_tasks_own_model(
        ab, board, dispatcher, tmp_path, cli):
    argv_out = tmp_path / "argv.json"
    ab.add_profile(cli, adapter=cli, command=replay_cli(tmp_path, cli, f"{cli}-success.jsonl"),
                   model_name="profile/model", env={"REPLAY_ARGV_OUT": str(argv_out)})
    t = board.create("write the notes", assignee=cli, model="provider/task-model")
    dispatcher()
    wait_for(lambda: task_row(board, t["id"])["status"] == "done", what="the task to complete")
    # the agent reported mid-run; its usage is read from its output when it exits
    run = wait_for(lambda: [r for r in board.runs(t["id"]) if r.get("input_tokens") is not None],
                   what="the run's usage")[0]
    expected = outcome(cli, f"{cli}-success.jsonl")
    assert (run["input_tokens"], run["output_tokens"]) == (expected.input_tokens, expected.output_tokens)
    assert run["cost_usd"] == (pytest.approx(expected.cost_usd) if expected.cost_usd is not None else None)
    assert run["summary"] == "wrote notes.md"
    argv = json.loads(argv_out.read_text())
    assert argv[argv.index("--model") + 1] == "provider/task-model"
    assert task_row(board, t["id"])["model"] == "provider/task-model"


@pytest.mark.parametrize(("cli", "login"), [("claude", "/login"), ("opencode", "opencode auth login")])
def test_a_missing_login_blocks_the_task_for_a_person_naming_the_login_command_without_retrying(
        ab, board, dispatcher, tmp_path, cli, login):
    ab.add_profile(cli, adapter=cli, command=replay_cli(tmp_path, cli, f"{cli}-auth.jsonl"))
    t = board.create("needs a login", assignee=cli, max_retries=5)
    d = dispatcher(start=False)  # passes driven by the test, so "no retry" means "none in these passes"

    def blocked() -> bool:
        d.run_pass()
        return task_row(board, t["id"])["status"] == "blocked"

    wait_for(blocked, what="the task to block")
    task = task_row(board, t["id"])
    assert task["block_kind"] == "needs_input"
    assert login in task["block_reason"] and "could not sign in" in task["block_reason"]
    for _ in range(3):
        d.run_pass()
    assert len(board.runs(t["id"])) == 1
    assert task_row(board, t["id"])["status"] == "blocked"


def test_a_rate_limit_with_a_reset_time_blocks_the_task_until_then(ab, board, dispatcher, tmp_path):
    ab.add_profile("codex", adapter="codex", command=replay_cli(tmp_path, "codex", "codex-rate-limit.jsonl"))
    t = board.create("hits the usage limit", assignee="codex")
    dispatcher(rate_limit_cooldown=60)
    wait_for(lambda: task_row(board, t["id"])["status"] == "blocked", what="the task to block")
    task = task_row(board, t["id"])
    assert task["block_kind"] == "rate_limited"
    # the reset time Codex printed (in 2 hours 5 minutes), not the 60 s default
    assert task["cooldown_until"] == pytest.approx(time.time() + 7500, abs=30)
    assert "the reset time it gave" in task["block_reason"]
    assert [r["outcome"] for r in board.runs(t["id"])] == ["rate_limited"]


def test_a_lost_network_is_retried_after_a_back_off_without_counting_as_a_failure(ab, board, dispatcher, tmp_path):
    ab.add_profile("gemini", adapter="gemini", command=replay_cli(tmp_path, "gemini", "gemini-network.jsonl"))
    t = board.create("offline", assignee="gemini")
    dispatcher(network_retry_base=600)
    wait_for(lambda: board.runs(t["id"]) and board.runs(t["id"])[0]["outcome"], what="the run to end")
    run = board.runs(t["id"])[0]
    task = task_row(board, t["id"])
    assert run["outcome"] == "crashed" and run["error"].startswith("network failure 1 in a row")
    assert "retrying in 600s" in run["error"]
    assert task["status"] == "ready" and task["consecutive_failures"] == 0
    assert task["cooldown_until"] == pytest.approx(time.time() + 600, abs=30)


def slow_gemini(tmp_path: Path, tool_calls: int) -> str:
    """A Gemini CLI stand-in that works for ~9 s, printing a tool call every 0.3 s (or nothing),
    then reports through `agentboard complete`."""
    exe = tmp_path / "gemini"
    exe.write_text(f"""#!{sys.executable}
import json, subprocess, sys, time
if sys.argv[1:] == ["--version"]:
    print("0.61.0"); sys.exit(0)
def emit(o):
    print(json.dumps(o), flush=True)
emit({{"type": "init", "timestamp": "t", "session_id": "s", "model": "gemini-2.5-pro"}})
for i in range(30):
    time.sleep(0.3)
    if {tool_calls}:
        emit({{"type": "tool_use", "timestamp": "t", "tool_name": "read_file", "tool_id": f"read_file-{{i}}",
              "parameters": {{"file_path": "notes.md"}}}})
        emit({{"type": "tool_result", "timestamp": "t", "tool_id": f"read_file-{{i}}", "status": "success", "output": ""}})
subprocess.run(["agentboard", "complete", "--summary", "read the notes"], check=False)
emit({{"type": "result", "timestamp": "t", "status": "success", "stats": {{"input_tokens": 10, "output_tokens": 2}}}})
""")
    exe.chmod(0o755)
    return str(exe)


@pytest.mark.parametrize(("tool_calls", "outcomes"), [(True, ["completed"]), (False, ["stale"])])
def test_an_agents_tool_calls_are_its_heartbeat_and_a_quiet_one_goes_stale(
        ab, board, dispatcher, tmp_path, tool_calls, outcomes):
    ab.add_profile("gemini", adapter="gemini", command=slow_gemini(tmp_path, tool_calls))
    t = board.create("read for a while", assignee="gemini")
    # 4 s without a sign of life: past the quiet one's start on a loaded machine, well before its end
    dispatcher(stale_timeout=4, stale_heartbeat=4)
    wait_for(lambda: [r for r in board.runs(t["id"]) if r.get("outcome")], what="the first run to end")
    assert [r["outcome"] for r in board.runs(t["id"])][:1] == outcomes
    beats = events(board, t["id"], "heartbeat")
    if tool_calls:
        assert beats and "tool call" in beats[0]["payload"]["note"]
    else:
        assert not beats


def test_the_gemini_settings_stay_out_of_the_tasks_git_diff(tmp_path):
    import subprocess

    repo = tmp_path / "repo"
    (repo / ".gemini").mkdir(parents=True)
    (repo / ".gemini" / "styleguide.md").write_text("be brief\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"agentboard": {"command": "agentboard", "args": ["mcp"]}}}))
    prompt = tmp_path / "prompt.md"
    prompt.write_text("hello")
    exe = replay_cli(tmp_path, "gemini", "gemini-success.jsonl")
    adapters.build({"name": "g", "adapter": "gemini", "command": exe}, task_id="t_1", run_id=1, workspace=repo,
                   prompt_file=prompt, board="default")
    settings = json.loads((repo / ".gemini" / "settings.json").read_text())
    assert settings["mcpServers"]["agentboard"]["trust"] is True
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=all"],
                            capture_output=True, text=True, check=True).stdout
    assert ".gemini/settings.json" not in status
    # a repository that tracks its own Gemini settings is refused, never changed
    subprocess.run(["git", "-C", str(repo), "add", "-f", ".gemini/settings.json"], check=True)
    with pytest.raises(adapters.AdapterError, match="tracks .gemini/settings.json"):
        adapters.build({"name": "g", "adapter": "gemini", "command": exe}, task_id="t_1", run_id=2, workspace=repo,
                       prompt_file=prompt, board="default")
