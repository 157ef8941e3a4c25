"""Discord: Ed25519-signed interactions; PING is answered PONG, ``/kanban`` acts and answers,
slow work is deferred and followed up; a forged, stale or replayed interaction changes nothing."""

from __future__ import annotations

import time
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from .conftest import DISCORD_APP, Chat


def command(text: str, user: str = "200000000000000001", channel: str = "300000000000000001",
            token: str = "interaction-token") -> dict[str, Any]:
    return {"type": 2, "id": "1", "application_id": DISCORD_APP, "token": token, "channel_id": channel,
            "member": {"user": {"id": user, "username": "ana"}},
            "data": {"name": "kanban", "options": [{"name": "command", "type": 3, "value": text}]}}


def test_a_ping_is_answered_with_a_pong(chat: Chat) -> None:
    r = chat.discord({"type": 1})
    assert r.status_code == 200 and r.json() == {"type": 1}


def test_a_signed_command_creates_the_task_and_answers_in_the_channel(chat: Chat) -> None:
    chat.link("discord", "200000000000000001")
    r = chat.discord(command('create "Ship the installer" --goal g_missing'))
    assert r.json()["type"] == 4 and "Not done: no goal" in r.json()["data"]["content"]
    assert chat.tasks() == []
    r = chat.discord(command('create "Ship the installer"'))
    assert r.status_code == 200
    [task] = chat.tasks()
    data = r.json()["data"]
    assert r.json()["type"] == 4 and f"Created {task['id']}" in data["content"]
    from agentboard.kernel import chat_links, queries

    assert chat_links.thread_of(chat.db, task["id"])["channel"] == "300000000000000001"
    assert any(e["actor"] == "chat:discord:200000000000000001" for e in queries.events_after(chat.db, "default", 0))


def test_a_forged_stale_or_replayed_interaction_changes_nothing(chat: Chat) -> None:
    chat.link("discord", "200000000000000001")
    before = chat.events()
    forged = chat.discord(command('create "forged"'), key=Ed25519PrivateKey.generate())
    stale = chat.discord(command('create "stale"'), ts=time.time() - 600)
    assert (forged.status_code, stale.status_code) == (401, 401)
    assert chat.tasks() == [] and chat.events() == before
    missing = chat.http.post("/api/chat/discord/interactions", json={"type": 1})
    assert missing.status_code == 401

    import json

    payload = json.dumps(command('create "once"')).encode()
    stamp = str(int(time.time()))
    headers = {"content-type": "application/json", "x-signature-timestamp": stamp,
               "x-signature-ed25519": chat.discord_key.sign(stamp.encode() + payload).hex()}
    assert chat.http.post("/api/chat/discord/interactions", content=payload, headers=headers).status_code == 200
    again = chat.http.post("/api/chat/discord/interactions", content=payload, headers=headers)
    assert again.status_code == 401 and [t["title"] for t in chat.tasks()] == ["once"]


def test_an_unlinked_user_gets_a_private_refusal(chat: Chat) -> None:
    r = chat.discord(command('create "x"', user="999"))
    data = r.json()["data"]
    assert data["flags"] == 64 and "agentboard chat link discord 999 --role member" in data["content"]
    assert chat.tasks() == []


def test_slow_work_is_deferred_and_its_answer_follows_up(chat: Chat, monkeypatch: Any) -> None:
    """A command still running after the grace is answered "deferred" (type 5); its answer
    follows as the interaction's follow-up message."""
    from agentboard.api.routes import chat as routes

    chat.link("discord", "200000000000000001")
    monkeypatch.setattr(routes, "GRACE", 0.2)
    with holding_the_write_lock(chat):
        r = chat.discord(command('create "Slow one"', token="tok-slow"))
        assert r.json() == {"type": 5}
    [follow] = chat.fake.wait(f"/webhooks/{DISCORD_APP}/tok-slow")
    [task] = chat.tasks()
    assert f"Created {task['id']}" in follow.body["content"]


class holding_the_write_lock:  # noqa: N801 - a context manager read as a sentence
    """Another connection holds SQLite's write lock: a command's write waits until it ends."""

    def __init__(self, chat: Chat) -> None:
        import sqlite3

        self.conn = sqlite3.connect(chat.ab.settings.db_path, timeout=30, isolation_level=None)

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, *exc: object) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


def test_a_follow_up_discord_rate_limited_is_sent_again(chat: Chat, monkeypatch: Any) -> None:
    from agentboard.api.routes import chat as routes

    from .conftest import rate_limited

    chat.link("discord", "200000000000000001")
    monkeypatch.setattr(routes, "GRACE", 0.2)
    chat.fake.trouble = [rate_limited(0.2)]
    with holding_the_write_lock(chat):
        assert chat.discord(command('create "Slow and limited"', token="tok-limited")).json() == {"type": 5}
    first, second = chat.fake.wait(f"/webhooks/{DISCORD_APP}/tok-limited", 2)
    assert second.at - first.at >= 0.15 and "Created" in second.body["content"]
