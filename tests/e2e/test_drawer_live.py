"""Typing in the drawer while it follows its task live (Chromium on a real server): the title and
description editors keep their text and the focus through a refresh, so the next keys go on into
the editor and never reach the page's shortcuts; the worker log keeps following its end, or stays
where the person scrolled it; the priority field refuses what is not a whole number and shows the
saved value again after any refusal."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dashboard_ui import SCREENSHOTS, T, coder, expect, uniq

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-drawer-live")]


def open_drawer(page: Any, task_id: str) -> Any:
    page.reload()
    page.locator(f".card[data-id='{task_id}']").click()
    drawer = page.locator("#drawer")
    expect(drawer.locator(".drawer-id")).to_have_text(task_id, timeout=T)
    return drawer


def interject(kernel: Any, drawer: Any, task_id: str) -> None:
    """Someone else comments on the task: the drawer refreshes; wait until it shows the comment."""
    note = uniq("interject")
    kernel.board().comment(task_id, note)
    expect(drawer.locator(".comment-body", has_text=note)).to_be_visible(timeout=T)


def test_the_title_being_typed_stays_in_its_editor_with_the_focus_through_a_live_refresh(
        page: Any, kernel: Any) -> None:
    b = coder(kernel)
    t = b.create(uniq("Editor keep"))
    drawer = open_drawer(page, t["id"])
    drawer.locator(".drawer-title").click()
    editor = drawer.locator(".title-input")
    expect(editor).to_be_focused()
    page.keyboard.press("End")
    page.keyboard.type(" EDITED")
    interject(kernel, drawer, t["id"])
    page.wait_for_timeout(400)  # longer than the editor's blur check
    expect(editor).to_be_focused()
    expect(editor).to_have_value(t["title"] + " EDITED")
    page.keyboard.type(" again")  # the caret is still at the end
    page.keyboard.press("Enter")
    expect(drawer.locator(".drawer-title")).to_have_text(t["title"] + " EDITED again", timeout=T)
    assert b.show(t["id"])["title"] == t["title"] + " EDITED again"


def test_keys_typed_into_the_description_after_a_live_refresh_go_into_it_not_to_the_shortcuts(
        page: Any, kernel: Any) -> None:
    b = coder(kernel)
    t = b.create(uniq("Description keep"), body="b")
    drawer = open_drawer(page, t["id"])
    archived_before = page.evaluate("JSON.parse(localStorage.getItem('agentboard.ui') || '{}').showArchived || false")
    drawer.locator(".body-edit").click()
    area = drawer.locator(".body-input")
    expect(area).to_be_focused()
    page.keyboard.press("Control+End")
    page.keyboard.type(" one")
    interject(kernel, drawer, t["id"])
    page.keyboard.type("gains")  # g, a, i, n, s: each a shortcut outside a field
    expect(area).to_have_value("b onegains")
    expect(area).to_be_focused()
    assert page.evaluate("document.body.dataset.view") == "board"
    assert page.evaluate("JSON.parse(localStorage.getItem('agentboard.ui') || '{}').showArchived || false") \
        == archived_before
    page.keyboard.press("Control+Enter")
    expect(drawer.locator(".task-body")).to_have_text("b onegains", timeout=T)


def test_the_worker_log_follows_its_end_through_refreshes_and_stays_where_it_was_scrolled_up(
        page: Any, server: Any, kernel: Any) -> None:
    b = coder(kernel)
    t = b.create(uniq("Log follows"), assignee="coder")
    run = b.claim(t["id"])
    log = server.home / f"follow-{t['id']}.log"
    log.write_text("".join(f"line {i}: the worker reads and edits files\n" for i in range(1, 201)))
    b.record_spawn(t["id"], run["run_id"], pid=4242, log_path=str(log))
    drawer = open_drawer(page, t["id"])
    tail = drawer.locator(".log-tail")
    expect(tail).to_contain_text("line 200:", timeout=T)
    tail.scroll_into_view_if_needed()
    position = """() => { const p = document.querySelector('#drawer .log-tail');
        return { top: p.scrollTop, end: p.scrollHeight - p.scrollTop - p.clientHeight }; }"""
    page.evaluate("() => { const p = document.querySelector('#drawer .log-tail'); p.scrollTop = p.scrollHeight; }")
    assert page.evaluate(position)["end"] < 20

    # the worker writes on: the box shows the new end (the heartbeat refreshes the drawer)
    with log.open("a") as fh:
        fh.write("".join(f"line {i}: more work\n" for i in range(201, 261)))
    b.heartbeat(t["id"], run_id=run["run_id"], note="more")
    expect(tail).to_contain_text("line 260:", timeout=T)
    interject(kernel, drawer, t["id"])  # and one more refresh without new output
    at = page.evaluate(position)
    assert at["end"] < 20, f"the log box left its end: {at}"

    # scrolled up to read: a refresh leaves it there
    page.evaluate("() => { document.querySelector('#drawer .log-tail').scrollTop = 300; }")
    with log.open("a") as fh:
        fh.write("line 261: still more\n")
    b.heartbeat(t["id"], run_id=run["run_id"], note="again")
    expect(tail).to_contain_text("line 261:", timeout=T)
    interject(kernel, drawer, t["id"])
    assert page.evaluate(position)["top"] == 300
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "drawer_log_kept.png"))
    b.reclaim(t["id"])
    b.archive(t["id"])


def test_the_priority_field_refuses_what_is_not_a_whole_number_and_shows_the_saved_value_again(
        page: Any, kernel: Any) -> None:
    b = coder(kernel)
    t = b.create(uniq("Priority input"), priority=3)
    drawer = open_drawer(page, t["id"])
    field = drawer.locator(".meta-priority")
    expect(field).to_have_value("3")

    field.fill("abc")
    field.press("Enter")
    expect(page.locator(".toast-error", has_text="Priority “abc” is not a whole number")).to_be_visible(timeout=T)
    expect(page.locator(".toast-error", has_text="the priority stays 3")).to_be_visible()
    expect(field).to_have_value("3")

    field.fill("")
    field.press("Enter")
    expect(page.locator(".toast-error", has_text="Priority cannot be empty")).to_be_visible(timeout=T)
    expect(field).to_have_value("3")

    field.fill("5000000")
    field.press("Enter")
    expect(page.locator(".toast-error", has_text="priority is 5000000; give -1000000 to 1000000")).to_be_visible(
        timeout=T)
    expect(field).to_have_value("3")
    assert b.show(t["id"])["priority"] == 3
    edits = [e for e in b.show(t["id"])["events"] if e["kind"] == "reprioritized"]
    assert edits == [], json.dumps(edits)

    field.fill("-2")  # a good value still saves
    field.press("Enter")
    expect(page.locator(f".card[data-id='{t['id']}'] .pill-prio")).to_have_text("P-2", timeout=T)
    assert b.show(t["id"])["priority"] == -2
