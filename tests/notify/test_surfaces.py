"""``agentboard notify ...`` and ``/api/notify/...``: the same kernel calls, targets always masked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import agentboard
from agentboard.kernel import notifications as kn

from .conftest import Receiver

SECRET_URL = "json://bot:hunter22@127.0.0.1:{port}/hooks/zz-token-99"


def cli(*args: str) -> tuple[int, str, str]:
    from agentboard.cli import common, main

    class Entry:
        name = "agentboard"

        def main(self, args: list[str], prog_name: str | None = None, **_: Any) -> None:
            common.reset()
            try:
                main.main(list(args))
            finally:
                common.reset()

    r = CliRunner().invoke(Entry(), list(args), catch_exceptions=False)  # type: ignore[arg-type]
    return r.exit_code, r.stdout, r.stderr


def test_the_cli_adds_lists_tests_and_removes_a_subscription(home: Path, receiver: Receiver) -> None:
    with agentboard.connect(str(home)) as ab:
        task = ab.board().create("Watched", assignee="worker")
    url = SECRET_URL.format(port=receiver.port)
    code, out, err = cli("notify", "add", url, "--task", task["id"], "--kind", "completed,blocked")
    assert code == 0, err
    assert out.strip().startswith("subscription 1: json://***@127.0.0.1") and f"follows task {task['id']}" in out
    code, out, _ = cli("notify", "list", "--json")
    [row] = json.loads(out)
    assert row["scope"] == "task" and row["kinds"] == ["completed", "blocked"] and not row["parked"]
    code, table, _ = cli("notify", "list")
    for text in (out, table):
        assert "hunter22" not in text and "zz-token-99" not in text
    code, out, err = cli("notify", "test", "1")
    assert code == 0 and out.strip() == f"sent a test message to json://***@127.0.0.1:{receiver.port}/***"
    assert receiver.accepted()[0].title == "agentboard test"
    receiver.fail_all = True
    code, out, err = cli("notify", "test", "1")
    assert code == 1 and "refused the test message" in err and "500" in err and "hunter22" not in err
    code, out, _ = cli("notify", "remove", "1")
    assert code == 0 and "removed subscription 1" in out
    code, out, _ = cli("notify", "list", "--json")
    assert json.loads(out) == []


def test_the_cli_refuses_bad_input_with_one_line_and_writes_nothing(home: Path) -> None:
    with agentboard.connect(str(home)) as ab:
        before = len(ab.board().events())
        for args, needle in (
            (("notify", "add", "nosuch://x"), "Apprise cannot send"),
            (("notify", "add", "notaurl"), "it has no scheme:// part"),
            (("notify", "add", "json://127.0.0.1:9/x", "--kind", "done"), "unknown event kind 'done'"),
            (("notify", "add", "json://127.0.0.1:9/x", "--task", "t_00000000"), "no task t_00000000"),
            (("notify", "add", "json://127.0.0.1:9/x", "--goal", "g_1", "--profile", "p"), "one of --task"),
            (("notify", "remove", "42"), "no subscription 42"),
        ):
            code, out, err = cli(*args)
            lines = err.strip().splitlines()
            assert code != 0 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
        assert len(ab.board().events()) == before
        assert kn.list_subscriptions(ab.db, None) == []


@pytest.fixture
def api(home: Path) -> Iterator[Any]:
    from api.conftest import start_api

    with agentboard.connect(str(home)) as client, start_api(client) as a:
        yield a


def test_the_api_manages_subscriptions_and_never_returns_a_target_in_full(api: Any, receiver: Receiver) -> None:
    admin = api.as_admin
    task = api.ab.board().create("Over HTTP", assignee="worker")
    url = SECRET_URL.format(port=receiver.port)
    r = admin.post("/api/notify/subscriptions", json={"target": url, "scope": "task", "subject": task["id"]})
    assert r.status_code == 201, r.text
    sub = r.json()
    assert sub["target"] == f"json://***@127.0.0.1:{receiver.port}/***"
    listed = admin.get("/api/notify/subscriptions", params={"task": task["id"]})
    assert [s["id"] for s in listed.json()] == [sub["id"]]
    assert "hunter22" not in listed.text and "zz-token-99" not in listed.text
    tested = admin.post(f"/api/notify/subscriptions/{sub['id']}/test").json()
    assert tested["ok"] is True and receiver.accepted()[0].path == "/hooks/zz-token-99"
    bad = admin.post("/api/notify/subscriptions", json={"target": "nosuch://x"})
    assert bad.status_code == 400 and "Apprise cannot send" in bad.json()["error"]["message"]
    assert admin.post("/api/notify/subscriptions/999/resume").status_code == 404
    viewer = api.client(api.token("watcher", role="viewer"))
    assert viewer.get("/api/notify/subscriptions").status_code == 200
    assert viewer.delete(f"/api/notify/subscriptions/{sub['id']}").status_code == 403
    api.ab.create_board("other")
    other = api.client(api.token("elsewhere", boards=("other",)))
    assert other.delete(f"/api/notify/subscriptions/{sub['id']}").status_code == 404
    assert admin.delete(f"/api/notify/subscriptions/{sub['id']}").status_code == 200
    assert admin.get("/api/notify/subscriptions").json() == []


@pytest.mark.parametrize(("key", "value", "needle"), [
    ("AGENTBOARD_NOTIFY_PARK_AFTER", "0", "notify_park_after=0: must be a whole number of failures, 1 or more"),
    ("AGENTBOARD_NOTIFY_RETRY_BASE", "-1", "notify_retry_base=-1.0: must be a number of seconds above 0"),
    ("AGENTBOARD_PUBLIC_URL", "board.local", "public_url='board.local': must be the dashboard's http"),
])
def test_a_notifier_setting_out_of_range_is_refused_saying_what_it_must_be(
        home: Path, monkeypatch: pytest.MonkeyPatch, key: str, value: str, needle: str) -> None:
    monkeypatch.setenv(key, value)
    code, out, err = cli("notify", "list")
    assert code == 2 and err.strip().startswith(f"error: invalid setting {needle}"), err


def test_the_configuration_shows_notify_default_masked(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentboard import config

    monkeypatch.setenv("AGENTBOARD_NOTIFY_DEFAULT", "tgram://123456:ABCDEF-secret/987")
    settings = config.load()
    assert settings.notify_default == ("tgram://123456:ABCDEF-secret/987",)
    assert config.shown(settings)["notify_default"] == "***"
