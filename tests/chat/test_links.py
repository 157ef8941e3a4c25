"""Chat links and chat threads in the kernel, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from agentboard.chat.threads import Origin, origin_of
from agentboard.domain.errors import InvalidInput, NotFound
from agentboard.kernel import chat_links, notifications, purge, tasks


def test_a_link_is_replaced_by_linking_again_and_gone_once_unlinked(ab: Any) -> None:
    chat_links.link(ab.db, "slack", "U1", role="viewer")
    chat_links.link(ab.db, "slack", "U1", role="admin", board="default")
    assert chat_links.find(ab.db, "slack", "U1")["role"] == "admin"
    assert [(r["user_id"], r["board"]) for r in chat_links.links(ab.db, "slack")] == [("U1", "default")]
    chat_links.unlink(ab.db, "slack", "U1")
    assert chat_links.find(ab.db, "slack", "U1") is None
    with pytest.raises(NotFound):
        chat_links.unlink(ab.db, "slack", "U1")
    with pytest.raises(InvalidInput, match="unknown chat platform"):
        chat_links.link(ab.db, "irc", "U1", role="member")
    with pytest.raises(InvalidInput, match="unknown role"):
        chat_links.link(ab.db, "slack", "U1", role="owner")


def test_a_task_from_a_thread_remembers_it_and_subscribes_it_in_one_transaction(ab: Any) -> None:
    origin = Origin("telegram", "-100200", "42")
    new = tasks.NewTask.build("default", "From the team chat", actor="chat:telegram:7")
    task = chat_links.create_in_thread(ab.db, new, platform="telegram", channel="-100200", thread="42",
                                       target=origin.target, display=origin.display)
    thread = chat_links.thread_of(ab.db, task["id"])
    assert (thread["platform"], thread["channel"], thread["thread"]) == ("telegram", "-100200", "42")
    [sub] = notifications.list_subscriptions(ab.db, "default", task_id=task["id"])
    assert sub["target"] == "telegram thread -100200/42" and sub["trusted"]
    assert origin_of(origin.target) == origin

    refused = tasks.NewTask.build("default", "On no board", actor="chat:telegram:7", check_board=True)
    bad = tasks.NewTask(**{**refused.__dict__, "board": "nope"})
    with pytest.raises(NotFound):
        chat_links.create_in_thread(ab.db, bad, platform="telegram", channel="-1", thread="1",
                                    target=origin.target, display=origin.display)

    purge.purge(ab.db, "default", task["id"], force=True)
    assert chat_links.thread_of(ab.db, task["id"]) is None
