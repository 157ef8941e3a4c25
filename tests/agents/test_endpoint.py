"""The endpoint backend against a real OpenAI-compatible server on loopback (real HTTP)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fakes.fake_openai import FakeOpenAI

from agentboard import config
from agentboard.agents import llm
from agentboard.domain.errors import InvalidInput, Unavailable


def _settings(**overrides: object) -> config.Settings:
    return config.load(**overrides)


def test_an_answer_comes_back_with_the_model_and_the_token_usage(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("Goal: ship it.")
    answer = llm.ask(_settings(), "specifier", "rewrite this one-liner", system="You are terse.")
    assert answer.text == "Goal: ship it."
    assert answer.backend == "endpoint"
    assert answer.model == "fake-model"
    assert answer.usage == {"input_tokens": 6, "output_tokens": 3}
    assert answer.latency_s > 0
    body = fake_llm.requests[0]
    assert body["model"] == "fake-model"
    assert body["messages"] == [{"role": "system", "content": "You are terse."},
                                {"role": "user", "content": "rewrite this one-liner"}]
    assert fake_llm.headers[0]["authorization"] == "Bearer sk-test"


def test_a_cost_the_server_reports_is_kept(fake_llm: FakeOpenAI) -> None:
    fake_llm.script({"text": "ok", "usage": {"cost": 0.0021}})
    assert llm.ask(_settings(), "reviewer", "hi").usage == {"input_tokens": 1, "output_tokens": 1,
                                                            "cost_usd": 0.0021}


def test_a_429_is_retried_and_the_second_answer_is_used(fake_llm: FakeOpenAI) -> None:
    fake_llm.script({"status": 429}, "after the rate limit")
    answer = llm.ask(_settings(), "decomposer", "split this")
    assert answer.text == "after the rate limit"
    assert len(fake_llm.requests) == 2


def test_500s_until_the_retries_run_out_are_unavailable_with_the_status(fake_llm: FakeOpenAI) -> None:
    fake_llm.script({"status": 500}, {"status": 500})
    with pytest.raises(Unavailable) as err:
        llm.ask(_settings(llm_max_retries=1), "specifier", "hi")
    assert err.value.message.startswith("unavailable: ")
    assert "answered 500 after 2 attempt(s)" in err.value.message
    assert "The server had an error" in err.value.message
    assert len(fake_llm.requests) == 2


def test_a_body_that_is_not_json_is_a_clear_failure(fake_llm: FakeOpenAI) -> None:
    fake_llm.script({"garbage": True})
    with pytest.raises(Unavailable) as err:
        llm.ask(_settings(), "specifier", "hi")
    assert "not a chat completion" in err.value.message


def test_a_reply_slower_than_the_timeout_is_unavailable_and_says_it_timed_out(fake_llm: FakeOpenAI) -> None:
    fake_llm.script({"delay": 3.0, "text": "too late"})
    started = time.monotonic()
    with pytest.raises(Unavailable) as err:
        llm.ask(_settings(llm_max_retries=0), "specifier", "hi", timeout=0.3)
    assert time.monotonic() - started < 2.0
    assert "timed out after 0.3s" in err.value.message


def test_nothing_configured_is_unavailable_and_sends_no_request(
        fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AGENTBOARD_LLM_BASE_URL", "AGENTBOARD_LLM_MODEL"):
        monkeypatch.delenv(var)
    settings = _settings()
    ok, why = llm.availability(settings, "specifier")
    assert not ok and "no LLM is configured" in why and "AGENTBOARD_LLM_COMMAND" in why
    with pytest.raises(Unavailable) as err:
        llm.ask(settings, "specifier", "hi")
    assert err.value.message == "unavailable: " + why
    assert fake_llm.requests == [] and fake_llm.paths == []


def test_an_endpoint_without_a_model_is_unavailable_before_any_request(
        fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTBOARD_LLM_MODEL")
    ok, why = llm.availability(_settings(), "reviewer")
    assert not ok and "AGENTBOARD_LLM_MODEL" in why
    with pytest.raises(Unavailable):
        llm.ask(_settings(), "reviewer", "hi")
    assert fake_llm.paths == []


def test_an_unreachable_endpoint_is_unavailable_and_names_it(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    with FakeOpenAI() as server:
        url = server.url
    settings = _settings(llm_base_url=url, llm_model="m", llm_max_retries=0)
    with pytest.raises(Unavailable) as err:
        llm.ask(settings, "specifier", "hi")
    assert f"cannot reach the LLM at {url}" in err.value.message


def test_a_per_use_model_in_config_toml_is_the_model_asked(fake_llm: FakeOpenAI, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[llm.decomposer]\nmodel = "big-model"\n')
    settings = _settings()
    llm.ask(settings, "decomposer", "split")
    llm.ask(settings, "specifier", "specify")
    assert [r["model"] for r in fake_llm.requests] == ["big-model", "fake-model"]
    assert llm.availability(settings, "decomposer") == (True, f"endpoint {fake_llm.url} model big-model")


def test_per_use_tables_are_read_beside_an_agentboard_table(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[agentboard]\nllm_timeout = 5\n\n[llm.reviewer]\ncommand = "claude -p"\n'
                                      'timeout = 30\n')
    settings = _settings()
    assert settings.llm_timeout == 5.0
    assert settings.llm_uses == {"reviewer": {"command": "claude -p", "timeout": 30.0}}
    assert llm.resolve(settings, "reviewer").timeout == 30.0
    assert llm.resolve(settings, "specifier").timeout == 5.0


@pytest.mark.parametrize("toml, needle", [
    ('[llm.planner]\nmodel = "x"\n', "unknown LLM use [llm.planner]"),
    ('[llm.reviewer]\ntemperature = "0"\n', "unknown keys ['temperature']"),
    ('[llm.reviewer]\nmodel = ""\n', "model must be non-empty text"),
])
def test_a_wrong_per_use_table_is_refused_with_what_is_wrong(home: Path, toml: str, needle: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(toml)
    with pytest.raises(InvalidInput) as err:
        _settings()
    assert needle in err.value.message


def test_an_unknown_use_is_invalid_input(fake_llm: FakeOpenAI) -> None:
    with pytest.raises(InvalidInput):
        llm.ask(_settings(), "poet", "hi")
    assert fake_llm.requests == []


def test_the_api_key_never_shows_in_the_settings_shown(fake_llm: FakeOpenAI) -> None:
    shown = config.shown(_settings())
    assert shown["llm_api_key"] == "***"
    assert shown["llm_model"] == "fake-model"


def test_record_usage_writes_an_llm_used_event_on_the_task(fake_llm: FakeOpenAI, home: Path) -> None:
    import agentboard
    from agentboard.kernel import queries, tasks

    fake_llm.script({"text": "fine", "usage": {"cost": 0.5}})
    client = agentboard.connect(str(home))
    try:
        task = tasks.create(client.db, "default", "an idea")
        answer = llm.ask(client.settings, "specifier", "specify it")
        llm.record_usage(client.db, "default", task["id"], "specifier", answer)
        events = queries.events_after(client.db, "default", task_id=task["id"], kinds=["llm_used"])
    finally:
        client.close()
    assert len(events) == 1
    payload = events[0]["payload"]
    assert payload["use"] == "specifier" and payload["backend"] == "endpoint"
    assert payload["model"] == "fake-model"
    assert payload["input_tokens"] == 2 and payload["output_tokens"] == 1 and payload["cost_usd"] == 0.5
    assert payload["latency_s"] >= 0
    assert events[0]["actor"] == "llm:specifier"


@pytest.mark.parametrize("reply, value", [
    ('{"fanout": false}', {"fanout": False}),
    ('Here you go:\n```json\n{"tasks": [1, 2]}\n```\nAnything else?', {"tasks": [1, 2]}),
    ('Sure! The plan is {"fanout": true, "tasks": []} as asked.', {"fanout": True, "tasks": []}),
    ("```\n[1, 2, 3]\n```", [1, 2, 3]),
])
def test_json_is_found_in_a_reply_with_prose_and_fences_around_it(reply: str, value: object) -> None:
    assert llm.parse_json(reply) == value


def test_a_reply_without_json_is_invalid_input_quoting_it() -> None:
    with pytest.raises(InvalidInput) as err:
        llm.parse_json("I would rather not {answer} that")
    assert err.value.message == "the LLM answered no JSON: I would rather not {answer} that"
