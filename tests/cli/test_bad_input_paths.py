"""Bad input on the CLI: terminal controls in free text, numbers and NUL characters the database
cannot store, a claim's TTL. Each refusal is one line with exit 2 and writes nothing; text
stored before is printed with its controls escaped."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from .conftest import assert_one_line_error, task_id

ESC_COMMENT = "looks fine \x1b]52;c;ZWNobyBwd25lZAo=\x07\x1b[2K\x1b[1Adone \u202etxt"


@pytest.fixture
def claimed(cli) -> str:
    cli("profiles", "add", "coder", "--command", "/bin/true")
    tid = task_id(cli("create", "c", "--assignee", "coder", "--json"))
    assert cli("claim", tid).code == 0
    return tid


def test_show_and_tail_print_a_comments_terminal_escapes_as_visible_text_and_json_stays_exact(cli) -> None:
    tid = task_id(cli("create", "t", "--json"))
    assert cli("comment", tid, ESC_COMMENT).code == 0
    shown = cli("show", tid)
    tail = cli("tail", tid, "--once")
    for out in (shown.out, tail.out):
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "looks fine \\x1b]52;c;ZWNobyBwd25lZAo=\\x07\\x1b[2K\\x1b[1Adone \\u202etxt" in shown.out
    assert "\\x1b]52;c;" in tail.out
    assert cli("show", tid, "--json").json()["comments"][0]["body"] == ESC_COMMENT


def test_lists_print_names_and_descriptions_stored_with_controls_escaped(cli, cli_home: Path) -> None:
    cli("profiles", "add", "coder", "--command", "/bin/true")
    with sqlite3.connect(cli_home / "agentboard.db") as conn:  # written before names were checked
        conn.execute("UPDATE boards SET name = ? WHERE slug = 'default'", ("n\x1b[2Jx",))
        conn.execute("UPDATE profiles SET description = ? WHERE name = 'coder'", ("d\x1b]0;title\x07",))
    boards, profiles = cli("boards", "list"), cli("profiles", "list")
    assert "n\\x1b[2Jx" in boards.out and "\x1b" not in boards.out
    assert "\x1b" not in profiles.out and "\x07" not in profiles.out
    assert [b["name"] for b in cli("boards", "list", "--json").json()] == ["n\x1b[2Jx"]  # exact


def test_one_line_fields_with_terminal_controls_are_refused_and_nothing_is_written(cli, counts, claimed) -> None:
    before = counts()
    for args, needle in [
        (("block", claimed, "why\x1b[2J"), "invalid reason"),
        (("heartbeat", claimed, "--note", "x\x1b]0;t\x07"), "invalid note"),
        (("comment", claimed, "hi", "--author", "a\x1bb"), "invalid author"),
        (("boards", "create", "bcx", "--name", "n\x1b[2Jx"), "invalid board name"),
        (("boards", "rename", "default", "n\u202ex"), "invalid board name"),
        (("profiles", "add", "p2", "--command", "/bin/true", "--description", "d\x9bx"), "invalid description"),
    ]:
        assert_one_line_error(cli(*args), 2, needle, "refused")
    assert counts() == before


def test_numbers_the_database_cannot_store_are_refused_naming_the_field(cli, counts, claimed) -> None:
    env = {"AGENTBOARD_TASK": claimed, "AGENTBOARD_RUN_ID": "1", "AGENTBOARD_BOARD": "default"}
    before = counts()
    for args, needle in [
        (("create", "x", "--max-runtime", "999999999999999d"), "max_runtime"),
        (("edit", claimed, "--max-runtime", "999999999999999d"), "max_runtime"),
        (("goals", "create", "g", "--priority", "100000000000000000000"), "priority"),
        (("budget", "set", "--task", claimed, "--max-runs", "100000000000000000000"), "max_runs"),
        (("budget", "set", "--task", claimed, "--max-tokens", "10000000000000000000"), "max_tokens"),
        (("budget", "set", "--task", claimed, "--max-runtime", "999999999999999d"), "max_runtime"),
    ]:
        assert_one_line_error(cli(*args), 2, needle)
    usage = json.dumps({"input_tokens": 10**23})
    assert_one_line_error(cli("complete", "--summary", "s", "--usage", usage, env=env), 2, "usage.input_tokens")
    assert counts() == before


def test_deeply_nested_json_options_are_refused_as_invalid_input(cli, counts, claimed) -> None:
    env = {"AGENTBOARD_TASK": claimed, "AGENTBOARD_RUN_ID": "1", "AGENTBOARD_BOARD": "default"}
    deep = '{"a":' * 5000 + "1" + "}" * 5000
    before = counts()
    assert_one_line_error(cli("complete", "--summary", "s", "--metadata", deep, env=env), 2,
                          "--metadata is nested too deeply")
    assert_one_line_error(cli("complete", "--summary", "s", "--usage", deep, env=env), 2, "--usage is nested")
    assert counts() == before


def test_a_nul_character_is_refused_naming_the_field(cli, counts, claimed) -> None:
    env = {"AGENTBOARD_TASK": claimed, "AGENTBOARD_RUN_ID": "1", "AGENTBOARD_BOARD": "default"}
    before = counts()
    assert_one_line_error(cli("create", "p", "--body-file", "-", input="a\0b"), 2,
                          "body contains a NUL character")
    assert_one_line_error(cli("comment", claimed, "a\0b"), 2, "comment contains a NUL character")
    assert_one_line_error(cli("complete", "--summary", "a\0b", env=env), 2, "summary contains a NUL")
    assert_one_line_error(cli("complete", "--summary", "s", "--metadata", '{"k": "a\\u0000"}', env=env), 2,
                          "metadata contains a NUL")
    assert counts() == before


def test_a_claim_or_heartbeat_ttl_beyond_the_limit_is_refused_and_writes_nothing(cli, counts) -> None:
    cli("profiles", "add", "coder", "--command", "/bin/true")
    tid = task_id(cli("create", "c", "--assignee", "coder", "--json"))
    before = counts()
    assert_one_line_error(cli("claim", tid, "--ttl", "99999999999999d"), 2, "ttl", "100000000")
    assert counts() == before
    assert cli("show", tid, "--json").json()["status"] == "ready"
    assert cli("claim", tid, "--ttl", "1h").code == 0
    during = counts()
    assert_one_line_error(cli("heartbeat", tid, "--ttl", "99999999999999d"), 2, "ttl")
    assert counts() == during


def test_a_time_beyond_the_calendar_prints_as_never_not_an_error() -> None:
    from agentboard.cli.output import printable, when

    assert when(8.64e18) == "never"
    assert when(1e300) == "never"
    assert printable("a\x1b[2Jb\tc\nd\r\x9b\u2066") == "a\\x1b[2Jb\tc\nd\\x0d\\x9b\\u2066"
