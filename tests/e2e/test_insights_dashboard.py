"""The Insights page (Chromium on a real server): each chart drawn from a generated run history,
the per-profile table, the window buttons, and an empty board's "no runs yet"."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from agentboard.kernel import insights, runs

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-insights-dashboard")]

T = 10_000  # ms: the longest a user-visible change may take to appear
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
DAY = 86400
PROFILES = {"claude": ("sonnet", 0.9, 0.6), "codex": ("gpt-5", 0.7, 0.3), "gemini": ("pro", 0.5, 0.15)}

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the browser fixture skips first
    expect = None


def _history(kernel: Any, slug: str, tasks: int = 60) -> None:
    """Tasks for three profiles through the real verbs: first attempts that pass or crash, retries
    that finish, spread over the last two weeks (their times moved back, the rollups rebuilt)."""
    if slug not in [b["slug"] for b in kernel.boards()]:
        kernel.create_board(slug, name="Insights")
    b = kernel.board(slug)
    for name, (model, _, _) in PROFILES.items():
        if not any(p["name"] == name for p in kernel.profiles()):
            kernel.add_profile(name, command="true", model_name=model)
    rng = random.Random(7)
    names = list(PROFILES)
    for i in range(tasks):
        name = names[i % 3]
        _, success, cost = PROFILES[name]
        tid = b.create(f"task {i}", assignee=name)["id"]
        r = b.claim(tid)["run_id"]
        if rng.random() > success:
            b.fail(tid, rng.choice(["crashed", "timed_out", "verify_failed"]), run_id=r, error="no")
            r = b.claim(tid)["run_id"]
        if i % 9 == 8:
            continue  # still running: work in progress
        b.complete(tid, run_id=r, usage={"input_tokens": 2000, "output_tokens": 400,
                                         "cost_usd": round(cost * (0.5 + rng.random()), 3)})
        back = (i % 14) * DAY + rng.random() * 3600
        took = 600 + rng.random() * 3 * 3600 * (1 + names.index(name))

        def _w(tx: Any, tid: str = tid, back: float = back, took: float = took) -> None:
            tx.execute("UPDATE tasks SET created_at = created_at - :b - :t, completed_at = completed_at - :b "
                       "WHERE id = :id", {"b": back, "t": took, "id": tid})
            tx.execute("UPDATE task_runs SET started_at = started_at - :b - :t / 3, ended_at = ended_at - :b "
                       "WHERE task_id = :id", {"b": back, "t": took, "id": tid})
        b.db.write(_w)
    _races(kernel, slug)
    insights.rebuild(kernel.db, slug)
    assert runs  # the verbs above are the kernel's


def _races(kernel: Any, slug: str) -> None:
    """Twelve races of three attempts (one per profile), claude winning most: rows of the races'
    ``attempts`` table, written straight (a race through the verbs is tests/kernel/test_insights.py's)."""
    import time

    def _w(tx: Any) -> None:
        winners = ["claude"] * 7 + ["codex"] * 4 + ["gemini"]
        now = time.time()
        tx.executemany(
            "INSERT INTO attempts (task_id, n, board, profile, state, picked, started_at) "
            "VALUES (:t, :n, :b, :p, 'finished', :w, :at)",
            [{"t": f"t_{slug[:4]}{r:04d}", "n": n + 1, "b": slug, "p": p, "w": 1 if p == winners[r] else 0,
              "at": now - r * DAY} for r in range(12) for n, p in enumerate(PROFILES)])
    kernel.db.write(_w)


def _shot(name: str) -> Any:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / name


def test_the_insights_page_draws_every_chart_from_the_run_history(page: Any, kernel: Any, server: Any) -> None:
    _history(kernel, "busy")
    page.goto(f"{server.url}/?board=busy")
    page.wait_for_selector(".column[data-status='todo']", timeout=T)
    page.locator("nav.tabs button[data-view='insights']").click()
    for chart in ("chart-throughput", "chart-cycle", "chart-cost", "chart-scatter"):
        expect(page.locator(f"#{chart}[data-drawn='1'] canvas")).to_be_visible(timeout=T)
    expect(page.locator("#chart-races[data-drawn='1'] canvas")).to_be_visible(timeout=T)
    won = page.evaluate("() => Chart.getChart(document.querySelector('#chart-races canvas')).data.datasets[1].data")
    assert won == [7, 4, 1]
    page.locator("#chart-races").screenshot(path=str(_shot("insights_races.png")))
    tiles = page.locator(".insight-tiles")
    data = kernel.board("busy").insights(by="board", since="30d")["timeline"]
    expect(tiles.locator(".tile-done .insight-value")).to_have_text(str(data["tasks_done"]))
    rows = page.locator(".insight-table tbody tr")
    expect(rows).to_have_count(3)
    claude = kernel.board("busy").insights(by="profile", since="30d")["groups"]
    first = next(g for g in claude if g["key"] == "claude")
    expect(page.locator(".insight-table tr[data-profile='claude'] td").nth(2)).to_have_text(str(first["tasks_done"]))
    # the charts hold the numbers: the throughput line sums to the tasks done
    total = page.evaluate("() => Chart.getChart(document.querySelector('#chart-throughput canvas'))"
                          ".data.datasets[0].data.reduce((a, b) => a + b, 0)")
    assert total == data["tasks_done"]
    points = page.evaluate("() => Chart.getChart(document.querySelector('#chart-scatter canvas')).data.datasets.length")
    assert points == 3
    page.screenshot(path=str(_shot("insights_page.png")))
    page.locator(".insight-table-card").screenshot(path=str(_shot("insights_table.png")))
    page.locator(".insights-window button[data-since='7d']").click()
    expect(page.locator(".insights-window button[data-since='7d']")).to_have_attribute("aria-pressed", "true")
    # the live clocks tick every second: the window buttons keep their labels through the ticks
    page.wait_for_timeout(1500)
    expect(page.locator(".insights-window button")).to_have_text(["7 days", "30 days", "90 days", "All time"])
    expect(page.locator("#chart-throughput[data-drawn='1'] canvas")).to_be_visible(timeout=T)
    days = page.evaluate("() => Chart.getChart(document.querySelector('#chart-throughput canvas')).data.labels.length")
    assert days == 7


def test_an_empty_board_says_no_runs_yet(page: Any, kernel: Any, server: Any) -> None:
    if "quiet" not in [b["slug"] for b in kernel.boards()]:
        kernel.create_board("quiet", name="Quiet")
    page.goto(f"{server.url}/?board=quiet")
    page.wait_for_selector(".column[data-status='todo']", timeout=T)
    page.keyboard.press("i")
    expect(page.locator(".insights-empty")).to_contain_text("No runs yet", timeout=T)
    expect(page.locator(".insight-card")).to_have_count(0)
    page.screenshot(path=str(_shot("insights_empty.png")))


def test_on_a_phone_every_insights_card_fits_the_screen(browser: Any, kernel: Any, server: Any) -> None:
    if "pocket" not in [b["slug"] for b in kernel.boards()]:
        _history(kernel, "pocket", tasks=12)
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True,
                                  device_scale_factor=2)
    pg = context.new_page()
    try:
        pg.goto(server.login_url)
        pg.wait_for_selector(".column[data-status='todo']", timeout=15000)
        pg.goto(f"{server.url}/?board=pocket")
        pg.wait_for_selector(".column[data-status='todo']", timeout=T)
        pg.locator("nav.tabs button[data-view='insights']").click()
        expect(pg.locator("#chart-throughput[data-drawn='1'] canvas")).to_be_visible(timeout=T)
        cards = pg.locator(".insight-card")
        assert cards.count() >= 5
        for i in range(cards.count()):
            box = cards.nth(i).bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390.5, (i, box)
        pg.screenshot(path=str(_shot("insights_phone.png")), full_page=True)
    finally:
        context.close()
