"""Slack: signed slash commands and app mentions act on the board and answer in the thread
that asked; a forged, stale or replayed request gets nothing and changes nothing."""

from __future__ import annotations

import json
import time
from typing import Any

from .conftest import PUBLIC_URL, Chat


def test_a_signed_slash_command_creates_the_task_and_answers_in_the_channel(chat: Chat) -> None:
    chat.link("slack", "U111")
    r = chat.slash('create "Write the release notes" @writer')
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["response_type"] == "in_channel", answer
    [task] = chat.tasks()
    assert task["title"] == "Write the release notes" and task["assignee"] == "writer"
    assert f"Created {task['id']}" in answer["text"]
    assert f"<{PUBLIC_URL}/?board=default&task={task['id']}|" in answer["text"]
    from agentboard.kernel import chat_links, queries

    events = queries.events_after(chat.db, "default", 0)
    assert any(e["kind"] == "created" and e["actor"] == "chat:slack:U111" for e in events)
    thread = chat_links.thread_of(chat.db, task["id"])
    assert thread is not None and thread["platform"] == "slack" and thread["channel"] == "C100"

    chat.ab.board().block(task["id"], "which release?")
    from agentboard.notify.notifier import Notifier

    Notifier(chat.db, chat.ab.settings).run_once()
    [news] = chat.fake.wait("/chat.postMessage")
    assert news.body["channel"] == "C100" and "thread_ts" not in news.body and "which release?" in news.body["text"]


def test_an_app_mention_in_a_thread_is_answered_in_that_thread(chat: Chat) -> None:
    chat.link("slack", "U111")
    event = {"type": "event_callback", "event_id": "Ev1", "event": {
        "type": "app_mention", "user": "U111", "channel": "C200", "ts": "1700000100.000200",
        "thread_ts": "1700000000.000100", "text": '<@UBOT> create "Fix the login page"'}}
    r = chat.slack("events", json.dumps(event).encode(), content_type="application/json")
    assert r.status_code == 200 and r.json() == {"ok": True}
    [post] = chat.fake.wait("/chat.postMessage")
    assert post.body["channel"] == "C200" and post.body["thread_ts"] == "1700000000.000100"
    assert post.headers["authorization"] == "Bearer xoxb-test-bot-token"
    [task] = chat.tasks()
    assert task["title"] == "Fix the login page" and task["id"] in post.body["text"]


