"""The ``/kanban`` grammar, the same on every platform."""

from __future__ import annotations

import pytest

from agentboard.chat.commands import COMMANDS, Command, parse, usage
from agentboard.domain.errors import InvalidInput


@pytest.mark.parametrize(("text", "expected"), [
    ('create "Write the notes" @writer --goal g_1', Command("create", title="Write the notes", profile="writer",
                                                           goal="g_1")),
    ("/kanban create Fix the login page", Command("create", title="Fix the login page")),
    ("/kanban@agentboard_bot list review", Command("list", status="review")),
    ("list", Command("list")),
    ("show t_1a2b3c4d", Command("show", task_id="t_1a2b3c4d")),
    ("comment t_1a2b3c4d looks good, ship it", Command("comment", task_id="t_1a2b3c4d",
                                                       text="looks good, ship it")),
    ("block t_1a2b3c4d waiting for the API key", Command("block", task_id="t_1a2b3c4d",
                                                         text="waiting for the API key")),
    ("unblock t_1a2b3c4d", Command("unblock", task_id="t_1a2b3c4d")),
    ("APPROVE t_1a2b3c4d", Command("approve", task_id="t_1a2b3c4d")),
    ("reject t_1a2b3c4d the tests fail", Command("reject", task_id="t_1a2b3c4d", text="the tests fail")),
    ("pick t_1a2b3c4d 2", Command("pick", task_id="t_1a2b3c4d", n=2)),
    ("dispatch", Command("dispatch")),
    ("create Don't break prod", Command("create", title="Don't break prod")),
    ("create Don’t break the users' page @ops", Command("create", title="Don’t break the users' page",
                                                           profile="ops")),
    ('create "It\'s done" @writer', Command("create", title="It's done", profile="writer")),
    ("create 'Rock \"n\" roll' --goal g_1", Command("create", title='Rock "n" roll', goal="g_1")),
    ("create “Smart quoted title”", Command("create", title="Smart quoted title")),
    ("create “Smart quoted” @writer", Command("create", title="Smart quoted", profile="writer")),
    ("create ‘Don’t panic’ now", Command("create", title="Don’t panic now")),
    ("create \u201cFix it\u201d, now", Command("create", title="Fix it, now")),
    ('create "@not a profile" "--goal"', Command("create", title="@not a profile --goal")),
    ("", Command("help")),
    ("/kanban", Command("help")),
])
def test_each_command_reads_the_same_on_every_platform(text: str, expected: Command) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(("text", "says"), [
    ("frobnicate t_1", "unknown command 'frobnicate'"),
    ("create", "needs a title"),
    ('create "unclosed', "unbalanced quotes"),
    ("create “unclosed", "unbalanced quotes"),
    ('create ""', "needs a title"),
    ("create x --goal", "--goal needs"),
    ("show", "usage: /kanban show ID"),
    ("unblock t_1 now please", "usage: /kanban unblock ID"),
    ("reject t_1", "usage: /kanban reject ID reason"),
    ("dispatch now", "usage: /kanban dispatch"),
    ("pick t_1", "usage: /kanban pick ID N"),
    ("pick t_1 two", "usage: /kanban pick ID N"),
    ("pick t_1 0", "usage: /kanban pick ID N"),
])
def test_a_malformed_command_is_refused_with_its_usage(text: str, says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        parse(text)


def test_help_lists_every_command() -> None:
    text = usage()
    assert all(f"/kanban {spec.usage}" in text for spec in COMMANDS.values())
    assert "/kanban pick ID N" in text
