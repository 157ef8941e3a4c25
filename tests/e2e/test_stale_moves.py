"""A move a person confirmed in the dashboard runs only from the status they saw (Chromium on a
real server): when a reviewer, a worker or another tab moves the task while the dialog is open,
confirming changes nothing, a toast names the status the task is in now, and the view shows it.
The drawer's buttons, a drag onto a column and the bulk bar's *Move to…* all send the status seen."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_ui import SCREENSHOTS, T, coder, expect, uniq

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-stale-moves")]


def in_review(kernel: Any, title: str) -> dict[str, Any]:
    b = coder(kernel)
    t = b.create(title, assignee="coder", review=True)
    run = b.claim(t["id"])
    b.complete(t["id"], summary="please look", run_id=run["run_id"])
    return t


def event_kinds(server: Any, task_id: str) -> list[str]:
    return [e["kind"] for e in server.api("GET", f"/api/tasks/{task_id}?events=1000")["events"]]


def open_drawer(page: Any, task_id: str) -> Any:
    page.reload()
    page.locator(f".card[data-id='{task_id}']").click()
    drawer = page.locator("#drawer")
    expect(drawer.locator(".drawer-id")).to_have_text(task_id, timeout=T)
    return drawer


def test_request_changes_confirmed_after_the_task_was_approved_elsewhere_says_it_is_done_and_reopens_nothing(
        page: Any, server: Any, kernel: Any) -> None:
    t = in_review(kernel, uniq("Stale review"))
    drawer = open_drawer(page, t["id"])
    drawer.get_by_role("button", name="Request changes → Todo").click()
    dialog = page.get_by_role("dialog")
    dialog.locator("input").fill("please add tests")
    kernel.board().review(t["id"], "approved", "fine by me")  # the reviewer, in another tab
    expect(drawer.locator(".status-label")).to_have_text("Done", timeout=T)  # the drawer follows, under the dialog
    dialog.get_by_role("button", name="Send back").click()
    toast = page.locator(".toast-error")
    expect(toast).to_contain_text(f"task {t['id']} is now done, no longer review: nothing changed", timeout=T)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "stale_request_changes.png"))
    assert kernel.board().show(t["id"])["status"] == "done"
    assert "reopened" not in event_kinds(server, t["id"])
    expect(drawer.get_by_role("button", name="Reopen → Todo")).to_be_visible()


def test_a_reclaim_confirmed_after_the_worker_finished_says_so_and_the_task_stays_done(
        page: Any, server: Any, kernel: Any) -> None:
    b = coder(kernel)
    t = b.create(uniq("Stale reclaim"), assignee="coder")
    run = b.claim(t["id"])
    drawer = open_drawer(page, t["id"])
    drawer.get_by_role("button", name="Reclaim → Ready").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Reclaim")
    b.complete(t["id"], summary="finished by worker", run_id=run["run_id"])
    expect(drawer.locator(".status-label")).to_have_text("Done", timeout=T)
    dialog.get_by_role("button", name="Reclaim").click()
    expect(page.locator(".toast-error")).to_contain_text(f"task {t['id']} is now done, no longer running",
                                                         timeout=T)
    assert b.show(t["id"])["status"] == "done"
    assert "reopened" not in event_kinds(server, t["id"])


def test_a_card_dropped_on_done_after_a_worker_took_it_is_refused_and_the_worker_keeps_it(
        page: Any, server: Any, kernel: Any) -> None:
    b = coder(kernel)
    t = b.create(uniq("Stale drag"), assignee="coder")
    page.reload()
    source = page.locator(f".card[data-id='{t['id']}']")
    expect(source).to_be_visible(timeout=T)
    box = source.bounding_box()
    target = page.locator(".column[data-status='done'] .column-body").bounding_box()
    assert box and target
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 20)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 + 20, box["y"] + 30, steps=4)
    page.mouse.move(target["x"] + target["width"] / 2, target["y"] + 60, steps=12)
    page.mouse.up()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Mark as done", timeout=T)
    b.claim(t["id"])  # the dispatcher starts it while the person reads the dialog
    dialog.get_by_role("button", name="Mark as done").click()
    expect(page.locator(".toast-error")).to_contain_text(f"task {t['id']} is now running, no longer ready", timeout=T)
    # the card goes back to where the task is
    expect(page.locator(f".column[data-status='running'] .card[data-id='{t['id']}']")).to_be_visible(timeout=T)
    shown = b.show(t["id"])
    assert shown["status"] == "running" and shown["current_run_id"] is not None
    b.reclaim(t["id"])


def test_a_bulk_move_confirmed_after_one_task_started_moves_only_the_others_and_lists_the_one_refused(
        page: Any, server: Any, kernel: Any) -> None:
    b = coder(kernel)
    first = b.create(uniq("Bulk stays"), assignee="coder")
    second = b.create(uniq("Bulk started"), assignee="coder")
    page.reload()
    page.locator(f".card[data-id='{first['id']}'] .card-check").check()
    page.locator(f".card[data-id='{second['id']}'] .card-check").check()
    page.locator("#bulkbar .bulk-status").select_option("done")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("2 tasks", timeout=T)
    b.claim(second["id"])
    dialog.get_by_role("button", name="Mark as done").click()
    toast = page.locator(".toast-error")
    expect(toast).to_contain_text("1 of 2 updated", timeout=T)
    expect(toast).to_contain_text(f"{second['id']}: task {second['id']} is now running, no longer ready")
    assert b.show(first["id"])["status"] == "done"
    assert b.show(second["id"])["status"] == "running"
    expect(page.locator(f".column[data-status='running'] .card[data-id='{second['id']}']")).to_be_visible(timeout=T)
    b.reclaim(second["id"])
