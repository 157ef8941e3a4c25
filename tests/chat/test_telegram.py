"""Telegram: updates with the web hook's secret token; ``/kanban`` messages are answered with
``sendMessage`` as a reply to the asking message; a missing token or a resent update changes
nothing."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from testenv import wait_for

from agentboard.api.routes import chat as routes

from .conftest import TELEGRAM_BOT, Chat, rate_limited, telegram_html_error, unavailable

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


def test_a_long_answer_is_cut_in_its_text_so_that_telegram_takes_its_html(chat: Chat) -> None:
    chat.link("telegram", str(USER))
    task = chat.ab.board().create("<" * 480)
    chat.telegram(update(f"/kanban show {task['id']}"))
    [sent] = chat.fake.wait("/sendMessage")
    text = sent.body["text"]
    assert telegram_html_error(text) is None, text[-60:]
    assert len(text) <= 1900 and f"{task['id']} [todo]" in text and text.endswith("in the dashboard</a>")


def test_an_apostrophe_and_curly_quotes_in_a_title_are_read_as_people_type_them(chat: Chat) -> None:
    chat.link("telegram", str(USER))
    chat.telegram(update("/kanban create Don't break prod", update_id=1))
    chat.telegram(update("/kanban create \u201cSmart quoted title\u201d", update_id=2))
    chat.telegram(update("/kanban create \u2018Curly single\u2019 @writer", update_id=3))
    sent = chat.fake.wait("/sendMessage", 3)
    assert all("Created" in s.body["text"] for s in sent), [s.body["text"] for s in sent]
    assert sorted(t["title"] for t in chat.tasks()) == ["Curly single", "Don't break prod", "Smart quoted title"]


def test_a_rate_limited_reply_is_sent_again_after_retry_after_without_holding_the_webhook(
        chat: Chat, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routes, "REPLY_BACKOFF", 0.05)
    chat.link("telegram", str(USER))
    chat.fake.trouble = [rate_limited(1), unavailable()]
    r = chat.telegram(update('/kanban create "Patient"'))
    assert r.json() == {"ok": True} and len(chat.fake.named("/sendMessage")) <= 1
    first, second, third = chat.fake.wait("/sendMessage", 3)
    assert second.at - first.at >= 0.9  # Retry-After: 1
    [task] = chat.tasks()
    assert third.body == first.body and f"Created {task['id']}" in third.body["text"]


def test_a_reply_the_platform_keeps_refusing_is_given_up_after_three_tries_with_one_log_line(
        chat: Chat, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(routes, "REPLY_BACKOFF", 0.05)
    chat.link("telegram", str(USER))
    chat.fake.refuse = True
    with caplog.at_level(logging.INFO, logger="agentboard.chat"):
        chat.telegram(update('/kanban create "Nobody hears"'))
        wait_for(lambda: gave_up(caplog), timeout=30, what="the log line")
        time.sleep(0.3)
    assert len(chat.fake.named("/sendMessage")) == 3
    [line] = gave_up(caplog)
    assert "3 tries" in line and "503" in line and TELEGRAM_BOT not in line


def test_a_reply_asked_to_wait_longer_than_the_cap_is_given_up_at_once(
        chat: Chat, caplog: pytest.LogCaptureFixture) -> None:
    chat.link("telegram", str(USER))
    chat.fake.trouble = [rate_limited(120)]
    with caplog.at_level(logging.INFO, logger="agentboard.chat"):
        chat.telegram(update('/kanban create "Too busy"'))
        [line] = wait_for(lambda: gave_up(caplog), timeout=30, what="the log line")
    assert len(chat.fake.named("/sendMessage")) == 1 and "120" in line


def gave_up(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "agentboard.chat" and r.levelno >= logging.WARNING and "gave up" in r.getMessage()]
