"""`agentboard llm check` and `agentboard profiles describe --auto`, run as a user runs them (a
real process) against the loopback OpenAI-compatible server or the fake agent CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.fake_openai import FakeOpenAI

FAKE_CLI = str(Path(__file__).resolve().parent.parent / "fakes" / "fake_llm_cli")
EXE = str(Path(sys.executable).with_name("agentboard"))


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


def test_llm_check_prints_the_backend_model_latency_and_usage(fake_llm: FakeOpenAI) -> None:
    r = run("llm", "check")
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(None, 1) for line in r.stdout.splitlines())
    assert lines["backend"] == f"endpoint {fake_llm.url} model fake-model"
    assert lines["model"] == "fake-model"
    assert lines["latency"].endswith(" ms")
    assert lines["usage"] == "input_tokens 6, output_tokens 1"
    assert lines["answer"] == "OK"
    assert [m["content"] for m in fake_llm.requests[0]["messages"]] == ["Reply with the single word OK."]


def test_llm_check_json_for_one_use(fake_llm: FakeOpenAI, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[llm.reviewer]\nmodel = "review-model"\n')
    r = run("llm", "check", "--use", "reviewer", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ok"] is True and out["use"] == "reviewer" and out["backend"] == "endpoint"
    assert out["model"] == "review-model"
    assert out["usage"] == {"input_tokens": 6, "output_tokens": 1}
    assert fake_llm.requests[0]["model"] == "review-model"


def test_llm_check_through_an_agent_cli(home: Path) -> None:
    r = run("llm", "check", AGENTBOARD_LLM_COMMAND=f"{FAKE_CLI} -p --output-format json")
    assert r.returncode == 0, r.stderr
    assert f"backend  command {FAKE_CLI} -p --output-format json" in r.stdout
    assert "model    claude-sonnet-4-5-20250929" in r.stdout
    assert "usage    input_tokens 12, output_tokens 34, cost_usd 0.0123" in r.stdout


def test_llm_check_with_nothing_configured_says_why_and_exits_6(home: Path) -> None:
    r = run("llm", "check")
    assert r.returncode == 6
    assert r.stdout == ""
    assert r.stderr.startswith("error: unavailable: no LLM is configured: set AGENTBOARD_LLM_BASE_URL")
    assert len(r.stderr.strip().splitlines()) == 1


def test_llm_check_against_a_failing_server_says_exactly_what_failed(fake_llm: FakeOpenAI) -> None:
    fake_llm.script({"status": 500})
    r = run("llm", "check", AGENTBOARD_LLM_MAX_RETRIES="0")
    assert r.returncode == 6
    assert r.stderr.strip() == (f"error: unavailable: the LLM at {fake_llm.url} answered 500 after 1 "
                                "attempt(s): The server had an error while processing your request")


def test_llm_check_of_an_unknown_use_is_a_usage_error(fake_llm: FakeOpenAI) -> None:
    r = run("llm", "check", "--use", "poet")
    assert r.returncode == 2
    assert "unknown LLM use 'poet'" in r.stderr
    assert fake_llm.requests == []


@pytest.fixture
def profile_with_runs(home: Path) -> str:
    """A profile `writer` whose two finished runs left summaries."""
    import agentboard
    from agentboard.kernel import profiles, runs, tasks

    client = agentboard.connect(str(home))
    try:
        profiles.add(client.db, "writer", command="fake-writer --task {task_id}", description="old text")
        for title, summary in (("Write the changelog", "wrote CHANGELOG.md for 0.3"),
                               ("Document the API", "added docs/api.md with every route")):
            t = tasks.create(client.db, "default", title, assignee="writer")
            run_id = runs.claim(client.db, "default", t["id"])["run_id"]
            runs.complete(client.db, "default", t["id"], summary=summary, run_id=run_id, force_done=True)
    finally:
        client.close()
    return "writer"


def _description(home: Path, name: str) -> str:
    import agentboard
    from agentboard.kernel import profiles

    client = agentboard.connect(str(home))
    try:
        return str(profiles.get(client.db, name)["description"])
    finally:
        client.close()


def test_profiles_describe_auto_drafts_from_the_command_and_recent_runs_and_stores_it(
        fake_llm: FakeOpenAI, home: Path, profile_with_runs: str) -> None:
    fake_llm.script('"Writes and updates project documentation: changelogs, API references."')
    r = run("profiles", "describe", profile_with_runs, "--auto")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Writes and updates project documentation: changelogs, API references."
    assert _description(home, "writer") == r.stdout.strip()
    prompt = fake_llm.requests[0]["messages"][-1]["content"]
    assert "Command: fake-writer --task {task_id}" in prompt
    assert "Document the API (completed): added docs/api.md with every route" in prompt
    assert "Write the changelog (completed): wrote CHANGELOG.md for 0.3" in prompt
    assert prompt.index("Document the API") < prompt.index("Write the changelog")  # newest first


def test_profiles_describe_auto_dry_run_only_prints(
        fake_llm: FakeOpenAI, home: Path, profile_with_runs: str) -> None:
    fake_llm.script("Writes docs.")
    r = run("profiles", "describe", profile_with_runs, "--auto", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Writes docs."
    assert "nothing stored" in r.stderr
    assert _description(home, "writer") == "old text"


def test_profiles_describe_auto_without_an_llm_exits_6_and_changes_nothing(
        home: Path, profile_with_runs: str) -> None:
    r = run("profiles", "describe", profile_with_runs, "--auto")
    assert r.returncode == 6
    assert r.stderr.startswith("error: unavailable: no LLM is configured")
    assert _description(home, "writer") == "old text"


def test_profiles_describe_needs_text_or_auto(home: Path, profile_with_runs: str) -> None:
    r = run("profiles", "describe", profile_with_runs)
    assert r.returncode == 2 and "give either --text T or --auto" in r.stderr
    r = run("profiles", "describe", profile_with_runs, "--text", "new text")
    assert r.returncode == 0 and _description(home, "writer") == "new text"
