"""A task created from a chat thread hears of its progress in that thread, through the notifier
(at least once: a notifier that failed, or a new one after a restart, delivers it)."""

from __future__ import annotations

import dataclasses
import json

from agentboard.notify.notifier import Notifier

from .conftest import Chat, telegram_html_error


def test_a_notification_reaches_the_slack_thread_after_the_notifier_restarts(chat: Chat) -> None:
    chat.link("slack", "U111")
    event = {"type": "event_callback", "event_id": "Ev9", "event": {
        "type": "app_mention", "user": "U111", "channel": "C300", "ts": "1700000500.000900",
        "text": '<@UBOT> create "Rotate the keys"'}}
    chat.slack("events", json.dumps(event).encode(), content_type="application/json")
    chat.fake.wait("/chat.postMessage")
    [task] = chat.tasks()
    chat.ab.board().block(task["id"], "which keys?")

    chat.fake.refuse = True  # the first notifier's delivery fails; it stops (a restart)
    first = Notifier(chat.db, dataclasses.replace(chat.ab.settings, notify_retry_base=0.0))
    report = first.run_once()
    assert report.failures == 1
    chat.fake.refuse = False
    chat.fake.calls.clear()

    from agentboard.kernel import notifications

    [sub] = notifications.list_subscriptions(chat.db, "default", task_id=task["id"])
    assert sub["target"] == "slack thread C300/1700000500.000900" and sub["failures"] == 1
    Notifier(chat.db, chat.ab.settings).run_once()
    [post] = chat.fake.wait("/chat.postMessage")
    assert post.body["channel"] == "C300" and post.body["thread_ts"] == "1700000500.000900"
    assert "which keys?" in post.body["text"] and task["id"] in post.body["text"]


def test_notifications_reach_telegram_and_discord_threads(chat: Chat) -> None:
    chat.link("telegram", "5550001")
    chat.link("discord", "200000000000000001")
    from .test_discord import command
    from .test_telegram import update

    chat.telegram(update('/kanban create "From telegram"', message_id=77))
    chat.fake.wait("/sendMessage")
    chat.discord(command('create "From discord"', channel="400000000000000004"))
    by_title = {t["title"]: t for t in chat.tasks()}
    board = chat.ab.board()
    for title in by_title:
        board.block(by_title[title]["id"], "needs a decision")
    chat.fake.calls.clear()
    Notifier(chat.db, chat.ab.settings).run_once()
    [tg] = chat.fake.wait("/sendMessage")
    assert tg.body["reply_to_message_id"] == 77 and by_title["From telegram"]["id"] in tg.body["text"]
    [dc] = chat.fake.wait("/channels/400000000000000004/messages")
    assert dc.headers["authorization"] == "Bot discord-bot-token"
    assert by_title["From discord"]["id"] in dc.body["content"]


def test_a_long_notification_reaches_telegram_as_html_it_takes(chat: Chat) -> None:
    chat.link("telegram", "5550001")
    from .test_telegram import update

    chat.telegram(update("/kanban create " + "<" * 480, message_id=78))
    chat.fake.wait("/sendMessage")
    [task] = chat.tasks()
    chat.ab.board().block(task["id"], "&" * 300)
    chat.fake.calls.clear()
    report = Notifier(chat.db, chat.ab.settings).run_once()
    [tg] = chat.fake.wait("/sendMessage")
    assert telegram_html_error(tg.body["text"]) is None, tg.body["text"][-60:]
    assert report.failures == 0 and len(tg.body["text"]) <= 1900 and task["id"] in tg.body["text"]
