"""A value of the wrong type in config.toml is refused as its environment form is, and a table that
is no section of config.toml is named in a warning rather than silently ignored (docs/settings.md).

Each case runs the real ``agentboard`` command in a new interpreter: the exit code, the one-line
error and the logged warning are what a user sees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _agentboard(home: Path, config: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    (home / "config.toml").write_text(config)
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    run_env.update(AGENTBOARD_HOME=str(home), **env)
    return subprocess.run([sys.executable, "-m", "agentboard", *args], env=run_env, capture_output=True,
                          text=True, timeout=120)


def _refused(out: subprocess.CompletedProcess[str], name: str) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: invalid setting {name}="), out.stderr
    assert "Traceback" not in out.stderr and "TypeError" not in out.stderr
    return lines[0]


@pytest.mark.parametrize(("name", "toml", "env"), [
    ("claim_ttl", "true", "true"),
    ("failure_limit", "3.5", "3.5"),
    ("max_parallel", "2.9", "2.9"),
    ("max_parallel", "3.0", "3.0"),
])
def test_a_boolean_or_a_fraction_for_a_whole_number_setting_is_refused_like_its_environment_form(
        cli_home: Path, name: str, toml: str, env: str) -> None:
    from_env = _refused(_agentboard(cli_home, "", "list", **{f"AGENTBOARD_{name.upper()}": env}), name)
    from_file = _refused(_agentboard(cli_home, f"{name} = {toml}\n", "list"), name)
    must_be = from_env.split(": must be ", 1)[1].split(" (from ", 1)[0]
    assert f": must be {must_be} (from {cli_home / 'config.toml'})" in from_file


def test_a_boolean_for_a_number_setting_is_refused_like_its_environment_form(cli_home: Path) -> None:
    _refused(_agentboard(cli_home, "", "list", AGENTBOARD_DISPATCH_INTERVAL="true"), "dispatch_interval")
    line = _refused(_agentboard(cli_home, "dispatch_interval = true\n", "list"), "dispatch_interval")
    assert "must be a number from 0.1 to 86400" in line


def test_whole_numbers_and_numbers_of_the_right_type_in_config_toml_are_still_taken(cli_home: Path) -> None:
    out = _agentboard(cli_home, "max_parallel = 3\nclaim_ttl = 60\ndispatch_interval = 5\nspawn_grace = 0.5\n"
                      "verify = true\n", "list")
    assert out.returncode == 0 and out.stderr == "", out.stderr


@pytest.mark.parametrize(("name", "value"), [
    ("max_parallel", "[2]"), ("max_parallel", "{a = 1}"), ("dispatch_interval", "[2]"),
    ("claim_ttl", "{seconds = 60}"), ("api_host", '["127.0.0.1"]'), ("notify_default", '{url = "x"}'),
])
def test_a_table_or_an_array_where_one_value_is_expected_is_refused_in_one_line_and_nothing_is_written(
        cli_home: Path, name: str, value: str) -> None:
    before = (cli_home / "agentboard.db").read_bytes()
    _refused(_agentboard(cli_home, f"{name} = {value}\n", "create", "a task"), name)
    assert (cli_home / "agentboard.db").read_bytes() == before


def test_settings_under_a_misnamed_table_are_named_in_a_warning_saying_to_move_them_to_the_top(
        cli_home: Path) -> None:
    out = _agentboard(cli_home, "[dispatcher]\nmax_parallel = 2\n", "list")
    assert out.returncode == 0, out.stderr
    assert (f"{cli_home / 'config.toml'}: [dispatcher] is not a section of config.toml and is ignored; "
            "max_parallel is a top-level setting: put it above any [section]") in out.stderr
    two = _agentboard(cli_home, "[dispatcher]\nmax_parallel = 2\nfailure_limit = 3\n", "list")
    assert "max_parallel, failure_limit are top-level settings: put them above any [section]" in two.stderr


def test_an_unknown_table_is_named_in_a_warning_and_ignored(cli_home: Path) -> None:
    out = _agentboard(cli_home, "[foo]\nx = 2\n", "list")
    assert out.returncode == 0, out.stderr
    assert "[foo] is not a section of config.toml and is ignored" in out.stderr
    near = _agentboard(cli_home, '[lm.reviewer]\nmodel = "m"\n', "list")
    assert "[lm] is not a section of config.toml" in near.stderr and "did you mean [llm.…]?" in near.stderr


def test_with_an_agentboard_table_what_is_outside_it_is_named_in_a_warning(cli_home: Path) -> None:
    out = _agentboard(cli_home, "failure_limit = 3\n[agentboard]\nmax_parallel = 2\n[dispatcher]\nclaim_ttl = 5\n",
                      "list")
    assert out.returncode == 0, out.stderr
    assert "'failure_limit' is outside the [agentboard] table and is ignored; put it in [agentboard]" in out.stderr
    assert "[dispatcher] is not a section of config.toml and is ignored; claim_ttl is a setting of [agentboard]: " \
           "put it there" in out.stderr


@pytest.mark.parametrize("config", [
    '[llm]\n[chat]\n[llm.reviewer]\nmodel = "m"\n[chat.slack]\nsigning_secret = "s"\n',
    '[agentboard]\nmax_parallel = 2\n[llm.reviewer]\nmodel = "m"\n[chat.slack]\nsigning_secret = "s"\n',
    '[agentboard]\nmax_parallel = 2\n[agentboard.llm.reviewer]\nmodel = "m"\n',
])
def test_the_known_sections_stay_silent(cli_home: Path, config: str) -> None:
    out = _agentboard(cli_home, config, "list")
    assert out.returncode == 0 and out.stderr == "", out.stderr


@pytest.mark.parametrize("value", ['""', '"  "', '" web-1"'])
def test_a_blank_host_id_is_refused_since_runs_and_pass_marks_would_name_no_host(cli_home: Path, value: str) -> None:
    line = _refused(_agentboard(cli_home, f"host_id = {value}\n", "list"), "host_id")
    assert "not empty" in line
    assert _agentboard(cli_home, 'host_id = "web-1"\n', "list").returncode == 0
