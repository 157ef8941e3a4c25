"""What the dashboard says when a form cannot go on (Chromium on a real server): "+ From
template" refuses an empty required placeholder as the CLI does and lists a template that cannot
be read with its error; Subscribe with no URL asks for one; a revoked token shows the page as
signed out (no drawer left open over the notice, the sign-in example on this server's address)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from dashboard_ui import SCREENSHOTS, T, expect

from agentboard.kernel import tokens

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-dashboard-messages")]


def shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name))


@pytest.fixture(scope="module")
def templates(server: Any) -> Path:
    folder = server.home / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "feature.toml").write_text(
        '[vars]\nowner = "alice"\n[[task]]\nkey = "spec"\ntitle = "Spec {feature}"\nassignee = "{owner}"\n'
        '[[task]]\ntitle = "Build {feature}"\nparents = ["spec"]\n')
    (folder / "broken.toml").write_text("this is not toml [[[\n")
    return folder


def test_a_template_with_an_empty_required_value_is_refused_as_the_cli_refuses_it_and_creates_nothing(
        page: Any, kernel: Any, templates: Path) -> None:
    before = len(kernel.board().list(include_archived=True))
    page.locator(".from-template").click()
    modal = page.locator(".template-modal")
    feature = modal.locator("input[name='feature']")
    expect(feature).to_have_attribute("placeholder", "required", timeout=T)
    expect(modal.locator("input[name='owner']")).to_have_value("alice")
    modal.locator("input[name='owner']").fill("")
    expect(modal.locator("input[name='owner']")).to_have_attribute("placeholder", "default: alice")
    modal.locator(".modal-ok").click()
    expect(modal.locator(".form-error")).to_have_text(
        "template feature needs a value for feature: add --set feature=…", timeout=T)
    expect(feature).to_be_focused()
    expect(feature).to_have_attribute("aria-invalid", "true")
    shot(page, "template_required_refused.png")
    assert len(kernel.board().list(include_archived=True)) == before

    # filled in: the emptied owner takes its default
    tag = uuid.uuid4().hex[:6]
    feature.fill(f"login {tag}")
    modal.locator(".modal-ok").click()
    expect(page.locator(".template-modal")).to_have_count(0, timeout=T)
    made = {t["title"]: t for t in kernel.board().list() if tag in t["title"]}
    assert made[f"Spec login {tag}"]["assignee"] == "alice"
    assert set(made) == {f"Spec login {tag}", f"Build login {tag}"}


def test_a_template_that_cannot_be_read_is_listed_greyed_with_its_error(
        page: Any, server: Any, templates: Path) -> None:
    page.locator(".from-template").click()
    modal = page.locator(".template-modal")
    expect(modal.locator(".template-select option[disabled]")).to_have_text("broken (cannot be used: see below)",
                                                                             timeout=T)
    broken = modal.locator(".template-broken li[data-name='broken']")
    expect(broken).to_contain_text("is not valid TOML")
    shot(page, "template_broken_listed.png")
    page.keyboard.press("Escape")

    # when none can be used, the dialog says so instead of "no templates yet"
    (templates / "feature.toml").rename(templates / "feature.toml.off")
    try:
        page.locator(".from-template").click()
        expect(modal.locator(".modal-message")).to_contain_text("None of this board's templates can be used", timeout=T)
        expect(modal.locator(".template-broken li[data-name='broken']")).to_be_visible()
        expect(modal).not_to_contain_text("no templates yet")
    finally:
        (templates / "feature.toml.off").rename(templates / "feature.toml")


def test_subscribe_with_no_url_asks_for_an_apprise_url(page: Any, kernel: Any) -> None:
    page.locator("nav.tabs button[data-view='notifications']").click()
    page.locator(".notify-add-btn").click()
    expect(page.locator(".toast-error", has_text="Give an Apprise URL to subscribe")).to_be_visible(timeout=T)
    expect(page.locator(".notify-new-url")).to_be_focused()

    page.locator(".toast-error .toast-x").click()
    expect(page.locator(".toast-error")).to_have_count(0)

    # the drawer's "Subscribe this task" says the same
    t = kernel.board().create(f"subscribe probe {uuid.uuid4().hex[:6]}")
    page.locator("nav.tabs button[data-view='board']").click()
    page.locator(f".card[data-id='{t['id']}']").click()
    drawer = page.locator("#drawer")
    drawer.locator(".notify-subscribe").click()
    expect(page.locator(".toast-error", has_text="Give an Apprise URL to subscribe")).to_be_visible(timeout=T)
    expect(drawer.locator(".notify-url")).to_be_focused()


def test_a_revoked_token_shows_the_page_signed_out_with_the_drawer_closed(
        browser: Any, server: Any, kernel: Any) -> None:
    name = f"member-{uuid.uuid4().hex[:6]}"
    token = tokens.create(kernel.db, name, role="member")["token"]
    t = kernel.board().create(f"revoked probe {uuid.uuid4().hex[:6]}")
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(f"{server.url}/login?token={token}")
        page.locator(f".card[data-id='{t['id']}']").click()
        expect(page.locator("#drawer .drawer-id")).to_have_text(t["id"], timeout=T)
        expect(page.locator("#conn")).to_have_attribute("data-state", "live", timeout=T)
        tokens.revoke(kernel.db, name)
        conn = page.locator("#conn")
        expect(conn).to_have_attribute("data-state", "signedout", timeout=T)
        expect(conn).to_have_text("Signed out")
        expect(page.locator("#drawer")).to_be_hidden()
        notice = page.locator(".login-needed")
        expect(notice).to_contain_text("Not signed in")
        expect(notice).to_contain_text(f"{server.url}/login?token=…")
        expect(page.locator("#toolbar")).to_be_hidden()
        shot(page, "signed_out.png")
        page.wait_for_timeout(2000)
        expect(conn).to_have_text("Signed out")  # never "Reconnecting…": nothing is retried
        page.locator("nav.tabs button[data-view='goals']").click()  # another view: still the notice
        expect(page.locator(".login-needed")).to_be_visible()
    finally:
        context.close()
    assert not errors, errors
