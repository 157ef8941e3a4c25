"""The supervisor panel in a real browser: wakes with their reasons, escalations waiting for a
person, and proposals released or discarded in one click (the server agrees)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from agentboard.kernel import supervision

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-supervisor-panel")]

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails under CI) with the reason
    expect = None  # type: ignore[assignment]

T = 10_000


def test_the_supervisor_panel_shows_wakes_escalations_and_releases_proposals(page: Any, server: Any, kernel: Any) -> None:
    tag = uuid.uuid4().hex[:6]
    kernel.add_profile(f"sup{tag}", command="true")
    supervision.set_supervisor(kernel.db, "default", f"sup{tag}", actor="alice")
    b = kernel.board()
    stuck = b.create(f"stuck on a question {tag}")["id"]
    b.block(stuck, "which region should we deploy to?", actor="alice")
    asked = b.create(f"licence decision {tag}")["id"]
    supervision.escalate(kernel.db, "default", asked, "pick MIT or Apache-2.0", to="alice", actor=f"supervisor:sup{tag}")
    keep = b.create(f"split the importer {tag}", triage=True, actor=f"supervisor:sup{tag}")["id"]
    drop = b.create(f"rewrite everything {tag}", triage=True, actor=f"supervisor:sup{tag}")["id"]

    page.locator("nav.tabs button[data-view='supervisor']").click()
    expect(page.locator(".sup-who")).to_have_text(f"supervised by sup{tag}", timeout=T)
    expect(page.locator(".sup-table")).to_contain_text("blocked", timeout=T)
    # the wake statuses are the domain's, from GET /api/meta: a count and a filter for each
    from agentboard.domain import states

    expect(page.locator(".sup-counts .pill")).to_have_count(len(states.WAKE_STATUSES))
    expect(page.locator(".sup-filter button")).to_have_text(["all", *states.WAKE_STATUSES])
    expect(page.locator(".sup-section", has_text="Escalations")).to_contain_text(f"licence decision {tag}")
    expect(page.locator(".sup-section", has_text="Escalations")).to_contain_text("for alice")
    proposals = page.locator(".sup-section", has_text="Proposals awaiting release")
    expect(proposals).to_contain_text(f"split the importer {tag}")
    page.screenshot(path=str(__import__("pathlib").Path(__file__).resolve().parents[2] / "test-artifacts" /
                             "screenshots" / "supervisor_panel.png"))

    proposals.locator(".sup-item", has_text=f"split the importer {tag}").get_by_role("button", name="Release").click()
    expect(proposals).not_to_contain_text(f"split the importer {tag}", timeout=T)
    assert server.api("GET", f"/api/tasks/{keep}")["status"] in ("todo", "ready")
    proposals.locator(".sup-item", has_text=f"rewrite everything {tag}").get_by_role("button", name="Discard").click()
    expect(proposals).not_to_contain_text(f"rewrite everything {tag}", timeout=T)
    assert server.api("GET", f"/api/tasks/{drop}")["status"] == "archived"
    supervision.set_supervisor(kernel.db, "default", None, actor="alice")
