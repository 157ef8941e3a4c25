"""Bad input: one line on stderr, the documented exit code, and the database unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import assert_one_line_error, task_id


@pytest.fixture
def seeded(cli) -> dict[str, str]:
    cli("profiles", "add", "w", "--command", "true")
    a = task_id(cli("create", "a", "--assignee", "w", "--json"))
    b = task_id(cli("create", "b", "--assignee", "w", "--parent", a, "--json"))
    return {"a": a, "b": b}


CASES = [
    ("empty title", ["create", "   "], 2, ["title is empty"]),
    ("unknown id", ["show", "t_00000000"], 3, ["no task t_00000000"]),
    ("malformed id", ["complete", "nope"], 3, ["no task 'nope'"]),
    ("slash in board slug", ["list", "--board", "Bad/Slug"], 2, ["invalid board slug"]),
    ("dots as board slug", ["create", "x", "--board", ".."], 2, ["invalid board slug"]),
    ("space in board slug", ["boards", "create", "a b"], 2, ["invalid board slug"]),
    ("unknown board", ["list", "--board", "nosuch"], 3, ["no board 'nosuch'"]),
    ("relative dir workspace", ["create", "x", "--workspace", "dir:relative/path"], 2, ["relative"]),
    ("bad workspace kind", ["create", "x", "--workspace", "cloud"], 2, ["invalid workspace"]),
    ("unknown status filter", ["list", "--status", "finished"], 2, ["unknown status 'finished'"]),
    ("bad duration", ["create", "x", "--max-runtime", "soon"], 2, ["invalid duration"]),
    ("bad priority", ["create", "x", "--priority", "high"], 2, ["invalid priority"]),
    ("malformed metadata", ["complete", "{a}", "--metadata", "{not json"], 2, ["--metadata is not valid JSON"]),
    ("metadata not an object", ["complete", "{a}", "--metadata", "[1, 2]"], 2, ["must be a JSON object"]),
    ("link cycle", ["link", "{b}", "{a}"], 4, ["cycle"]),
    ("self link", ["link", "{a}", "{a}"], 2, ["itself"]),
    ("duplicate link", ["link", "{a}", "{b}"], 4, ["already a parent"]),
    ("unknown adapter", ["profiles", "add", "p", "--command", "x", "--adapter", "telepathy"], 2, ["unknown adapter"]),
    ("duplicate profile", ["profiles", "add", "w", "--command", "x"], 4, ["already exists"]),
    ("bad env pair", ["profiles", "add", "p", "--command", "x", "--env", "NOEQUALS"], 2, ["--env"]),
    ("shared summary on bulk complete", ["complete", "{a}", "{b}", "--summary", "both done"], 2, ["one run"]),
    ("block without reason", ["block", "{a}", "  "], 2, ["reason"]),
    ("claim a todo task", ["claim", "{b}"], 4, ["cannot claim"]),
    ("complete a todo task", ["complete", "{b}"], 4, ["cannot complete"]),
    ("review a task not in review", ["review", "{a}", "--approve"], 4, ["cannot approve"]),
    ("request changes on a ready task", ["review", "{a}", "--request-changes", "cite the RFC"], 4,
     ["cannot request changes on task", "while it is ready", "allowed from: review"]),
    ("review without verdict", ["review", "{a}"], 2, ["exactly one"]),
    ("review with two verdicts", ["review", "{a}", "--approve", "--reject", "no"], 2, ["exactly one"]),
    ("empty comment", ["comment", "{a}", " "], 2, ["comment is empty"]),
    ("comment without text", ["comment", "{a}"], 2, ["give the task id and the text"]),
    ("unknown goal", ["create", "x", "--goal", "g_00000000"], 3, ["no goal"]),
    ("unknown parent", ["create", "x", "--parent", "t_00000000"], 3, ["no parent task"]),
    ("assign a bad profile name", ["assign", "{a}", "no/such"], 2, ["invalid profile name"]),
    ("unknown command", ["craete", "x"], 2, ["did you mean 'create'"]),
    ("missing argument", ["create"], 2, ["missing argument"]),
    ("non-integer option", ["list", "--limit", "many"], 2, ["--limit"]),
    ("unknown kind", ["block", "{a}", "why", "--kind", "whatever"], 2, ["--kind"]),
    ("switch to unknown board", ["boards", "switch", "nosuch"], 3, ["no board"]),
    ("cancel unknown goal", ["goals", "cancel", "g_00000000"], 3, ["no goal"]),
    ("unknown profile", ["profiles", "show", "ghost"], 3, ["no profile 'ghost'"]),
    ("body and body-file", ["create", "x", "--body", "a", "--body-file", "-"], 2, ["either"]),
    ("missing body file", ["create", "x", "--body-file", "/nonexistent/file.md"], 2, ["no such file"]),
    ("attach a missing file", ["attach", "{a}", "/nonexistent/file.bin"], 3, ["no file"]),
    ("worker verb outside a worker", ["heartbeat"], 2, ["AGENTBOARD_TASK is not set"]),
    ("dispatch on an unknown board", ["dispatch", "--board", "nosuch"], 3, ["no board 'nosuch'", "boards list"]),
    ("dry-run dispatch on an unknown board", ["dispatch", "--board", "nosuch", "--dry-run"], 3, ["no board 'nosuch'"]),
    ("dispatcher for an unknown board", ["dispatcher", "--board", "default", "--board", "nosuch"], 3,
     ["no board 'nosuch'"]),
    ("wiki pages of an unknown board", ["wiki", "list", "--board", "nosuch"], 3, ["no board 'nosuch'"]),
    ("a wiki page of an unknown board", ["wiki", "show", "intro", "--board", "nosuch"], 3, ["no board 'nosuch'"]),
    ("named checks of an unknown board", ["boards", "checks", "list", "--board", "nosuch"], 3, ["no board 'nosuch'"]),
    ("named paths of an unknown board", ["boards", "paths", "list", "--board", "nosuch"], 3, ["no board 'nosuch'"]),
    ("gc of an unknown board", ["gc", "--board", "nosuch"], 3, ["no board 'nosuch'"]),
    ("a dispatcher interval of zero", ["dispatcher", "--interval", "0"], 2, ["dispatch_interval", "0.1 to 86400",
                                                                             "--interval"]),
    ("a negative dispatcher interval", ["dispatcher", "--interval", "-5"], 2, ["0.1 to 86400"]),
]


@pytest.mark.parametrize(("args", "code", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_refused_cleanly(cli, counts, seeded, args: list[str], code: int, needles: list[str]) -> None:
    argv = [seeded.get(a.strip("{}"), a) if a in ("{a}", "{b}") else a for a in args]
    before = counts()
    r = cli(*argv)
    assert_one_line_error(r, code, *needles)
    assert counts() == before


COUNTS_BELOW_THEIR_LEAST = [
    (["list", "--limit", "0"], "--limit"),
    (["list", "--limit", "-5"], "--limit"),
    (["dispatch", "--max", "-1"], "--max"),
    (["show", "{a}", "--events", "-1"], "--events"),
    (["log", "{a}", "--tail", "0"], "--tail"),
    (["log", "{a}", "--run", "0"], "--run"),
    (["tail", "{a}", "--since", "-1", "--once"], "--since"),
    (["gc", "--dry-run", "--event-retention-days", "-1"], "--event-retention-days"),
    (["gc", "--dry-run", "--log-retention-days", "-1"], "--log-retention-days"),
    (["supervisor", "wakes", "--limit", "0"], "--limit"),
    (["supervisor", "log", "--limit", "-1"], "--limit"),
]


@pytest.mark.parametrize(("args", "option"), COUNTS_BELOW_THEIR_LEAST, ids=[" ".join(c[0]) for c in COUNTS_BELOW_THEIR_LEAST])
def test_a_count_below_its_least_value_is_a_usage_error_naming_the_option(cli, counts, seeded, args: list[str],
                                                                          option: str) -> None:
    argv = [seeded["a"] if a == "{a}" else a for a in args]
    before = counts()
    r = cli(*argv)
    assert_one_line_error(r, 2, f"'{option}'", "is not in the range")
    assert "offset" not in r.err and counts() == before


def test_list_with_a_limit_of_one_shows_one_task_and_says_there_may_be_more(cli, seeded) -> None:
    r = cli("list", "--limit", "1")
    assert r.code == 0 and len(r.lines()) == 2  # the header and one task
    assert "there may be more" in r.err


def test_edit_holds_priority_and_max_retries_to_the_limits_of_create(cli, counts, seeded) -> None:
    before = counts()
    assert_one_line_error(cli("edit", seeded["a"], "--priority", "2000000"), 2,
                          "priority is 2000000; give -1000000 to 1000000")
    assert_one_line_error(cli("edit", seeded["a"], "--max-retries", "-1"), 2, "max_retries is -1; give 1 to 1000")
    assert counts() == before
    assert cli("edit", seeded["a"], "--priority", "-1000000", "--max-retries", "3").code == 0


def test_oversized_body_is_refused(cli, counts, tmp_path: Path) -> None:
    big = tmp_path / "big.md"
    big.write_text("x" * (256 * 1024 + 1))
    before = counts()
    r = cli("create", "huge", "--body-file", str(big))
    assert_one_line_error(r, 2, "body is 262145 bytes", "limit")
    assert counts() == before
    tid = task_id(cli("create", "small", "--json"))
    before = counts()
    r = cli("edit", tid, "--body-file", str(big))
    assert_one_line_error(r, 2, "limit")
    assert counts() == before


def test_title_too_long_is_refused(cli, counts) -> None:
    before = counts()
    assert_one_line_error(cli("create", "t" * 501), 2, "title is 501 characters")
    assert counts() == before


@pytest.mark.parametrize("argv", [[], ["boards"], ["profiles"], ["goals"], ["tokens"], ["wiki"]])
def test_help_lists_whole_command_summaries(cli, argv: list[str]) -> None:
    r = cli(*argv, "--help")
    assert r.code == 0 and "Commands:" in r.out
    listing = r.out.split("Commands:", 1)[1]
    assert "..." not in listing  # no summary is clipped
    assert "(04)" not in listing


def test_top_level_help_gives_each_verb_its_first_sentence(cli) -> None:
    listing = " ".join(cli("--help").out.split("Commands:", 1)[1].split())
    assert "block Block task(s) with a reason: they wait for a person or another agent." in listing
    assert "mcp MCP server on stdio: the worker's kanban_* tools for an MCP-" in listing


@pytest.mark.parametrize("argv", [[], ["boards"], ["profiles"], ["boards", "checks"], ["wiki"]])
def test_a_bare_command_or_group_prints_its_help_on_stdout_and_succeeds(cli, argv: list[str]) -> None:
    r = cli(*argv)
    assert r.code == 0 and r.err == ""
    assert r.out.startswith(f"Usage: agentboard {' '.join(argv)}".rstrip() + " [OPTIONS] COMMAND")
    assert "Commands:" in r.out and "error:" not in r.out


def test_a_board_named_in_agentboard_board_that_does_not_exist_is_refused_by_dispatch(cli, counts, seeded) -> None:
    before = counts()
    assert_one_line_error(cli("dispatch", env={"AGENTBOARD_BOARD": "nosuch"}), 3, "no board 'nosuch'")
    assert counts() == before
