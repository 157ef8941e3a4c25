"""Telegram: updates with the web hook's secret token; ``/kanban`` messages are answered with
``sendMessage`` as a reply to the asking message; a missing token or a resent update changes
nothing."""

from __future__ import annotations

from typing import Any

from .conftest import TELEGRAM_BOT, Chat

USER = 5550001


def update(text: str, update_id: int = 1, user: int = USER, message_id: int = 42) -> dict[str, Any]:
    return {"update_id": update_id, "message": {
        "message_id": message_id, "date": 1700000000, "text": text,
        "from": {"id": user, "is_bot": False, "first_name": "Ana"},
        "chat": {"id": -100200300, "type": "supergroup", "title": "team"}}}


def test_a_kanban_message_creates_the_task_and_the_reply_quotes_it(chat: Chat) -> None:
    chat.link("telegram", str(USER))
    r = chat.telegram(update('/kanban@agentboard_bot create "Renew the certificate"'))
    assert r.status_code == 200 and r.json() == {"ok": True}
    [sent] = chat.fake.wait("/sendMessage")
    assert sent.path == f"/telegram/bot{TELEGRAM_BOT}/sendMessage"
    assert sent.body["chat_id"] == "-100200300" and sent.body["reply_to_message_id"] == 42
    assert sent.body["parse_mode"] == "HTML"
    [task] = chat.tasks()
    assert task["title"] == "Renew the certificate" and f"Created {task['id']}" in sent.body["text"]
    assert 'href="https://board.example.org/?board=default&amp;task=' in sent.body["text"]


def test_a_missing_or_wrong_secret_token_changes_nothing(chat: Chat) -> None:
    chat.link("telegram", str(USER))
    before = chat.events()
    assert chat.telegram(update('/kanban create "x"'), secret=None).status_code == 401
    assert chat.telegram(update('/kanban create "x"'), secret="guess").status_code == 401
    assert chat.tasks() == [] and chat.events() == before and chat.fake.calls == []


def test_an_update_sent_again_is_acted_on_once(chat: Chat) -> None:
    chat.link("telegram", str(USER))
    first = chat.telegram(update('/kanban create "Only once"', update_id=7))
    again = chat.telegram(update('/kanban create "Only once"', update_id=7))
    assert first.json() == {"ok": True} and "already received" in again.json()["ignored"]
    chat.fake.wait("/sendMessage")
    assert [t["title"] for t in chat.tasks()] == ["Only once"]


def test_an_unlinked_user_is_answered_with_the_link_command(chat: Chat) -> None:
    chat.telegram(update('/kanban create "x"', user=777))
    [sent] = chat.fake.wait("/sendMessage")
    assert "agentboard chat link telegram 777 --role member" in sent.body["text"]
    assert chat.tasks() == []


def test_other_messages_are_left_alone(chat: Chat) -> None:
    chat.link("telegram", str(USER))
    r = chat.telegram(update("good morning"))
    assert r.json()["ignored"] == "not a /kanban command"
