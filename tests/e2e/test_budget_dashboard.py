"""The budget lines and diagnostics in the dashboard: spent / limit with a bar in the drawer and
the board header, and a finding's fix applied by its button (Chromium on a real server)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentboard.kernel import budgets, profiles

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-budget-dashboard")]

T = 10_000  # ms: the longest a user-visible change may take to appear
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


def uniq(label: str) -> str:
    return f"{label} {uuid.uuid4().hex[:6]}"


def card(page: Any, title: str) -> Any:
    return page.locator(".card", has=page.locator(".card-title", has_text=title))

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the browser fixture skips first
    expect = None


def test_a_spent_task_budget_shows_its_bar_and_the_fix_button_clears_it(page: Any, kernel: Any) -> None:
    b = kernel.board()
    if not any(p["name"] == "coder" for p in kernel.profiles()):
        kernel.add_profile("coder", command="true")
    t = b.create(uniq("Costly"), assignee="coder")
    budgets.set_budget(kernel.db, "task", t["id"], budgets.Limits.build(max_runs=0, max_cost=2.0))
    budgets.set_budget(kernel.db, "board", "default", budgets.Limits.build(max_cost=10.0, per="month"))
    budgets.record_llm_usage(kernel.db, "default", t["id"], {"use": "specifier", "cost_usd": 1.7})
    page.reload()
    expect(page.locator("#topbar .budget-line")).to_contain_text("$1.70 / $10.00", timeout=T)
    page.screenshot(path=str(_shot("budget_topbar.png")))
    card(page, t["title"]).click()
    drawer = page.locator("#drawer")
    expect(drawer.locator(".budget-line.budget-warn")).to_contain_text("$1.70 / $2.00", timeout=T)
    expect(drawer.locator(".budget-line.budget-spent")).to_contain_text("0 runs / 0 runs")
    item = drawer.locator(".diag-item", has_text="budget spent")
    expect(item).to_contain_text(f"the task {t['id']} budget is spent", timeout=T)
    page.screenshot(path=str(_shot("budget_drawer.png")))
    item.locator("button.diag-fix").click()
    expect(drawer.locator(".diag-item", has_text="budget spent")).to_have_count(0, timeout=T)
    assert budgets.show(kernel.db, scope="task", ref=t["id"]) == []
    budgets.clear_budget(kernel.db, "board", "default")


def _shot(name: str) -> Any:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / name


def test_a_card_nothing_can_run_carries_a_badge_whose_fix_button_clears_it(page: Any, kernel: Any) -> None:
    if not any(p["name"] == "coder" for p in kernel.profiles()):
        kernel.add_profile("coder", command="true")
    # with several agents the badge names the fix and leaves the choice to the person
    others = [p["name"] for p in kernel.profiles() if p["enabled"] and p["name"] != "coder"]
    if not others:
        kernel.add_profile("helper", command="true")
    t = kernel.board().create(uniq("Nobody runs me"), assignee="ghost")
    page.reload()
    badge = card(page, t["title"]).locator(".card-diag")
    expect(badge).to_contain_text("no profile", timeout=T)
    expect(badge).to_have_attribute("title", re.compile(r"'ghost', which does not exist[\s\S]*PROFILE \(one of: "))
    expect(badge.locator("button.diag-fix")).to_have_count(0)
    # with one agent the one-click fix gives the task to it
    enabled = [p["name"] for p in kernel.profiles() if p["enabled"]]
    for name in enabled:
        if name != "coder":
            profiles.update(kernel.db, name, enabled=False)
    try:
        page.reload()
        badge = card(page, t["title"]).locator(".card-diag")
        expect(badge).to_have_attribute("title", re.compile(f"fix: agentboard assign {t['id']} coder"), timeout=T)
        page.screenshot(path=str(_shot("card_badge.png")))
        badge.locator("button.diag-fix").click()
    finally:
        for name in enabled:
            if name != "coder":
                profiles.update(kernel.db, name, enabled=True)
    expect(card(page, t["title"]).locator(".card-diag")).to_have_count(0, timeout=T)
    shown = kernel.board().show(t["id"])
    assert shown.get("task", shown)["assignee"] != "ghost"
    assert not page.locator("#drawer").is_visible()  # the fix did not open the drawer


def test_the_goal_view_shows_the_goal_budget_line(page: Any, kernel: Any) -> None:
    if not any(p["name"] == "coder" for p in kernel.profiles()):
        kernel.add_profile("coder", command="true")
    b = kernel.board()
    g = b.goal(uniq("Launch"))
    t = b.create(uniq("Part of launch"), assignee="coder", goal=g["id"])
    budgets.set_budget(kernel.db, "goal", g["id"], budgets.Limits.build(max_cost=4.0, max_tokens=1000))
    budgets.record_llm_usage(kernel.db, "default", t["id"], {"use": "decomposer", "cost_usd": 1.0,
                                                            "input_tokens": 900, "output_tokens": 100})
    page.reload()
    page.locator("button.tab[data-view='goals']").click()
    goal = page.locator(f"article.goal[data-id='{g['id']}']")
    expect(goal.locator(".budget-line.budget-ok")).to_contain_text("$1.00 / $4.00", timeout=T)
    expect(goal.locator(".budget-line.budget-spent")).to_contain_text("1,000 tokens / 1,000 tokens")
    page.screenshot(path=str(_shot("goal_budget.png")))
