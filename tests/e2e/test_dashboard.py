"""The dashboard in a real browser against a live `agentboard serve --no-dispatch`.

Each test creates its own tasks (unique titles) on the shared server, acts as a user would,
and checks both what the page shows and what the server recorded.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-dashboard")]

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails under CI) with the reason
    expect = None  # type: ignore[assignment]

T = 10_000  # ms: the longest a user-visible change may take to appear


def uniq(label: str) -> str:
    return f"{label} {uuid.uuid4().hex[:6]}"


def card(page: Any, title: str) -> Any:
    return page.locator(".card", has=page.locator(".card-title", has_text=title))


def column(page: Any, status: str) -> Any:
    return page.locator(f".column[data-status='{status}']")


def drag_to(page: Any, source: Any, status: str) -> None:
    """Press on the card, move in steps to the column, release (pointer events, as a hand would).
    The board may draw the card again meanwhile (an event of its last move): then it is found again."""
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
    target = column(page, status).locator(".column-body").bounding_box()
    assert box and target
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 30)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 + 20, box["y"] + 40, steps=4)
    page.mouse.move(target["x"] + target["width"] / 2, target["y"] + 60, steps=12)
    page.mouse.up()


def pick_task(picker: Any, task_id: str) -> None:
    """Search a task picker for ``task_id`` (as typed) and pick it from the list."""
    picker.locator("input").fill(task_id)
    picker.locator(f".picker-option[data-id='{task_id}']").click(timeout=T)


def status_of(kernel: Any, task_id: str) -> str:
    return kernel.board().show(task_id)["status"]


# ---- the board ---------------------------------------------------------------------------


def test_board_renders_columns_with_counts(page: Any, server: Any, kernel: Any) -> None:
    b = kernel.board()
    kernel.add_profile("coder", command="true", description="writes code")
    parent = b.create(uniq("Design schema"), assignee="coder", priority=3, tenant="acme")
    b.create(uniq("Implement API"), assignee="coder", parents=[parent["id"]])
    b.create(uniq("Raw idea"), triage=True)
    blocked = b.create(uniq("Flaky test"), assignee="coder")
    b.block(blocked["id"], "needs staging credentials")
    gone = b.create(uniq("Old chore"), assignee="coder")
    b.archive(gone["id"])
    page.reload()

    view = server.api("GET", "/api/board")
    for col in view["columns"]:
        head = column(page, col["status"]).locator(".column-count")
        expect(head).to_have_text(str(col["count"]), timeout=T)
    for status in ("triage", "todo", "ready", "running", "review", "blocked", "done"):
        expect(column(page, status)).to_be_visible()
    expect(column(page, "archived")).to_have_count(0)

    # a card shows its pills, assignee and progress
    parent_card = card(page, parent["title"])
    expect(parent_card.locator(".pill-prio")).to_have_text("P3")
    expect(parent_card.locator(".pill-tenant")).to_have_text("acme")
    expect(parent_card.locator(".pill-progress")).to_have_text("0/1")
    expect(parent_card.locator(".assignee")).to_contain_text("coder")
    expect(card(page, blocked["title"]).locator(".card-reason")).to_have_text("needs staging credentials")

    # archived tasks sit behind a toggle
    page.get_by_label("Show archived").check()
    expect(card(page, gone["title"])).to_be_visible(timeout=T)
    expect(column(page, "archived")).to_be_visible()
    page.get_by_label("Show archived").uncheck()
    expect(column(page, "archived")).to_have_count(0, timeout=T)


def test_a_laptop_screen_shows_every_column_and_long_names_end_in_an_ellipsis(page: Any, kernel: Any) -> None:
    b = kernel.board()
    kernel.add_profile("research-assistant", command="true")
    goal = b.goal(uniq("Quarterly research briefing on agent fleets for the leadership offsite"))
    parent = b.create(uniq("Collect sources"), assignee="research-assistant", goal=goal["id"], tenant="platform-infrastructure-eu-west-1")
    b.create(uniq("Summarise"), assignee="research-assistant", parents=[parent["id"]])
    b.comment(parent["id"], "a note")
    page.set_viewport_size({"width": 1600, "height": 900})
    page.reload()
    the_card = card(page, parent["title"])
    expect(the_card).to_be_visible(timeout=T)

    # all seven columns fit side by side: nothing is cut off at the right edge
    for status in ("triage", "todo", "ready", "running", "review", "blocked", "done"):
        box = column(page, status).bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1600, status
    # a "+" button on each column a new task lands in (GET /api/meta), none elsewhere
    for status in ("triage", "todo", "ready", "running", "review", "blocked", "done"):
        want = 1 if status in ("triage", "todo", "ready") else 0
        expect(column(page, status).locator(".column-add")).to_have_count(want, timeout=T)
    # column heads line up whether or not they have a "+" button
    heights = {column(page, s).locator(".column-head").bounding_box()["height"] for s in ("todo", "running", "done")}
    assert len(heights) == 1, heights

    # a long goal, tenant or assignee is shortened with an ellipsis inside the card, and the
    # full text is on hover
    card_box = the_card.bounding_box()
    for sel in (".pill-goal .pill-text", ".pill-tenant .pill-text", ".assignee-name"):
        el = the_card.locator(sel)
        style = el.evaluate("e => [getComputedStyle(e).textOverflow, e.scrollWidth > e.clientWidth]")
        assert style == ["ellipsis", True], sel
        box = el.bounding_box()
        assert box["x"] + box["width"] <= card_box["x"] + card_box["width"], sel
    assert goal["title"] in (the_card.locator(".pill-goal").get_attribute("title") or "")
    assert "research-assistant" in (the_card.locator(".assignee").get_attribute("title") or "")


def test_a_long_block_reason_keeps_the_card_short(page: Any, kernel: Any) -> None:
    b = kernel.board()
    t = b.create(uniq("Gave up"), assignee="coder")
    reason = "gave up: 2 consecutive failures; last output:\n" + "\n".join(f"line {i} of the log" for i in range(60))
    b.block(t["id"], reason)
    page.reload()
    short = card(page, t["title"])
    expect(short.locator(".card-reason")).to_be_visible(timeout=T)
    # the reason is one line: three lines of the card at most, the same line on hover and in the drawer
    line = float(short.locator(".card-reason").evaluate("e => parseFloat(getComputedStyle(e).lineHeight)"))
    assert short.locator(".card-reason").bounding_box()["height"] <= 3 * line + 8
    first = "gave up: 2 consecutive failures; last output:"
    assert first in (short.locator(".card-reason").get_attribute("title") or "")
    assert "line 1 of the log" not in (short.locator(".card-reason").get_attribute("title") or "")
    short.click()
    notice = page.locator("#drawer .notice-blocked")
    expect(notice).to_contain_text(first, timeout=T)
    assert "line 59 of the log" not in notice.inner_text()
    # the whole text is kept with the block's event
    blocked = [e for e in b.events(0, limit=100000) if e["task_id"] == t["id"] and e["kind"] == "blocked"]
    assert blocked[-1]["payload"]["detail"] == reason


def test_drag_and_drop_moves_a_card_and_the_server_agrees(page: Any, kernel: Any) -> None:
    b = kernel.board()
    t = b.create(uniq("Drag me"), assignee="coder")
    page.reload()
    assert status_of(kernel, t["id"]) == "ready"

    drag_to(page, card(page, t["title"]), "todo")
    expect(column(page, "todo").locator(f".card[data-id='{t['id']}']")).to_have_attribute("data-status", "todo", timeout=T)
    assert status_of(kernel, t["id"]) == "todo"
    # its parents are done: a person's todo holds it there, and the card says so
    expect(column(page, "todo").locator(f".card[data-id='{t['id']}'] .card-held")).to_contain_text(
        "held in todo", timeout=T)

    drag_to(page, card(page, t["title"]), "ready")
    expect(column(page, "ready").locator(f".card[data-id='{t['id']}']")).to_have_attribute("data-status", "ready", timeout=T)
    assert status_of(kernel, t["id"]) == "ready"

    # a destructive move asks first; cancelling leaves the task alone
    drag_to(page, card(page, t["title"]), "done")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Mark as done")
    dialog.get_by_role("button", name="Cancel").click()
    expect(column(page, "ready").locator(f".card[data-id='{t['id']}']")).to_be_visible(timeout=T)
    assert status_of(kernel, t["id"]) == "ready"

    drag_to(page, card(page, t["title"]), "done")
    page.get_by_role("dialog").get_by_role("button", name="Mark as done").click()
    expect(column(page, "done").locator(f".card[data-id='{t['id']}']")).to_have_attribute("data-status", "done", timeout=T)
    assert status_of(kernel, t["id"]) == "done"


def test_a_card_moves_by_touch(browser: Any, server: Any, kernel: Any) -> None:
    t = kernel.board().create(uniq("Touch me"), assignee="coder")
    context = browser.new_context(viewport={"width": 2000, "height": 1000}, has_touch=True)
    try:
        page = context.new_page()
        page.goto(server.login_url)
        source = card(page, t["title"])
        expect(source).to_be_visible(timeout=T)
        box = source.bounding_box()
        target = column(page, "todo").locator(".column-body").bounding_box()
        assert box and target
        cdp = context.new_cdp_session(page)
        x, y = box["x"] + box["width"] / 2, box["y"] + 30
        tx = target["x"] + target["width"] / 2

        def touch(kind: str, px: float, py: float) -> None:
            points = [] if kind == "touchEnd" else [{"x": px, "y": py}]
            cdp.send("Input.dispatchTouchEvent", {"type": kind, "touchPoints": points})

        touch("touchStart", x, y)
        for i in range(1, 13):  # a sideways swipe: the card follows the finger
            touch("touchMove", x + (tx - x) * i / 12, y + 2 * i)
        touch("touchEnd", tx, y + 24)
        expect(column(page, "todo").locator(f".card[data-id='{t['id']}']")).to_have_attribute(
            "data-status", "todo", timeout=T)
        assert status_of(kernel, t["id"]) == "todo"
    finally:
        context.close()


def test_a_refused_move_shows_the_servers_reason(page: Any, kernel: Any) -> None:
    b = kernel.board()
    parent = b.create(uniq("Prerequisite"), assignee="coder")
    child = b.create(uniq("Waits for parent"), assignee="coder", parents=[parent["id"]])
    page.reload()
    drag_to(page, card(page, child["title"]), "ready")
    expect(page.locator(".toast-error")).to_contain_text(parent["id"], timeout=T)
    expect(column(page, "todo").locator(f".card[data-id='{child['id']}']")).to_be_visible(timeout=T)
    assert status_of(kernel, child["id"]) == "todo"


def test_inline_create_from_a_column_header(page: Any, kernel: Any) -> None:
    title = uniq("Created inline")
    column(page, "triage").get_by_role("button", name="New task in Triage").click()
    box = column(page, "triage").locator(".create-title")
    box.fill(title)
    box.press("Enter")
    expect(column(page, "triage").locator(".card", has_text=title)).to_be_visible(timeout=T)
    made = [t for t in kernel.board().list(status="triage") if t["title"] == title]
    assert len(made) == 1

    # Escape cancels without creating anything
    abandoned = uniq("Never created")
    column(page, "todo").get_by_role("button", name="New task in Todo").click()
    form = column(page, "todo").locator(".create-title")
    form.fill(abandoned)
    form.press("Escape")
    expect(column(page, "todo").locator(".create-form")).to_have_count(0)
    assert not [t for t in kernel.board().list(search=abandoned)]

    # assignee and priority from the form; Shift+Enter keeps typing on a new line
    second = uniq("Assigned inline")
    column(page, "todo").get_by_role("button", name="New task in Todo").click()
    form = column(page, "todo").locator(".create-form")
    form.locator(".create-assignee").select_option("coder")
    form.locator(".create-priority").fill("5")
    form.locator(".create-title").fill(second)
    form.locator(".create-title").press("Shift+Enter")
    form.locator(".create-title").type("more detail in the body")
    expect(form.locator(".create-title")).to_have_value(f"{second}\nmore detail in the body")
    form.locator(".create-title").press("Enter")
    expect(card(page, second)).to_be_visible(timeout=T)
    task = next(t for t in kernel.board().list(search=second))
    detail = kernel.board().show(task["id"])
    assert (detail["assignee"], detail["priority"], detail["status"]) == ("coder", 5, "ready")
    assert detail["body"] == "more detail in the body"
    expect(card(page, second).locator(".pill-prio")).to_have_text("P5")


# ---- the drawer --------------------------------------------------------------------------


def test_drawer_edits_the_title_and_adds_a_comment(page: Any, kernel: Any) -> None:
    t = kernel.board().create(uniq("Rename me"), assignee="coder", body="Some **bold** text")
    page.reload()
    card(page, t["title"]).click()
    drawer = page.locator("#drawer")
    expect(drawer.locator(".drawer-title")).to_have_text(t["title"], timeout=T)
    expect(drawer.locator(".task-body strong")).to_have_text("bold")

    new_title = uniq("Renamed")
    drawer.locator(".drawer-title").click()
    drawer.locator(".title-input").fill(new_title)
    drawer.locator(".title-input").press("Enter")
    expect(drawer.locator(".drawer-title")).to_have_text(new_title, timeout=T)
    expect(card(page, new_title)).to_be_visible(timeout=T)
    assert kernel.board().show(t["id"])["title"] == new_title

    comment = uniq("First review note")
    drawer.locator(".comment-input").fill(comment)
    drawer.locator(".comment-input").press("Enter")
    expect(drawer.locator(".comment-body", has_text=comment)).to_be_visible(timeout=T)
    expect(drawer.locator(".comment-input")).to_have_value("")
    assert [c["body"] for c in kernel.board().show(t["id"])["comments"]] == [comment]
    expect(card(page, new_title).locator(".meta-count").first).to_contain_text("1", timeout=T)

    # the description editor saves markdown
    drawer.locator(".body-edit").click()
    drawer.locator(".body-input").fill("## Steps\n\n- one\n- two")
    drawer.locator(".body-save").click()
    expect(drawer.locator(".task-body h2")).to_have_text("Steps", timeout=T)
    expect(drawer.locator(".task-body li")).to_have_count(2)
    assert kernel.board().show(t["id"])["body"] == "## Steps\n\n- one\n- two"

    # priority and assignee edits reach the server
    drawer.locator(".meta-priority").fill("7")
    drawer.locator(".meta-priority").press("Enter")
    expect(card(page, new_title).locator(".pill-prio")).to_have_text("P7", timeout=T)
    assert kernel.board().show(t["id"])["priority"] == 7

    # Escape closes the drawer; so does a click outside it
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    card(page, new_title).click()
    expect(drawer.locator(".drawer-title")).to_have_text(new_title, timeout=T)
    column(page, "review").locator(".column-body").click()
    expect(drawer).to_be_hidden()


def test_a_value_being_typed_in_the_drawer_survives_a_live_refresh_and_is_saved(page: Any, kernel: Any) -> None:
    t = kernel.board().create(uniq("Typed into"), assignee="coder")
    page.reload()
    card(page, t["title"]).click()
    drawer = page.locator("#drawer")
    expect(drawer.locator(".drawer-title")).to_have_text(t["title"], timeout=T)

    drawer.locator(".meta-priority").fill("4")  # typed, not yet committed
    note = uniq("Someone else's comment")
    kernel.board().comment(t["id"], note)  # a live change re-renders the drawer meanwhile
    expect(drawer.locator(".comment-body", has_text=note)).to_be_visible(timeout=T)
    expect(drawer.locator(".meta-priority")).to_have_value("4")
    expect(drawer.locator(".meta-priority")).to_be_focused()

    drawer.locator(".meta-priority").press("Enter")
    expect(card(page, t["title"]).locator(".pill-prio")).to_have_text("P4", timeout=T)
    assert kernel.board().show(t["id"])["priority"] == 4

    # the selection survives a refresh too: what is typed next replaces what was selected
    drawer.locator(".meta-priority").focus()
    page.keyboard.press("Control+A")
    again = uniq("Another comment")
    kernel.board().comment(t["id"], again)
    expect(drawer.locator(".comment-body", has_text=again)).to_be_visible(timeout=T)
    page.keyboard.type("9")
    expect(drawer.locator(".meta-priority")).to_have_value("9")
    drawer.locator(".meta-priority").press("Enter")
    expect(card(page, t["title"]).locator(".pill-prio")).to_have_text("P9", timeout=T)

    # leaving the field saves it too, once
    drawer.locator(".meta-model").fill("some-model")
    drawer.locator(".drawer-title").click()
    expect(drawer.locator(".meta-model")).to_have_value("some-model")
    page.wait_for_function(f"fetch('/api/tasks/{t['id']}').then(r => r.json()).then(d => (d.task || d).model === 'some-model')",
                           timeout=T)
    edits = [e for e in kernel.board().show(t["id"])["events"] if e["kind"] == "edited"]
    assert sum("model" in e["payload"].get("fields", []) for e in edits) == 1

    # the verify editor stays open with what was typed in it
    drawer.locator(".verify-edit").click()
    drawer.locator(".verify-input").fill("true\necho checked")
    kernel.board().comment(t["id"], note2 := uniq("Another comment"))
    expect(drawer.locator(".comment-body", has_text=note2)).to_be_visible(timeout=T)
    expect(drawer.locator(".verify-input")).to_have_value("true\necho checked")
    drawer.locator(".verify-save").click()
    expect(drawer.locator(".verify-cmd")).to_have_count(2, timeout=T)
    assert kernel.board().show(t["id"])["verify"] == ["true", "echo checked"]


def test_a_dependency_cycle_is_refused_with_the_servers_message(page: Any, kernel: Any) -> None:
    from agentboard.domain.errors import Conflict

    b = kernel.board()
    a = b.create(uniq("Cycle A"), assignee="coder")
    c = b.create(uniq("Cycle C"), assignee="coder")
    d = b.create(uniq("Cycle D"), assignee="coder")
    b.link(a["id"], c["id"])  # a → c → d
    b.link(c["id"], d["id"])
    with pytest.raises(Conflict) as refused:
        b.link(d["id"], a["id"])  # what the server will say about d → a
    page.reload()

    card(page, a["title"]).click()
    drawer = page.locator("#drawer")
    expect(drawer.locator(".dep-children .chip", has_text=c["title"])).to_be_visible(timeout=T)
    pick_task(drawer.locator(".dep-add-parent"), d["id"])
    expect(drawer.locator(".dep-error")).to_have_text(refused.value.message, timeout=T)
    assert "cycle" in refused.value.message
    assert kernel.board().show(a["id"])["parents"] == []

    # the × on a chip removes the link; adding one from the picker links it
    drawer.locator(".dep-children .chip", has_text=c["title"]).get_by_role("button", name=re.compile("remove child")).click()
    expect(drawer.locator(".dep-children .chip")).to_have_count(0, timeout=T)
    assert kernel.board().show(a["id"])["children"] == []
    pick_task(drawer.locator(".dep-add-child"), c["id"])
    expect(drawer.locator(".dep-children .chip", has_text=c["title"])).to_be_visible(timeout=T)
    assert [x["id"] for x in kernel.board().show(a["id"])["children"]] == [c["id"]]


def test_status_actions_of_a_triage_task_offer_only_what_works(page: Any, kernel: Any) -> None:
    b = kernel.board()
    idea = b.create(uniq("Triage idea"), triage=True)
    page.reload()
    card(page, idea["title"]).click()
    drawer = page.locator("#drawer")
    expect(drawer.get_by_role("button", name=re.compile("Release"))).to_be_visible(timeout=T)
    # no LLM is configured here: the helpers are greyed, their tooltip says why
    for name in ("Specify", "Decompose"):
        button = drawer.get_by_role("button", name=name)
        expect(button).to_be_disabled()
        expect(button).to_have_attribute("title", re.compile("^unavailable: "))
    assert status_of(kernel, idea["id"]) == "triage"

    expect(drawer.get_by_role("button", name="Block")).to_have_count(0)  # not offered in triage
    drawer.get_by_role("button", name=re.compile("Release")).click()
    expect(drawer.locator(".status-label")).to_have_text("Todo", timeout=T)
    assert status_of(kernel, idea["id"]) == "todo"

    drawer.get_by_role("button", name="Block").click()
    dialog = page.get_by_role("dialog")
    dialog.locator("input").fill("waiting for the design review")
    dialog.get_by_role("button", name="Block").click()
    expect(drawer.locator(".notice-blocked")).to_contain_text("waiting for the design review", timeout=T)
    assert kernel.board().show(idea["id"])["block_reason"] == "waiting for the design review"


def test_run_history_shows_one_row_per_attempt(page: Any, kernel: Any) -> None:
    b = kernel.board()
    t = b.create(uniq("Tried twice"), assignee="coder")
    run = b.claim(t["id"])
    b.reclaim(t["id"])
    run = b.claim(t["id"])
    b.complete(t["id"], summary="it works now", result="fixed", run_id=run["run_id"])
    page.reload()
    card(page, t["title"]).click()
    runs = page.locator("#drawer .run")
    expect(runs).to_have_count(2, timeout=T)
    expect(runs.nth(0)).to_have_class(re.compile("run-muted"))
    expect(runs.nth(1)).to_have_class(re.compile("run-ok"))
    expect(runs.nth(1)).to_contain_text("completed")
    expect(page.locator("#drawer .result-line")).to_have_text("fixed")
    expect(page.locator("#drawer .event-kind", has_text="completed")).to_be_visible()


def test_the_worker_log_tail_follows_a_running_task(page: Any, server: Any, kernel: Any) -> None:
    b = kernel.board()
    t = b.create(uniq("Logging worker"), assignee="coder")
    run = b.claim(t["id"])
    log = server.home / "e2e-worker.log"
    log.write_text("starting <b>step 1</b>\n")
    b.record_spawn(t["id"], run["run_id"], pid=4242, log_path=str(log))
    page.reload()
    card(page, t["title"]).click()
    tail = page.locator("#drawer .log-tail")
    expect(tail).to_have_text("starting <b>step 1</b>\n", timeout=T)
    expect(page.locator("#drawer .run-running")).to_contain_text("running")

    with log.open("a") as fh:
        fh.write("step 2 done\n")
    b.heartbeat(t["id"], run_id=run["run_id"], note="step 2")  # an event on the task refreshes the drawer
    expect(tail).to_contain_text("step 2 done", timeout=T)
    b.reclaim(t["id"])
    b.archive(t["id"])


# ---- live updates ------------------------------------------------------------------------


def test_changes_from_another_process_appear_without_reload(page: Any, server: Any, kernel: Any) -> None:
    expect(page.locator("#conn")).to_have_attribute("data-state", "live", timeout=T)
    page.evaluate("window.__sameDocument = true")

    title = uniq("From the CLI")
    out = server.cli("create", title, "--assignee", "coder")
    task_id = out.split()[0]
    expect(column(page, "ready").locator(f".card[data-id='{task_id}']")).to_be_visible(timeout=T)

    # the open drawer follows its task
    card(page, title).click()
    drawer = page.locator("#drawer")
    expect(drawer.locator(".drawer-title")).to_have_text(title, timeout=T)
    note = uniq("Note from a worker")
    server.cli("comment", task_id, note, "--author", "bot")
    expect(drawer.locator(".comment-body", has_text=note)).to_be_visible(timeout=T)
    server.cli("block", task_id, "needs a person", "--board", "default")
    expect(drawer.locator(".status-label")).to_have_text("Blocked", timeout=T)
    expect(column(page, "blocked").locator(f".card[data-id='{task_id}']")).to_be_visible(timeout=T)
    assert page.evaluate("window.__sameDocument") is True


def test_a_burst_of_events_causes_few_board_reloads(page: Any, kernel: Any) -> None:
    expect(page.locator("#conn")).to_have_attribute("data-state", "live", timeout=T)
    reloads: list[str] = []
    page.on("request", lambda r: reloads.append(r.url) if "/api/board?" in r.url else None)
    b = kernel.board()
    titles = [uniq("Burst") for _ in range(30)]
    for title in titles:  # about half a second of steady writes from another process
        b.create(title, assignee="coder")
        time.sleep(0.02)
    for title in (titles[0], titles[-1]):
        expect(card(page, title)).to_be_visible(timeout=T)
    # 30 changes arrive over many WebSocket messages; the board reloads a handful of times
    assert 1 <= len(reloads) <= 4, reloads
    for t in b.list(search="Burst "):
        b.archive(t["id"])


def test_lanes_by_profile_inside_running(page: Any, kernel: Any) -> None:
    b = kernel.board()
    kernel.add_profile("writer", command="true", description="writes docs")
    one = b.create(uniq("Coding now"), assignee="coder")
    two = b.create(uniq("Writing now"), assignee="writer")
    b.claim(one["id"])
    b.claim(two["id"])
    page.reload()
    running = column(page, "running")
    expect(running.locator(".lane[data-assignee='coder'] .card", has_text=one["title"])).to_be_visible(timeout=T)
    expect(running.locator(".lane[data-assignee='writer'] .card", has_text=two["title"])).to_be_visible()
    page.get_by_label("Lanes by profile").uncheck()
    expect(running.locator(".lane")).to_have_count(0, timeout=T)
    expect(running.locator(".card", has_text=two["title"])).to_be_visible()
    page.get_by_label("Lanes by profile").check()
    expect(running.locator(".lane").first).to_be_visible(timeout=T)
    for t in (one, two):
        b.reclaim(t["id"])
        b.archive(t["id"])


# ---- selection and the bulk bar ------------------------------------------------------------


def test_bulk_bar_reports_per_id_failures(page: Any, kernel: Any) -> None:
    b = kernel.board()
    parent = b.create(uniq("Bulk parent"), assignee="coder")
    free = b.create(uniq("Bulk free"))
    waiting = b.create(uniq("Bulk waiting"), parents=[parent["id"]])
    page.reload()
    card(page, free["title"]).locator(".card-check").check()
    card(page, waiting["title"]).click(modifiers=["Control"])
    bar = page.locator("#bulkbar")
    expect(bar.locator(".bulk-count")).to_have_text("2 selected")

    bar.locator(".bulk-assignee").select_option("coder")
    expect(page.locator(".toast", has_text="2 tasks updated")).to_be_visible(timeout=T)
    assert kernel.board().show(free["id"])["assignee"] == "coder"
    assert kernel.board().show(waiting["id"])["assignee"] == "coder"

    card(page, free["title"]).locator(".card-check").check()
    card(page, waiting["title"]).locator(".card-check").check()
    bar.locator(".bulk-status").select_option("ready")
    error = page.locator(".toast-error", has_text="1 of 2 updated")
    expect(error).to_contain_text(waiting["id"], timeout=T)
    assert status_of(kernel, free["id"]) == "ready"
    assert status_of(kernel, waiting["id"]) == "todo"
    expect(bar.locator(".bulk-count")).to_have_text("1 selected")  # the failed one stays selected

    bar.locator(".bulk-archive").click()
    page.get_by_role("dialog").get_by_role("button", name="Archive").click()
    expect(card(page, waiting["title"])).to_have_count(0, timeout=T)
    assert status_of(kernel, waiting["id"]) == "archived"
    expect(bar).to_be_hidden()


# ---- safety --------------------------------------------------------------------------------


def test_script_and_html_in_user_text_stay_inert(page: Any, kernel: Any) -> None:
    b = kernel.board()
    hostile_title = "<img src=x onerror=window.__xss=1>"
    body = (
        "<script>window.__xss=2</script>\n\n"
        "[click me](javascript:window.__xss=3) and [ok](https://example.com/a?b=1&c=2)\n\n"
        "<img src=y onerror=window.__xss=4> [x](https://e.com\" onmouseover=\"window.__xss=5)"
    )
    t = b.create(hostile_title, assignee="coder", body=body, tenant="<b>acme</b>")
    b.comment(t["id"], "<svg onload=window.__xss=6></svg> **bold** <iframe src=javascript:window.__xss=7>", author="<i>eve</i>")
    page.reload()

    hostile = card(page, hostile_title)
    expect(hostile).to_be_visible(timeout=T)
    hostile.click()
    drawer = page.locator("#drawer")
    expect(drawer.locator(".drawer-title")).to_have_text(hostile_title, timeout=T)
    expect(drawer.locator(".comment-body strong")).to_have_text("bold")
    expect(drawer.locator(".comment-author")).to_have_text("<i>eve</i>")
    expect(drawer.locator(".task-body")).to_contain_text("<script>window.__xss=2</script>")
    safe = drawer.locator(".task-body a[href='https://example.com/a?b=1&c=2']")
    expect(safe).to_have_attribute("rel", "noopener noreferrer")
    expect(card(page, hostile_title).locator(".pill-tenant")).to_have_text("<b>acme</b>")

    assert page.evaluate("typeof window.__xss") == "undefined"
    found = page.evaluate("""() => ({
        img: document.querySelectorAll('img').length,
        script: Array.from(document.scripts).filter(s => !s.src).length,
        svg: document.querySelectorAll('svg[onload], iframe, b, i').length,
        jsLinks: Array.from(document.querySelectorAll('a')).filter(a => !/^(https?:|mailto:)/.test(a.getAttribute('href') || '')).length,
        handlers: Array.from(document.querySelectorAll('*')).filter(el => Array.from(el.attributes).some(a => a.name.startsWith('on'))).length,
    })""")
    assert found == {"img": 0, "script": 0, "svg": 0, "jsLinks": 0, "handlers": 0}
    # hovering and clicking the rendered text triggers nothing either
    drawer.locator(".task-body").hover()
    drawer.locator(".task-body").get_by_text("click me").click()
    assert page.evaluate("typeof window.__xss") == "undefined"


def test_markdown_renderer_escapes_first(page: Any) -> None:
    cases = page.evaluate("""async () => {
        const md = await import('/markdown.js');
        const render = (src) => { const d = document.createElement('div'); d.innerHTML = md.renderMarkdown(src); return d; };
        const a = render('[a](javascript:alert(1)) [b](data:text/html,x) [c](mailto:me@example.com) <a href=x>y</a>');
        const b = render('`<b>code</b>` **bold** _it_ https://example.com/x.');
        const c = render('```\\n<script>x</script>\\n```');
        return {
            hrefs: Array.from(a.querySelectorAll('a')).map(x => [x.getAttribute('href'), x.rel, x.target]),
            aText: a.textContent,
            code: b.querySelector('code').textContent, bold: b.querySelector('strong').textContent,
            em: b.querySelector('em').textContent, auto: b.querySelector('a').getAttribute('href'),
            pre: c.querySelector('pre').textContent, scripts: c.querySelectorAll('script').length,
        };
    }""")
    assert cases["hrefs"] == [["mailto:me@example.com", "noopener noreferrer", "_blank"]]
    assert "<a href=x>y</a>" in cases["aText"]
    assert cases["code"] == "<b>code</b>"
    assert (cases["bold"], cases["em"], cases["auto"]) == ("bold", "it", "https://example.com/x")
    assert cases["pre"] == "<script>x</script>"
    assert cases["scripts"] == 0


# ---- goals, profiles, boards, toolbar --------------------------------------------------------


def test_goals_view_shows_progress_blocked_reasons_and_cost(page: Any, kernel: Any) -> None:
    b = kernel.board()
    goal = b.goal(uniq("Launch"))
    done = b.create(uniq("Goal part done"), assignee="coder", goal=goal["id"])
    run = b.claim(done["id"])
    b.complete(done["id"], summary="ok", run_id=run["run_id"])
    stuck = b.create(uniq("Goal part stuck"), assignee="coder", goal=goal["id"])
    b.block(stuck["id"], "waiting on legal")
    page.get_by_role("button", name="Goals", exact=True).click()
    g = page.locator(f".goal[data-id='{goal['id']}']")
    expect(g.locator(".goal-title")).to_have_text(goal["title"], timeout=T)
    expect(g.locator(".goal-progress")).to_contain_text("1/2 done")
    expect(g.locator(".goal-blocked")).to_contain_text("waiting on legal")
    expect(g.locator(".goal-cost")).to_contain_text("$0.00")
    g.get_by_role("button", name=stuck["title"]).click()
    expect(page.locator("#drawer .drawer-title")).to_have_text(stuck["title"], timeout=T)


def test_a_click_on_a_goals_blocked_task_survives_a_live_refresh_between_press_and_release(
        page: Any, kernel: Any) -> None:
    b = kernel.board()
    goal = b.goal(uniq("Refreshed"))
    stuck = b.create(uniq("Pressed while refreshing"), assignee="coder", goal=goal["id"])
    b.block(stuck["id"], "waiting on a vendor")
    page.get_by_role("button", name="Goals", exact=True).click()
    button = page.locator(f".goal[data-id='{goal['id']}']").get_by_role("button", name=stuck["title"])
    expect(button).to_be_visible(timeout=T)
    # the view may re-render once more as it settles (the block's event): its box once it stays
    expect(page.locator(f".goal[data-id='{goal['id']}'] .goal-blocked")).to_contain_text("waiting on a vendor", timeout=T)
    box = None
    for _ in range(50):
        box = button.bounding_box()
        if box is not None:
            break
        page.wait_for_timeout(100)
    assert box is not None, "the goal's blocked task never stayed on screen"
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    # an event on the board while the button is held: the view's live refresh comes meanwhile
    b.comment(stuck["id"], "still waiting", author="someone")
    page.wait_for_timeout(1500)
    page.mouse.up()
    expect(page.locator("#drawer .drawer-title")).to_have_text(stuck["title"], timeout=T)
    # and the refresh it waited for came after the click
    expect(page.locator(f".goal[data-id='{goal['id']}'] .goal-blocked")).to_contain_text("waiting on a vendor")


def test_profiles_panel_edits_a_description(page: Any, kernel: Any) -> None:
    kernel.add_profile("reviewer", command="true", description="old words", model_name="opus", max_concurrency=2)
    page.get_by_role("button", name="Profiles", exact=True).click()
    row = page.locator(".profile[data-name='reviewer']")
    expect(row.locator(".profile-desc")).to_have_value("old words", timeout=T)
    expect(row.locator(".profile-head")).to_contain_text("opus")
    expect(row.locator(".profile-head")).to_contain_text("≤ 2 at once")
    expect(page.locator(".panel-head .hint code")).to_have_text("agentboard profiles add")
    row.locator(".profile-desc").fill("reads diffs and judges them")
    row.get_by_role("button", name="Save description").click()
    expect(row.locator(".save-state")).to_have_text("saved", timeout=T)
    assert next(p for p in kernel.profiles() if p["name"] == "reviewer")["description"] == "reads diffs and judges them"


def test_toolbar_filters_and_search(page: Any, kernel: Any) -> None:
    b = kernel.board()
    mine = b.create(uniq("Tenant task"), assignee="coder", tenant="globex")
    other = b.create(uniq("Other tenant"), assignee="coder", tenant="initech")
    page.reload()
    page.locator(".filter-tenant").select_option("globex")
    expect(card(page, other["title"])).to_have_count(0, timeout=T)
    expect(card(page, mine["title"])).to_be_visible()
    page.locator(".filter-tenant").select_option("")
    expect(card(page, other["title"])).to_be_visible(timeout=T)

    page.keyboard.press("/")
    expect(page.locator(".search")).to_be_focused()
    page.keyboard.type(other["title"])
    expect(page.locator(".card")).to_have_count(1, timeout=T)
    expect(card(page, other["title"])).to_be_visible()


def test_without_an_llm_the_orchestration_switch_is_greyed_with_the_reason(page: Any) -> None:
    expect(page.locator(".dispatch-now")).to_be_visible(timeout=T)
    toggle = page.locator(".orchestration")
    expect(toggle).to_have_attribute("title", re.compile("^unavailable: "))
    expect(toggle.locator("button[data-mode='auto']")).to_be_disabled()


def test_the_token_never_reaches_page_javascript(page: Any, server: Any) -> None:
    assert server.token not in page.evaluate("document.cookie")
    assert server.token not in page.content()
    assert server.token not in page.evaluate("JSON.stringify(localStorage) + JSON.stringify(sessionStorage)")
    assert server.token not in page.url


def test_dispatch_now_reports_the_servers_answer(page: Any) -> None:
    page.get_by_role("button", name="Dispatch now").click()
    # this server runs with --no-dispatch: the server's explanation is shown
    expect(page.locator(".toast-error")).to_contain_text("without a dispatcher", timeout=T)


def test_board_switcher_appears_with_a_second_board(page: Any, kernel: Any) -> None:
    # run last in this module: it leaves the browser's saved board on the new one
    expect(page.locator(".board-switch")).to_be_hidden()
    page.get_by_role("button", name="+ New board").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("board slug").fill("research")
    dialog.get_by_label("board name").fill("Research")
    dialog.get_by_role("button", name="Create board").click()
    switcher = page.locator(".board-switch")
    expect(switcher).to_be_visible(timeout=T)
    expect(switcher).to_have_value("research")
    # with the switcher shown the single-board name is left out, without a stray "null" in its place
    expect(page.locator(".board-name")).to_have_count(0)
    assert "null" not in page.locator("#topbar").inner_text()
    expect(page.locator(".card")).to_have_count(0, timeout=T)
    assert "research" in [x["slug"] for x in kernel.boards()]

    title = uniq("Research task")
    kernel.board("research").create(title, assignee="coder")
    expect(card(page, title)).to_be_visible(timeout=T)  # the live stream follows the new board
    switcher.select_option("default")
    expect(card(page, title)).to_have_count(0, timeout=T)
    expect(page.locator(".card").first).to_be_visible(timeout=T)


def test_empty_goals_name_the_real_command_and_the_help_only_closes(page: Any, kernel: Any) -> None:
    # after the switcher test: a second board already exists, so the switcher is shown
    slug = "quiet-" + uuid.uuid4().hex[:6]
    kernel.create_board(slug)
    page.reload()
    page.locator(".board-switch").select_option(slug)
    # the switched board shown (its columns empty) before the view changes: a click during the
    # switch's render could be lost
    expect(page.locator("#total")).to_have_text("0 tasks", timeout=T)
    goals = page.get_by_role("button", name="Goals", exact=True)
    goals.click()
    expect(goals).to_have_attribute("aria-pressed", "true", timeout=T)
    empty = page.locator(".panel-empty")
    expect(empty).to_contain_text("No goals on this board yet", timeout=T)
    expect(empty.locator("code")).to_have_text("agentboard goals create")
    assert "`" not in empty.inner_text()

    page.get_by_role("button", name="Board", exact=True).click()
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Keyboard shortcuts", timeout=T)
    expect(dialog.get_by_role("button")).to_have_count(1)  # an information dialog: just Close
    keys = dialog.locator("kbd")
    for i in range(keys.count()):  # each key stays on one line
        box = keys.nth(i).bounding_box()
        assert box is not None and box["height"] < 24, keys.nth(i).inner_text()
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_have_count(0)
