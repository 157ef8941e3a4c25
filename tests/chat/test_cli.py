"""``agentboard chat``: linking chat users, and the platforms' status against their APIs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import DISCORD_APP, SLACK_SECRET, TELEGRAM_BOT, FakePlatforms


def ab(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "agentboard", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_link_list_and_unlink_chat_users(home: Path) -> None:
    assert ab("init").returncode == 0
    out = ab("chat", "link", "slack", "U024BE7LH", "--role", "viewer")
    assert out.returncode == 0 and "slack user U024BE7LH: viewer on every board" in out.stdout
    assert ab("chat", "link", "telegram", "5550001", "--role", "admin", "--board", "default").returncode == 0
    rows = json.loads(ab("chat", "links", "--json").stdout)
    assert [(r["platform"], r["user_id"], r["role"], r["board"]) for r in rows] == [
        ("slack", "U024BE7LH", "viewer", None), ("telegram", "5550001", "admin", "default")]
    refused = ab("chat", "link", "slack", "U1", "--board", "nope")
    assert refused.returncode != 0 and "no board 'nope'" in refused.stderr
    assert ab("chat", "unlink", "slack", "U024BE7LH").returncode == 0
    gone = ab("chat", "unlink", "slack", "U024BE7LH")
    assert gone.returncode != 0 and "no slack user 'U024BE7LH' is linked" in gone.stderr


def test_status_shows_the_platforms_on_and_tries_their_tokens(home: Path, fake: FakePlatforms) -> None:
    assert ab("init").returncode == 0
    (home / "config.toml").write_text(f"""
[chat.slack]
signing_secret = "{SLACK_SECRET}"
bot_token = "xoxb-test"
api_base = "{fake.url}/slack/api"

[chat.discord]
public_key = "{"ab" * 32}"
application_id = "{DISCORD_APP}"
bot_token = "discord-bot"
api_base = "{fake.url}/discord/api/v10"

[chat.telegram]
secret_token = "s3cret"
bot_token = "{TELEGRAM_BOT}"
api_base = "{fake.url}/telegram"
""")
    out = ab("chat", "status", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["platform"]: r for r in json.loads(out.stdout)}
    assert rows["slack"]["on"] and rows["slack"]["credentials"] == "ok" and "Acme" in rows["slack"]["detail"]
    assert rows["telegram"]["credentials"] == "ok" and "@agentboard_bot" in rows["telegram"]["detail"]
    assert rows["discord"]["on"] and rows["discord"]["credentials"] == "ok" and DISCORD_APP in rows["discord"]["detail"]
    assert fake.named("/applications/@me")[0].headers["authorization"] == "Bot discord-bot"
    assert fake.named("/auth.test")[0].headers["authorization"] == "Bearer xoxb-test"

    fake.refuse = True
    failed = ab("chat", "status")
    assert failed.returncode == 1 and "failed" in failed.stdout and TELEGRAM_BOT not in failed.stdout


def test_the_chat_secrets_are_masked_where_configuration_is_shown(home: Path) -> None:
    from agentboard import config

    (home).mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[chat.slack]\nsigning_secret = "abc123"\nbot_token = "xoxb-1"\n'
                                      '[chat.discord]\npublic_key = "00ff"\n')
    settings = config.load(home)
    assert settings.chat_slack_signing_secret == "abc123" and settings.chat_discord_public_key == "00ff"
    shown = config.shown(settings)
    assert shown["chat_slack_signing_secret"] == "***" and shown["chat_slack_bot_token"] == "***"
    assert shown["chat_discord_public_key"] == "00ff"

    (home / "config.toml").write_text('[chat.slack]\nsigning_sekret = "x"\n')
    import pytest

    from agentboard.domain.errors import InvalidInput

    with pytest.raises(InvalidInput, match=r"\[chat.slack\] has unknown keys \['signing_sekret'\]"):
        config.load(home)
