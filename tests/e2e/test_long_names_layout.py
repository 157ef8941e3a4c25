"""Long names and busy boards keep their layout (Chromium on a real server): the top bar stays one
row on a laptop with a long board name, six boards and a two-limit budget well spent; the
supervisor panel keeps a long escalation title inside its card and separates what it is working
on; the drawer keeps a long goal inside it and an attempt's row on one line."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from dashboard_ui import SCREENSHOTS, T, expect

from agentboard.kernel import budgets, supervision

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-long-names")]

LONG_BOARD = "Web Platform — “Rewrite” 🚀"


def shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name))


def open_page(browser: Any, server: Any, width: int, path: str = "/?board=web") -> Any:
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.page_errors = errors
    page.goto(server.login_url)
    page.wait_for_selector(".column[data-status='todo']", timeout=15000)
    page.goto(server.url + path)
    page.wait_for_selector(".column[data-status='todo']", timeout=15000)
    return page


def close(page: Any) -> None:
    errors = page.page_errors
    page.context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture(scope="module")
def web(kernel: Any) -> Any:
    """Board "web" with a long name among six boards, a budget of two limits half spent (50 runs
    of 200, $2.52 of $5.00), and the profile that ran them."""
    kernel.add_profile("ok", command="true")
    kernel.create_board("web", name=LONG_BOARD, icon="🌐")
    for slug in ("research", "empty", "big", "other"):
        kernel.create_board(slug, name=f"Board {slug}")
    b = kernel.board("web")
    for i in range(50):
        t = b.create(f"spent {i}", assignee="ok")
        run = b.claim(t["id"])
        b.complete(t["id"], summary="done", run_id=run["run_id"], usage={"cost_usd": 0.0504})
    budgets.set_budget(kernel.db, "board", "web", budgets.Limits.build(max_runs=200, max_cost=5.0))
    return b


@pytest.mark.parametrize("width", [1280, 1400, 1440, 1600, 1720, 1920])
def test_the_top_bar_stays_one_row_with_a_long_board_name_six_boards_and_a_two_limit_budget(
        browser: Any, server: Any, web: Any, width: int) -> None:
    page = open_page(browser, server, width)
    expect(page.locator("#topbar .budget-line")).to_have_count(2, timeout=T)
    expect(page.locator("#topbar .budget-line").last).to_contain_text("50 runs / 200 runs")
    switcher = page.locator("#topbar select.board-switch")
    expect(switcher.locator("option:checked")).to_have_text(f"🌐 {LONG_BOARD}")
    expect(switcher).to_have_attribute("title", f"board: {LONG_BOARD}")  # the whole name when it is cut
    shot(page, f"topbar_long_board_{width}.png")
    rows = page.evaluate("""() => { const mids = Array.from(document.querySelectorAll('#topbar > *'))
        .filter((el) => el.offsetParent !== null && el.getBoundingClientRect().width > 0)
        .map((el) => { const r = el.getBoundingClientRect(); return r.top + r.height / 2; });
        return Math.max(...mids) - Math.min(...mids); }""")
    height = page.locator("#topbar").bounding_box()["height"]
    assert rows < 6 and height < 56, f"the top bar wraps onto a second row at {width} px ({height:.0f} px high)"
    right = page.evaluate("innerWidth")
    for cls in ("dispatch-now", "help-btn", "conn", "board-switch"):
        box = page.locator(f"#topbar .{cls}").bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= right + 0.5, f".{cls} is cut off at {width} px"
    expect(page.get_by_role("button", name="Dispatch now")).to_be_visible()  # its name, even shortened
    close(page)


def test_the_supervisor_panel_keeps_a_long_title_in_its_card_and_separates_what_it_works_on(
        browser: Any, server: Any, kernel: Any, web: Any) -> None:
    supervision.set_supervisor(kernel.db, "web", "ok", actor="alice")
    try:
        long = web.create("A" * 480 + " #83", assignee="ok")
        supervision.escalate(kernel.db, "web", long["id"], "need input: which API version?", actor="supervisor:ok")
        for i in range(6):
            t = web.create(f"stuck {i} {uuid.uuid4().hex[:4]}", assignee="ok")
            web.block(t["id"], f"waiting for the design review {i}")
        supervision.take_due(kernel.db, "web")  # the supervisor takes its wakes: supervision tasks it works on
        page = open_page(browser, server, 1440)
        page.locator("nav.tabs button[data-view='supervisor']").click()
        items = page.locator(".sup-working-list li")
        expect(items).to_have_count(6, timeout=T)
        escalations = page.locator(".sup-section", has_text="Escalations")
        link = escalations.locator(".sup-item", has_text="need input: which API version?").locator(".sup-link")
        expect(link).to_be_visible()
        shot(page, "supervisor_long_titles.png")

        card = escalations.bounding_box()
        box = link.bounding_box()
        assert card and box and box["x"] + box["width"] <= card["x"] + card["width"], "the title runs out of its card"
        assert box["height"] < 80, "a long title is at most three lines"
        assert link.get_attribute("title").endswith("A #83")  # the whole title on hover
        sideways = page.evaluate("document.documentElement.scrollWidth - innerWidth")
        assert sideways <= 0

        # each item it works on stands apart: a separator after each but the last, never touching
        gaps = page.evaluate("""() => { const li = Array.from(document.querySelectorAll('.sup-working-list li'));
            return li.map((el, i) => ({ after: getComputedStyle(el, '::after').content,
              gap: i + 1 < li.length && li[i + 1].getBoundingClientRect().top === el.getBoundingClientRect().top
                ? li[i + 1].getBoundingClientRect().left - el.querySelector('.sup-link').getBoundingClientRect().right
                : null })); }""")
        assert [g["after"] for g in gaps[:-1]] == ['","'] * 5 and gaps[-1]["after"] in ("none", "normal")
        assert all(g["gap"] is None or g["gap"] >= 6 for g in gaps), gaps
        # the header keeps its pills whole, the wake counts on one row
        who = page.locator(".sup-who")
        expect(who).to_have_text("supervised by ok")
        assert page.evaluate("(() => { const e = document.querySelector('.sup-who'); return e.scrollWidth <= e.clientWidth; })()")
        tops = page.evaluate("Array.from(document.querySelectorAll('.sup-counts .pill')).map((p) => p.getBoundingClientRect().top)")
        assert len(set(tops)) == 1, f"the wake counts stack: {tops}"
        close(page)
    finally:
        supervision.set_supervisor(kernel.db, "web", None, actor="alice")


def test_the_drawer_keeps_a_long_goal_inside_it_and_an_attempts_row_on_one_line(
        browser: Any, server: Any, web: Any) -> None:
    goal = web.goal("Goal with an extremely long title that goes on and on to test the wrapping behaviour in the drawer")
    t = web.create("Short #50", assignee="ok", goal=goal["id"], review=True)
    run = web.claim(t["id"])
    web.complete(t["id"], summary="extracted", run_id=run["run_id"],
                 metadata={"degraded": True, "errors": ["no result.json"]})
    page = open_page(browser, server, 1440, f"/?task={t['id']}")
    drawer = page.locator("#drawer")
    pill = drawer.locator(".meta-goal")
    expect(pill).to_contain_text("Goal with an extremely long title", timeout=T)
    expect(pill).to_have_attribute("title", f"goal: {goal['title']}")
    d, p = drawer.bounding_box(), pill.bounding_box()
    assert d and p and p["x"] + p["width"] <= d["x"] + d["width"] - 12, "the goal pill runs out of the drawer"
    ellipsis = page.evaluate("""() => { const s = document.querySelector('#drawer .meta-goal .pill-text');
        return getComputedStyle(s).textOverflow === 'ellipsis' && s.scrollWidth > s.clientWidth; }""")
    assert ellipsis, "a cut goal title ends in an ellipsis"

    row = drawer.locator(".run").first
    row.scroll_into_view_if_needed()
    shot(page, "drawer_long_goal_runs.png")
    attempt, degraded = row.locator(".run-attempt"), row.locator(".pill-degraded")
    expect(degraded).to_have_text("degraded")
    line = float(page.evaluate("parseFloat(getComputedStyle(document.querySelector('#drawer .run-attempt')).lineHeight)"))
    assert attempt.bounding_box()["height"] <= line + 1, "“attempt 1” wraps onto two lines"
    assert degraded.bounding_box()["width"] < 90, "the degraded pill stretches"
    tops = {round(row.locator(sel).bounding_box()["y"]) for sel in (".run-attempt", ".run-outcome", ".pill-degraded",
                                                                    ".run-profile", ".run-dur")}
    assert max(tops) - min(tops) <= 4, f"the attempt's row is not one line: {tops}"
    close(page)
