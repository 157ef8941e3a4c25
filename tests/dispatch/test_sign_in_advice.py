"""What a blocked task tells a person to do when an agent CLI's sign-in was refused
(``agent_config.login_fix``), read from the profile's real configuration."""

from __future__ import annotations

import json
from pathlib import Path

from agentboard.dispatch.adapters import LOGIN
from agentboard.dispatch.agent_config import login_fix


def _provider(key: str) -> dict:
    return {"npm": "@ai-sdk/openai-compatible", "name": "gateway",
            "options": {"baseURL": "https://gateway.example/v1", "apiKey": key},
            "models": {"m1": {"name": "m1"}}}


def test_an_opencode_profile_whose_key_is_refused_is_told_to_fix_its_providers_api_key_not_anthropics(
        tmp_path: Path) -> None:
    config = {"provider": {"gateway": _provider("sk-wrong")}, "model": "gateway/m1"}
    fix = login_fix("opencode", {"env": {"OPENCODE_CONFIG_CONTENT": json.dumps(config), "HOME": str(tmp_path)}})
    assert fix == ("set a valid key as the apiKey of provider 'gateway' in $OPENCODE_CONFIG_CONTENT "
                   "(the profile's env)")
    assert "ANTHROPIC_API_KEY" not in fix


def test_an_opencode_key_read_from_a_variable_names_that_variable(tmp_path: Path) -> None:
    config = {"provider": {"gateway": _provider("{env:GATEWAY_API_KEY}"), "other": _provider("sk-other")},
              "model": "gateway/m1"}
    fix = login_fix("opencode", {"env": {"OPENCODE_CONFIG_CONTENT": json.dumps(config), "HOME": str(tmp_path)}})
    assert fix.startswith("set GATEWAY_API_KEY in the profile's env to a key provider 'gateway' accepts"), fix


def test_an_opencode_key_in_the_users_config_file_names_that_file_and_the_profiles_model_picks_the_provider(
        tmp_path: Path) -> None:
    folder = tmp_path / ".config" / "opencode"
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_text(json.dumps(
        {"provider": {"gateway": _provider("sk-1"), "second": _provider("sk-2")}}))
    fix = login_fix("opencode", {"model": "second/m1", "env": {"HOME": str(tmp_path)}})
    assert fix == f"set a valid key as the apiKey of provider 'second' in {folder / 'opencode.json'}"


def test_an_opencode_model_of_a_provider_no_config_gives_a_key_gets_the_login_advice(tmp_path: Path) -> None:
    config = {"provider": {"gateway": _provider("sk-1")}}
    profile = {"model": "anthropic/claude-sonnet-4-5",
               "env": {"OPENCODE_CONFIG_CONTENT": json.dumps(config), "HOME": str(tmp_path)}}
    assert login_fix("opencode", profile) == LOGIN["opencode"]
    assert login_fix("opencode", {"env": {"HOME": str(tmp_path)}}) == LOGIN["opencode"]
