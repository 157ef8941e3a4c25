"""The task pickers find every task of the board (Chromium on a real server): the drawer's
"add parent / add child" and the inline create form's parent search the server as the person types,
so a task beyond the first 100 cards of its column, or one a filter hides, can be linked."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_ui import SCREENSHOTS, T, expect, uniq

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-task-pickers")]


@pytest.fixture(scope="module")
def crowded(kernel: Any) -> dict[str, Any]:
    """A Todo column of more than 100 tasks, and two tasks the board does not load (the lowest
    priorities come last, after the first 100 cards)."""
    b = kernel.board()
    for i in range(104):
        b.create(f"filler task {i}")
    return {"hidden": b.create(uniq("Needle beyond the cards"), priority=-5),
            "other": b.create(uniq("Second needle"), priority=-5)}


def pick(page: Any, picker: Any, query: str, task_id: str) -> None:
    picker.locator("input").click()
    picker.locator("input").fill(query)
    option = picker.locator(f".picker-option[data-id='{task_id}']")
    expect(option).to_be_visible(timeout=T)
    option.click()


def test_the_drawer_links_a_task_that_is_not_among_the_cards_the_board_loaded(
        page: Any, kernel: Any, crowded: dict[str, Any]) -> None:
    b = kernel.board()
    here = b.create(uniq("Links far"), priority=9)
    hidden, other = crowded["hidden"], crowded["other"]
    page.reload()
    expect(page.locator(".column[data-status='todo'] .column-more")).to_contain_text("showing 100 of", timeout=T)
    expect(page.locator(f".card[data-id='{hidden['id']}']")).to_have_count(0)  # not loaded on the board
    page.locator(f".card[data-id='{here['id']}']").click()
    drawer = page.locator("#drawer")
    parent = drawer.locator(".dep-add-parent")
    pick(page, parent, "needle beyond", hidden["id"])
    expect(drawer.locator(f".dep-parents .chip[data-id='{hidden['id']}']")).to_be_visible(timeout=T)
    assert [p["id"] for p in b.show(here["id"])["parents"]] == [hidden["id"]]

    # by keyboard, by id: a linked task is not offered again
    child = drawer.locator(".dep-add-child input")
    child.click()
    child.fill(hidden["id"])
    expect(drawer.locator(".dep-add-child .picker-note")).to_contain_text("No task matches", timeout=T)
    child.fill(other["id"])
    expect(drawer.locator(f".dep-add-child .picker-option[data-id='{other['id']}']")).to_be_visible(timeout=T)
    expect(drawer.locator(".dep-add-child .picker-list")).to_have_text(f"{other['id']}{other['title']}")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "drawer_picker.png"))
    child.press("ArrowDown")
    child.press("Enter")
    expect(drawer.locator(f".dep-children .chip[data-id='{other['id']}']")).to_be_visible(timeout=T)
    assert [c["id"] for c in b.show(here["id"])["children"]] == [other["id"]]
    expect(drawer).to_be_visible()  # Enter and Escape in the picker never close the drawer


def test_with_a_search_filter_on_the_board_the_picker_still_finds_the_other_tasks(
        page: Any, kernel: Any, crowded: dict[str, Any]) -> None:
    b = kernel.board()
    here = b.create(uniq("Filtered view"))
    page.reload()
    page.locator(".search").fill(here["title"])
    expect(page.locator(".card")).to_have_count(1, timeout=T)
    page.locator(f".card[data-id='{here['id']}']").click()
    drawer = page.locator("#drawer")
    pick(page, drawer.locator(".dep-add-parent"), crowded["other"]["title"], crowded["other"]["id"])
    expect(drawer.locator(f".dep-parents .chip[data-id='{crowded['other']['id']}']")).to_be_visible(timeout=T)


def test_the_inline_create_form_takes_a_parent_that_is_not_among_the_loaded_cards(
        page: Any, kernel: Any, crowded: dict[str, Any]) -> None:
    hidden = crowded["hidden"]
    page.reload()
    page.locator(".column[data-status='todo'] .column-add").click()
    form = page.locator(".column[data-status='todo'] .create-form")
    title = uniq("Child of the needle")
    form.locator(".create-title").fill(title)
    pick(page, form.locator(".create-parent"), hidden["id"], hidden["id"])
    expect(form.locator(".create-parent input")).to_have_value(f"{hidden['id']} · {hidden['title']}")
    form.locator(".create-title").press("Enter")
    expect(page.locator(".toast", has_text="Created")).to_be_visible(timeout=T)
    made = [t for t in kernel.board().list(search=title)]
    assert len(made) == 1
    assert [p["id"] for p in kernel.board().show(made[0]["id"])["parents"]] == [hidden["id"]]

    # text that names no picked task is refused with a word, not dropped
    form.locator(".create-title").fill(uniq("Orphan"))
    form.locator(".create-parent input").fill("no such parent")
    form.locator(".create-title").press("Enter")
    expect(form.locator(".form-error")).to_contain_text("Pick the parent from the list", timeout=T)