def test_the_events_url_verification_challenge_is_echoed(chat: Chat) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})
    r = chat.slack("events", body.encode(), content_type="application/json")
    assert r.json() == {"ok": True, "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}


def test_a_wrong_signature_a_stale_timestamp_and_a_replay_change_nothing(chat: Chat) -> None:
    chat.link("slack", "U111")
    before = chat.events()
    wrong = chat.slash('create "forged"', secret="not-the-signing-secret")
    stale = chat.slash('create "stale"', ts=time.time() - 301)
    assert (wrong.status_code, stale.status_code) == (401, 401)
    assert "signature" in wrong.json()["error"]["message"] and "stale" in stale.json()["error"]["message"]
    assert chat.tasks() == [] and chat.events() == before

    body = b"command=%2Fkanban&text=create+once&user_id=U111&channel_id=C1"
    stamp = str(int(time.time()))
    import hashlib
    import hmac

    from .conftest import SLACK_SECRET

    sig = "v0=" + hmac.new(SLACK_SECRET.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    headers = {"content-type": "application/x-www-form-urlencoded", "x-slack-request-timestamp": stamp,
               "x-slack-signature": sig}
    assert chat.http.post("/api/chat/slack/commands", content=body, headers=headers).status_code == 200
    again = chat.http.post("/api/chat/slack/commands", content=body, headers=headers)
    assert again.status_code == 401 and "replay" in again.json()["error"]["message"]
    assert [t["title"] for t in chat.tasks()] == ["once"]


def test_an_unlinked_user_is_told_the_command_an_admin_runs_and_nothing_changes(chat: Chat) -> None:
    before = chat.events()
    r = chat.slash('create "sneaky"', user="U999")
    assert r.status_code == 200
    assert r.json()["response_type"] == "ephemeral"
    assert "agentboard chat link slack U999 --role member" in r.json()["text"]
    assert chat.tasks() == [] and chat.events() == before


def test_a_viewer_reads_but_cannot_write_and_a_member_cannot_use_admin_commands(chat: Chat) -> None:
    chat.link("slack", "UVIEW", role="viewer")
    chat.link("slack", "UMEM", role="member")
    chat.link("slack", "UADM", role="admin")
    refused = chat.slash('create "from a viewer"', user="UVIEW").json()
    assert "read-only" in refused["text"] and chat.tasks() == []
    assert "No tasks on board default" in chat.slash("list", user="UVIEW").json()["text"]

    before = chat.events()
    member = chat.slash("dispatch", user="UMEM").json()
    assert "needs an admin" in member["text"] and chat.events() == before
    admin = chat.slash("dispatch", user="UADM").json()
    assert "without a dispatcher" in admin["text"]


def test_a_member_limited_to_a_board_cannot_see_tasks_of_another(chat: Chat) -> None:
    from agentboard.kernel import boards

    boards.create(chat.db, "ops")
    task = chat.ab.board().create("Secret default work")
    chat.link("slack", "UOPS", role="member", board="ops")
    before = chat.events()
    for text in (f"show {task['id']}", f"block {task['id']} nope", f"approve {task['id']}"):
        answer = chat.slash(text, user="UOPS").json()
        assert f"no task {task['id']}" in answer["text"], answer
    assert chat.events() == before
    created = chat.slash('create "ops work"', user="UOPS").json()
    assert "Created" in created["text"]
    assert [t["title"] for t in chat.tasks("ops")] == ["ops work"]


def test_a_slow_command_answers_at_once_and_its_result_comes_through_the_response_url(chat: Chat, monkeypatch: Any) -> None:
    from agentboard.api.routes import chat as routes

    from .test_discord import holding_the_write_lock

    chat.link("slack", "U111")
    monkeypatch.setattr(routes, "GRACE", 0.2)
    with holding_the_write_lock(chat):
        r = chat.slash('create "Slow task"', channel="C777")
        assert r.json()["text"] == "Working on it…"
    [later] = chat.fake.wait("/respond/U111/C777")
    [task] = chat.tasks()
    assert later.body["response_type"] == "in_channel" and f"Created {task['id']}" in later.body["text"]


def test_an_app_mention_reply_slack_could_not_take_is_posted_again(chat: Chat, monkeypatch: Any) -> None:
    from agentboard.api.routes import chat as routes

    from .conftest import unavailable

    monkeypatch.setattr(routes, "REPLY_BACKOFF", 0.05)
    chat.link("slack", "U111")
    chat.fake.trouble = [unavailable()]
    event = {"type": "event_callback", "event_id": "Ev5", "event": {
        "type": "app_mention", "user": "U111", "channel": "C200", "ts": "1700000100.000200",
        "text": '<@UBOT> create "Try again"'}}
    assert chat.slack("events", json.dumps(event).encode(), content_type="application/json").json() == {"ok": True}
    first, second = chat.fake.wait("/chat.postMessage", 2)
    assert first.body == second.body and second.body["thread_ts"] == "1700000100.000200"
    [task] = chat.tasks()
    assert f"Created {task['id']}" in second.body["text"]


def test_a_slow_result_the_response_url_rate_limited_is_sent_again(chat: Chat, monkeypatch: Any) -> None:
    from agentboard.api.routes import chat as routes

    from .conftest import rate_limited
    from .test_discord import holding_the_write_lock

    chat.link("slack", "U111")
    monkeypatch.setattr(routes, "GRACE", 0.2)
    chat.fake.trouble = [rate_limited(0.2)]
    with holding_the_write_lock(chat):
        assert chat.slash('create "Slow and limited"', channel="C778").json()["text"] == "Working on it…"
    first, second = chat.fake.wait("/respond/U111/C778", 2)
    assert second.at - first.at >= 0.15 and "Created" in second.body["text"]
