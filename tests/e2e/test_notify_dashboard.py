"""Notifications in the dashboard: subscribe a task from its drawer, see a parked target with its
last error and resume it, and follow a message's link back to the task."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Server, serving
from notify.conftest import Receiver

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-notify-dashboard")]

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails under CI) with the reason
    expect = None  # type: ignore[assignment]

T = 15_000


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Server]:
    """A server whose notifier sends at once and parks a target after one failure."""
    env = {"AGENTBOARD_NOTIFY_BATCH_DELAY": "0", "AGENTBOARD_NOTIFY_DIGEST_WINDOW": "0",
           "AGENTBOARD_NOTIFY_POLL_INTERVAL": "0.2", "AGENTBOARD_NOTIFY_PARK_AFTER": "1",
           "AGENTBOARD_PUBLIC_URL": "http://dashboard.example"}
    home: Path = tmp_path_factory.mktemp("e2e-notify") / "home"
    with serving(home, sqlite_template, **env) as srv:
        yield srv


def test_a_task_is_subscribed_from_its_drawer_and_the_target_is_shown_masked(
        page: Any, server: Server, kernel: Any, receiver: Receiver) -> None:
    task = kernel.board().create("Tell me when this is done", assignee="worker")
    page.goto(f"{server.url}/?board=default&task={task['id']}")  # a message's link opens the task
    drawer = page.locator("#drawer")
    expect(drawer.locator(".drawer-title")).to_have_text("Tell me when this is done", timeout=T)
    section = drawer.locator(".notify-section")
    expect(section).to_contain_text("Nobody is notified about this task.", timeout=T)
    section.locator(".notify-url").fill(f"json://me:pa55word@127.0.0.1:{receiver.port}/drawer/secret-path")
    section.locator(".notify-subscribe").click()
    row = section.locator(".notify-row")
    expect(row).to_contain_text(f"json://***@127.0.0.1:{receiver.port}/***", timeout=T)
    expect(row).to_contain_text("this task")
    assert "pa55word" not in page.content() and "secret-path" not in page.content()
    [sub] = server.api("GET", "/api/notify/subscriptions", params={"task": task["id"]})
    assert sub["scope"] == "task" and sub["subject"] == task["id"]
    kernel.board().complete(task["id"], summary="It is done", actor="alice")
    receiver.wait(lambda: bool(receiver.accepted("drawer/secret-path")))
    message = receiver.accepted("drawer/secret-path")[0].message
    assert f"http://dashboard.example/?board=default&task={task['id']}" in message


def test_a_parked_target_shows_its_last_error_and_resume_delivers_what_it_missed(
        page: Any, server: Server, kernel: Any, receiver: Receiver) -> None:
    receiver.fail_all = True
    server.api("POST", "/api/notify/subscriptions", json={"target": receiver.url("parked")})
    task = kernel.board().create("Missed while parked", assignee="worker")
    kernel.board().complete(task["id"], summary="finished", actor="alice")
    receiver.wait(lambda: bool(receiver.refused()))
    page.locator(".tab[data-view='notifications']").click()
    row = page.locator("tr.notify-sub.is-parked")
    expect(row).to_contain_text("parked", timeout=T)
    expect(row.locator(".notify-error")).to_contain_text("500")
    page.screenshot(path=str(Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
                             / "notifications_parked.png"))
    receiver.fail_all = False
    row.locator(".notify-resume").click()
    receiver.wait(lambda: any(task["id"] in r.message for r in receiver.accepted("parked")))
    expect(page.locator("tr.notify-sub.is-parked")).to_have_count(0, timeout=T)
