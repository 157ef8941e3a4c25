"""The dashboard's part of the agent CLI adapters: a task's own model (card and drawer) and the
profiles page's check."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from testenv import real_cli

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-adapters-dashboard")]

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails under CI) with the reason
    expect = None  # type: ignore[assignment]

T = 10_000
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


def uniq(label: str) -> str:
    return f"{label} {uuid.uuid4().hex[:6]}"


def card(page: Any, title: str) -> Any:
    return page.locator(".card", has=page.locator(".card-title", has_text=title))


def test_a_tasks_own_model_shows_on_its_card_and_is_changed_in_the_drawer(page: Any, kernel: Any) -> None:
    kernel.add_profile("modeler", command="true")
    t = kernel.board().create(uniq("Use a bigger model"), assignee="modeler", model="claude-opus-4-1")
    page.reload()
    c = card(page, t["title"])
    expect(c.locator(".pill-model")).to_have_text("claude-opus-4-1", timeout=T)
    c.click()
    drawer = page.locator("#drawer")
    field = drawer.locator(".meta-model")
    expect(field).to_have_value("claude-opus-4-1", timeout=T)
    field.fill("openai/gpt-5")
    field.press("Enter")
    expect(c.locator(".pill-model")).to_have_text("openai/gpt-5", timeout=T)
    assert kernel.board().show(t["id"])["model"] == "openai/gpt-5"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "task_model_on_card_and_drawer.png"))
    field = drawer.locator(".meta-model")
    field.fill("")
    field.press("Enter")
    expect(c.locator(".pill-model")).to_have_count(0, timeout=T)
    assert kernel.board().show(t["id"])["model"] is None
    expect(drawer.locator(".meta-model")).to_have_attribute("placeholder", "the profile's model")


def test_the_profiles_page_checks_a_profile_against_its_real_cli(page: Any, kernel: Any, tmp_path: Path) -> None:
    codex = real_cli("codex")
    kernel.add_profile("codex-check", adapter="codex", command=codex, env={"HOME": str(tmp_path)})
    page.get_by_role("button", name="Profiles", exact=True).click()
    row = page.locator(".profile[data-name='codex-check']")
    row.get_by_role("button", name="Check").click()
    report = row.locator(".profile-check")
    expect(report.locator(".check-summary")).to_have_text("codex-check is not ready", timeout=120_000)
    items = report.locator(".check-item")
    expect(items).to_have_count(5)
    expect(report.locator(".check-item.check-ok", has_text="flags accepted")).to_have_count(1)
    expect(report.locator(".check-item.check-ok", has_text="MCP wiring")).to_have_count(1)
    failed = report.locator(".check-item.check-fail")
    expect(failed).to_contain_text("credentials")
    expect(failed.locator(".check-fix")).to_contain_text("codex login")
    expect(items.nth(1)).to_contain_text("<prompt>")
