"""The command backend: a real agent-CLI process (tests/fakes/fake_llm_cli) reading the prompt on
stdin and printing Claude Code's or Codex's output."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest
from fakes.fake_openai import FakeOpenAI
from testenv import wait_for

from agentboard import config
from agentboard.agents import llm
from agentboard.dispatch import liveness
from agentboard.domain.errors import Unavailable

FAKE_CLI = str(Path(__file__).resolve().parent.parent / "fakes" / "fake_llm_cli")
CLAUDE = f"{shlex.quote(FAKE_CLI)} -p --output-format json"
CODEX = f"{shlex.quote(FAKE_CLI)} exec --json -"


@pytest.fixture
def reply(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The fake CLI answers FAKE_LLM_REPLY and writes the prompt it read to the returned path."""
    prompt = tmp_path / "prompt.txt"
    monkeypatch.setenv("FAKE_LLM_REPLY", '{"fanout": false}')
    monkeypatch.setenv("FAKE_LLM_PROMPT_FILE", str(prompt))
    monkeypatch.delenv("FAKE_LLM_MODE", raising=False)
    return prompt


def _settings(home: Path, command: str) -> config.Settings:
    return config.load(str(home), llm_command=command)


def test_claude_codes_json_envelope_gives_the_answer_the_usage_the_cost_and_the_model(
        home: Path, reply: Path) -> None:
    answer = llm.ask(_settings(home, CLAUDE), "decomposer", "split this idea", system="Answer JSON.")
    assert answer.text == '{"fanout": false}'
    assert answer.backend == "command"
    assert answer.model == "claude-sonnet-4-5-20250929"
    assert answer.usage == {"input_tokens": 12, "output_tokens": 34, "cost_usd": 0.0123}
    assert reply.read_text() == "Answer JSON.\n\nsplit this idea"


def test_codexs_json_events_give_the_last_agent_message_and_the_turns_usage(home: Path, reply: Path) -> None:
    answer = llm.ask(_settings(home, CODEX), "reviewer", "review this")
    assert answer.text == '{"fanout": false}'
    assert answer.model is None
    assert answer.usage == {"input_tokens": 1500, "output_tokens": 42}
    assert reply.read_text() == "review this"


def test_any_other_output_is_the_answer_as_plain_text(home: Path, reply: Path) -> None:
    answer = llm.ask(_settings(home, shlex.quote(FAKE_CLI)), "specifier", "hello")
    assert answer.text == '{"fanout": false}'
    assert answer.usage is None and answer.model is None


@pytest.mark.parametrize("command, needle", [
    (CLAUDE, "exited with 1: Invalid API key"),
    (CODEX, "exited with 1: unexpected status 401 Unauthorized"),
    (shlex.quote(FAKE_CLI), "exited with 3: fake llm: something went wrong"),
])
def test_an_agent_cli_that_fails_is_unavailable_with_what_it_said(
        home: Path, reply: Path, monkeypatch: pytest.MonkeyPatch, command: str, needle: str) -> None:
    monkeypatch.setenv("FAKE_LLM_MODE", "error")
    with pytest.raises(Unavailable) as err:
        llm.ask(_settings(home, command), "specifier", "hello")
    assert err.value.message.startswith("unavailable: the LLM command fake_llm_cli ")
    assert needle in err.value.message


def test_a_command_that_is_not_installed_is_unavailable_before_it_runs(home: Path) -> None:
    settings = _settings(home, "no-such-agent-cli -p")
    ok, why = llm.availability(settings, "specifier")
    assert not ok and why == "the LLM command 'no-such-agent-cli' was not found on PATH"
    with pytest.raises(Unavailable) as err:
        llm.ask(settings, "specifier", "hi")
    assert err.value.message == "unavailable: " + why


def test_a_hanging_command_is_killed_with_its_whole_process_group_at_the_timeout(
        home: Path, reply: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    monkeypatch.setenv("FAKE_LLM_MODE", "hang")
    monkeypatch.setenv("FAKE_LLM_PID_FILE", str(pids))
    started = time.monotonic()
    with pytest.raises(Unavailable) as err:
        llm.ask(_settings(home, CLAUDE), "specifier", "hello", timeout=1.0)
    took = time.monotonic() - started
    assert took >= 1.0  # not stopped before its timeout
    assert "timed out after 1s" in err.value.message
    leader, child = (int(p) for p in pids.read_text().split())
    # the `sleep` it started is gone too (a killed process leaves once the kernel has ended it)
    wait_for(lambda: not liveness.group_has_live(leader, own_session=True), 30, "the command's group to be gone")
    wait_for(lambda: not liveness.pid_alive(child), 30, "the command's child to be gone")


def test_a_per_use_command_runs_that_use_while_the_others_ask_the_endpoint(
        fake_llm: FakeOpenAI, home: Path, reply: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f"[llm.reviewer]\ncommand = {CODEX!r}\n".replace("'", '"'))
    settings = config.load(str(home))
    assert llm.ask(settings, "reviewer", "review").backend == "command"
    assert llm.ask(settings, "specifier", "specify").backend == "endpoint"
    assert len(fake_llm.requests) == 1
    assert llm.availability(settings, "reviewer") == (True, f"command {CODEX}")


def test_the_boards_own_variables_never_reach_the_command(
        home: Path, reply: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENTBOARD_DATABASE_URL", "postgresql://board:secret@db/board")
    monkeypatch.setenv("FAKE_LLM_REPLY_FILE", str(tmp_path / "reply.txt"))
    (tmp_path / "reply.txt").write_text("from the file")
    script = tmp_path / "env-echo"
    script.write_text("#!/bin/sh\ncat >/dev/null\nenv | grep -c '^AGENTBOARD_' || true\necho \"$FAKE_LLM_REPLY_FILE\"\n")
    script.chmod(0o755)
    answer = llm.ask(config.load(str(home), llm_command=str(script)), "specifier", "hi")
    assert answer.text.split() == ["0", str(tmp_path / "reply.txt")]
