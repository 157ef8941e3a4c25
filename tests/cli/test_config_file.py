"""A setting misspelled in config.toml is named, with the setting it is close to, rather than
left silently at its default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_a_misspelled_setting_in_config_toml_is_named_with_the_one_meant(cli_home: Path) -> None:
    (cli_home / "config.toml").write_text('max_paralel = 3\nfailure_limit = 4\n[llm.specifier]\nmodel = "m"\n')
    env = {**os.environ, "AGENTBOARD_HOME": str(cli_home)}
    env.pop("AGENTBOARD_MAX_PARALLEL", None)
    out = subprocess.run([sys.executable, "-m", "agentboard", "list", "--json"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "unknown setting 'max_paralel' (did you mean 'max_parallel'?) is ignored" in out.stderr
    assert "failure_limit" not in out.stderr and "llm" not in out.stderr  # a known key, a table


def test_an_llm_table_for_the_supervisor_is_refused_saying_the_supervisor_is_a_profile(cli_home: Path) -> None:
    """Nothing asks an LLM for the supervisor (it is an agent profile the dispatcher starts), so a
    ``[llm.supervisor]`` table, and ``llm check --use supervisor``, would be settings that do
    nothing: both are refused in one line saying where the supervisor's model goes."""
    env = {**os.environ, "AGENTBOARD_HOME": str(cli_home)}
    check = subprocess.run([sys.executable, "-m", "agentboard", "llm", "check", "--use", "supervisor"], env=env,
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 2 and "unknown LLM use 'supervisor'" in check.stderr, check.stderr
    (cli_home / "config.toml").write_text('[llm.supervisor]\nmodel = "m"\n')
    out = subprocess.run([sys.executable, "-m", "agentboard", "list"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "the supervisor is an agent profile" in out.stderr and "agentboard supervisor enable" in out.stderr


def _list(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentboard", "list"], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120)


def test_a_config_toml_that_is_not_utf8_is_named_in_one_line_with_exit_2(cli_home: Path) -> None:
    cfg = cli_home / "config.toml"
    cfg.write_bytes(b"\xff\xfe max_parallel = 3\n")
    out = _list({"AGENTBOARD_HOME": str(cli_home)})
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [out.stderr.strip()] and out.stdout == ""
    assert out.stderr.startswith(f"error: {cfg} is not UTF-8 text") and "Error:" not in out.stderr


def test_an_agentboard_home_that_is_a_file_is_named_in_one_line_with_exit_2_and_nothing_made(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("notes\n")
    out = _list({"AGENTBOARD_HOME": str(afile)})
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == (f"error: AGENTBOARD_HOME {afile} is a file, not a folder; point AGENTBOARD_HOME "
                                  "at a folder (or at a path where one can be made)")
    under = _list({"AGENTBOARD_HOME": str(afile / "home")})
    assert under.returncode == 2 and f"is under {afile}, which is a file" in under.stderr
    assert len(under.stderr.strip().splitlines()) == 1
    assert afile.read_text() == "notes\n" and sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
