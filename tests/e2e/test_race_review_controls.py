"""A race in review in the dashboard offers only what works for it: its drawer has the Pick
buttons and no Approve or Request changes (a race is finished by a pick, docs/races.md), and
dragging its card to Done is refused on the board with why, instead of a 409 from the server
(Chromium on a real `agentboard serve`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-race-review-controls")]

T = 10_000  # ms: the longest a user-visible change may take to appear
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the browser fixture skips first
    expect = None


def _race_in_review(kernel: Any, title: str) -> str:
    """A race (until all) whose two attempts both ran and passed: in review, nothing picked."""
    from agentboard.kernel import races

    board = kernel.board("rr")
    tid = board.create(title, race=["alpha", "beta"])["id"]
    races.settle(board.db, board.slug)
    for a in races.attempts(board.db, board.slug, tid)["attempts"]:
        at = a["attempt_task_id"]
        board.complete(at, run_id=board.claim(at)["run_id"], usage={"cost_usd": 0.01})
    races.settle(board.db, board.slug)
    assert board.show(tid)["status"] == "review"
    return str(tid)


def _card(page: Any, title: str) -> Any:
    return page.locator(".card", has=page.locator(".card-title", has_text=title))


def _drag_to(page: Any, source: Any, status: str) -> None:
    """Press on the card, move in steps to the column, release (pointer events, as a hand would).
    The board may draw the card again meanwhile: then it is found again."""
    from playwright.sync_api import Error

    for _ in range(20):
        try:
            source.scroll_into_view_if_needed()
            break
        except Error as exc:
            if "not attached" not in str(exc):
                raise
            page.wait_for_timeout(50)
    box = source.bounding_box()
    target = page.locator(f".column[data-status='{status}'] .column-body").bounding_box()
    assert box and target
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 30)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 + 20, box["y"] + 40, steps=4)
    page.mouse.move(target["x"] + target["width"] / 2, target["y"] + 60, steps=12)
    page.mouse.up()


def test_a_race_in_review_offers_its_pick_buttons_and_no_approval_that_would_fail(
        page: Any, kernel: Any, server: Any) -> None:
    kernel.create_board("rr")
    for name in ("alpha", "beta"):
        kernel.add_profile(name, command="true")
    drawn = _race_in_review(kernel, "Race in review, drawer")
    dragged = _race_in_review(kernel, "Race in review, dragged")

    page.goto(f"{server.url}/?board=rr")
    _card(page, "Race in review, drawer").click()
    drawer = page.locator("#drawer")
    expect(drawer.locator("button.race-pick")).to_have_count(2, timeout=T)
    actions = drawer.locator(".action-row button")
    expect(actions).to_have_text(["Archive"], timeout=T)
    expect(drawer.get_by_role("button", name="Approve")).to_have_count(0)
    expect(drawer.get_by_role("button", name="Request changes")).to_have_count(0)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "race_review_controls.png"))

    # the pick is what finishes it, and it works from the same drawer
    drawer.locator("button.race-pick", has_text="Pick #2").click()
    expect(page.locator(".toast", has_text="Picked attempt 2")).to_be_visible(timeout=T)
    assert kernel.board("rr").show(drawn)["status"] == "done"
    expect(page.locator(f".column[data-status='done'] .card[data-id='{drawn}']")).to_be_visible(timeout=T)
    drawer.locator("button.drawer-close").click()

    # dragged to Done, the card says why it stays, without asking the server
    _drag_to(page, _card(page, "Race in review, dragged"), "done")
    expect(page.locator(".toast-error")).to_contain_text("finished by picking one of its attempts", timeout=T)
    expect(page.locator(f".column[data-status='review'] .card[data-id='{dragged}']")).to_be_visible(timeout=T)
    assert kernel.board("rr").show(dragged)["status"] == "review"
