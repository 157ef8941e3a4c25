"""What a newcomer met in the dashboard (Chromium on a real server): the top bar at laptop, wide
and phone widths with a board budget set (one row on a laptop with the board switcher and a
two-limit budget), every view scrolling and no wider than a phone, the Notifications view with
many subscriptions, links to a board and to a task on another board, the page a browser without
a token gets, the worker log box, the drawer's moves (exactly those the server allows), drags and
bulk moves that leave out what the card's data says the server refuses, a running card's clock
(its current attempt) and the inline create form's race field."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentboard.kernel import budgets

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-dashboard-fit")]

T = 10_000  # ms: the longest a user-visible change may take to appear
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the browser fixture skips first
    expect = None


def uniq(label: str) -> str:
    return f"{label} {uuid.uuid4().hex[:6]}"


def shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name))


def coder(kernel: Any) -> None:
    if not any(p["name"] == "coder" for p in kernel.profiles()):
        kernel.add_profile("coder", command="true")


def open_page(browser: Any, server: Any, width: int, height: int = 900, path: str = "", login: bool = True) -> Any:
    """A new browser context at ``width`` (a phone's is touch-sized), logged in unless told not."""
    phone = width < 500
    context = browser.new_context(viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone,
                                  device_scale_factor=2 if phone else 1)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.page_errors = errors
    if login:
        page.goto(server.login_url)
        page.wait_for_selector(".column[data-status='todo']", timeout=15000)
    if path:
        page.goto(server.url + path)
    return page


def close(page: Any) -> None:
    errors = page.page_errors
    page.context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def inside(page: Any, locator: Any) -> bool:
    """Whether the element is shown whole inside the viewport (not cut off at the right)."""
    box = locator.bounding_box()
    width = page.evaluate("window.innerWidth")
    return bool(box) and box["width"] > 0 and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5


# ---- the top bar ---------------------------------------------------------------------------


@pytest.mark.parametrize("width", [1280, 1400, 1920, 390])
def test_the_top_bar_fits_the_window_with_a_board_budget_set(browser: Any, server: Any, kernel: Any,
                                                             width: int) -> None:
    budgets.set_budget(kernel.db, "board", "default", budgets.Limits.build(max_cost=10.0, max_runs=20, per="month"))
    try:
        page = open_page(browser, server, width)
        expect(page.locator("#topbar .budget-line").first).to_be_visible(timeout=T)
        shot(page, f"topbar_{width}.png")
        dispatch = page.locator("#topbar .dispatch-now")
        help_btn = page.locator("#topbar .help-btn")
        expect(dispatch).to_be_visible()
        expect(help_btn).to_be_visible()
        assert inside(page, dispatch), f"'Dispatch now' is cut off at {width} px"
        assert inside(page, help_btn), f"'?' is cut off at {width} px"
        cut = page.evaluate("""() => Array.from(document.querySelectorAll('#topbar *, #toolbar *'))
            .filter((el) => el.offsetParent !== null && !el.closest('#bulkbar'))
            .filter((el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.right > innerWidth + 0.5; })
            .filter((el) => !el.closest('.tabs') || el.classList.contains('tabs'))
            .map((el) => el.className || el.tagName)""")
        assert not cut, f"cut off at the right at {width} px: {cut}"
        sideways = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert sideways <= 0, f"the page scrolls {sideways} px sideways at {width} px"
        dispatch.click()
        expect(page.locator(".toast", has_text="Dispatch")).to_be_visible(timeout=T)
        close(page)
    finally:
        budgets.clear_budget(kernel.db, "board", "default")


@pytest.mark.parametrize("width", [1280, 1400, 1600])
def test_the_top_bar_stays_one_row_on_a_laptop_with_the_board_switcher_and_a_two_limit_budget(
        browser: Any, server: Any, kernel: Any, width: int) -> None:
    if not any(b["slug"] == "plain" for b in kernel.boards()):
        kernel.create_board("plain")  # a second board: the switcher shows
    budgets.set_budget(kernel.db, "board", "default", budgets.Limits.build(max_cost=1.5, max_runs=25))
    try:
        page = open_page(browser, server, width)
        expect(page.locator("#topbar .budget-line")).to_have_count(2, timeout=T)
        expect(page.locator("#topbar select.board-switch")).to_be_visible()
        shot(page, f"topbar_switcher_budget_{width}.png")
        spread = page.evaluate("""() => { const mids = Array.from(document.querySelectorAll('#topbar > *'))
            .filter((el) => el.offsetParent !== null && el.getBoundingClientRect().width > 0)
            .map((el) => { const r = el.getBoundingClientRect(); return r.top + r.height / 2; });
            return Math.max(...mids) - Math.min(...mids); }""")
        height = page.locator("#topbar").bounding_box()["height"]
        assert spread < 6 and height < 56, f"the top bar wraps onto a second row at {width} px ({height:.0f} px high)"
        for cls in ("dispatch-now", "help-btn", "new-board", "from-template"):
            assert inside(page, page.locator(f"#topbar .{cls}")), f".{cls} is cut off at {width} px"
        # a shortened label keeps its full name for assistive technology and its tooltip
        expect(page.get_by_role("button", name="+ New board")).to_be_visible()
        expect(page.get_by_role("button", name="+ From template")).to_be_visible()
        close(page)
    finally:
        budgets.clear_budget(kernel.db, "board", "default")


# ---- the other views -----------------------------------------------------------------------


VIEWS = ["goals", "profiles", "insights", "supervisor", "notifications"]


@pytest.mark.parametrize("width", [1400, 390])
def test_every_view_scrolls_down_and_is_no_wider_than_the_window(browser: Any, server: Any, kernel: Any,
                                                                 width: int) -> None:
    page = open_page(browser, server, width)
    for view in VIEWS:
        page.evaluate(f"document.querySelector(\".tab[data-view='{view}']\").click()")
        expect(page.locator(".main .panel-head h2")).to_be_visible(timeout=T)
        expect(page.locator(".main .panel-loading")).to_have_count(0, timeout=T)
        box = page.locator(".main").evaluate("""(el) => ({ overflow: getComputedStyle(el).overflowY,
            wide: el.scrollWidth - el.clientWidth, page: document.documentElement.scrollWidth - innerWidth })""")
        shot(page, f"view_{view}_{width}.png")
        assert box["overflow"] in ("auto", "scroll"), f"the {view} view cannot scroll down ({box})"
        assert box["wide"] <= 1 and box["page"] <= 0, f"the {view} view is wider than {width} px ({box})"
    close(page)


def _many_subscriptions(server: Any, kernel: Any, n: int) -> list[int]:
    """``n`` subscriptions on a board of their own (nothing happens there: nothing is sent)."""
    if not any(b["slug"] == "notes" for b in kernel.boards()):
        kernel.create_board("notes")
    have = server.api("GET", "/api/notify/subscriptions", params={"board": "notes"})
    for i in range(len(have), n):
        server.api("POST", "/api/notify/subscriptions", params={"board": "notes"},
                   json={"target": f"json://127.0.0.1:9/fit/hook-{i}"})
    return [s["id"] for s in server.api("GET", "/api/notify/subscriptions", params={"board": "notes"})]


def test_the_notifications_view_scrolls_to_its_last_subscription(browser: Any, server: Any, kernel: Any) -> None:
    subs = _many_subscriptions(server, kernel, 40)
    page = open_page(browser, server, 1400, path="/?board=notes")
    page.locator(".tab[data-view='notifications']").click()
    rows = page.locator("tr.notify-sub")
    expect(rows).to_have_count(len(subs), timeout=T)
    last = rows.last.locator(".notify-remove")
    assert last.bounding_box()["y"] > page.evaluate("innerHeight")  # below the fold at first
    page.mouse.move(700, 500)
    for _ in range(12):
        page.mouse.wheel(0, 600)
    page.wait_for_function("() => { const b = document.querySelectorAll('tr.notify-sub .notify-remove');"
                           " const r = b[b.length - 1].getBoundingClientRect(); return r.bottom <= innerHeight; }",
                           timeout=T)
    shot(page, "notifications_scrolled.png")
    last.click()  # reachable: the dialog asks first
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Remove this subscription?", timeout=T)
    dialog.get_by_role("button", name="Cancel").click()
    close(page)


def test_on_a_phone_the_notifications_header_and_every_rows_buttons_are_within_the_screen(
        browser: Any, server: Any, kernel: Any) -> None:
    subs = _many_subscriptions(server, kernel, 40)
    page = open_page(browser, server, 390, height=844, path="/?board=notes")
    page.locator(".tab[data-view='notifications']").click()
    rows = page.locator("tr.notify-sub")
    expect(rows).to_have_count(len(subs), timeout=T)
    shot(page, "notifications_phone.png")
    for sel in (".notify-new-url", ".notify-new-scope", ".notify-add-btn"):
        assert inside(page, page.locator(f".main .panel-head {sel}")), f"{sel} is off the screen"
    off = page.evaluate("""() => Array.from(document.querySelectorAll('tr.notify-sub button'))
        .filter((b) => { const r = b.getBoundingClientRect(); return r.width === 0 || r.left < 0 || r.right > innerWidth + 0.5; })
        .map((b) => b.textContent)""")
    assert not off, f"buttons off the screen: {off[:6]}"
    # the last row is reached by scrolling the view down, and its Remove answers
    main = page.locator(".main")
    main.evaluate("(el) => { el.scrollTop = el.scrollHeight; }")
    assert main.evaluate("(el) => el.scrollTop") > 0
    last = rows.last.locator(".notify-remove")
    box = last.bounding_box()
    assert box["y"] + box["height"] <= 844 and inside(page, last)
    shot(page, "notifications_phone_end.png")
    last.tap()
    expect(page.get_by_role("dialog")).to_contain_text("Remove this subscription?", timeout=T)
    close(page)


@pytest.mark.parametrize("width", [1280, 1400])
def test_a_board_whose_cards_are_all_done_shows_the_done_column_whole_on_a_laptop(
        browser: Any, server: Any, kernel: Any, width: int) -> None:
    # what the demo leaves: every card done, the six other columns empty
    if not any(b["slug"] == "finished" for b in kernel.boards()):
        kernel.create_board("finished")
        board = kernel.board("finished")
        coder(kernel)
        for title in ("Research the options", "Write the briefing"):
            t = board.create(title, assignee="coder")
            board.complete(t["id"], summary=f"{title}: done\nthe details", run_id=board.claim(t["id"])["run_id"])
    page = open_page(browser, server, width, path="/?board=finished")
    done = page.locator(".column[data-status='done']")
    expect(done.locator(".card")).to_have_count(2, timeout=T)
    # each card says what its worker reported (no one-line result was given: its summary's first line)
    expect(done.locator(".card-result")).to_have_text(["Research the options: done", "Write the briefing: done"])
    expect(page.locator(".column[data-status='todo']")).to_have_class(re.compile("column-is-empty"))
    shot(page, f"all_done_{width}.png")
    assert inside(page, done), f"the Done column is cut off at {width} px"
    assert inside(page, done.locator(".card").first), f"the done cards are cut off at {width} px"
    # a create form opened in an empty column takes a column's width again
    ready = page.locator(".column[data-status='ready']")
    narrow = ready.bounding_box()["width"]
    ready.locator(".column-add").click()
    expect(ready.locator(".column-create textarea, .column-create input").first).to_be_visible(timeout=T)
    assert ready.bounding_box()["width"] > narrow + 40
    close(page)


# ---- links ---------------------------------------------------------------------------------


def test_a_board_link_alone_shows_that_board_not_the_remembered_one(browser: Any, server: Any, kernel: Any) -> None:
    if not any(b["slug"] == "plain" for b in kernel.boards()):
        kernel.create_board("plain")
    here = kernel.board("plain").create(uniq("On the plain board"))
    page = open_page(browser, server, 1400)  # remembers the default board
    expect(page.locator("select.board-switch")).to_have_value("default", timeout=T)
    page.goto(f"{server.url}/?board=plain")
    expect(page.locator("select.board-switch")).to_have_value("plain", timeout=T)
    expect(page.locator(f".card[data-id='{here['id']}']")).to_be_visible(timeout=T)
    shot(page, "link_board_plain.png")
    # a link to a board that is not there says so and shows one that is
    page.goto(f"{server.url}/?board=nosuchboard")
    expect(page.locator(".toast-error")).to_contain_text("nosuchboard", timeout=T)
    expect(page.locator(".column[data-status='todo']")).to_be_visible()
    close(page)


def test_a_task_link_opens_the_task_on_its_own_board(browser: Any, server: Any, kernel: Any) -> None:
    if not any(b["slug"] == "plain" for b in kernel.boards()):
        kernel.create_board("plain")
    there = kernel.board("plain").create(uniq("Linked from a message"))
    page = open_page(browser, server, 1400)
    # the link names another board than the task's: the task wins
    page.goto(f"{server.url}/?board=default&task={there['id']}")
    drawer = page.locator("#drawer")
    expect(drawer.locator(".drawer-title")).to_have_text(there["title"], timeout=T)
    expect(drawer.locator(".drawer-error")).to_have_count(0)
    expect(page.locator("select.board-switch")).to_have_value("plain")
    expect(page.locator(f".card[data-id='{there['id']}']")).to_be_visible(timeout=T)
    shot(page, "link_task_other_board.png")
    # a link to no task says so and still shows a board
    page.goto(f"{server.url}/?task=t_00000000")
    expect(page.locator(".toast-error")).to_contain_text("t_00000000", timeout=T)
    expect(page.locator(".column[data-status='todo']")).to_be_visible()
    close(page)


# ---- the login page ------------------------------------------------------------------------


@pytest.mark.parametrize("width", [1280, 390])
def test_a_browser_without_a_token_gets_a_page_saying_how_to_get_in(browser: Any, server: Any, width: int) -> None:
    page = open_page(browser, server, width, login=False)
    resp = page.goto(server.url + "/")
    assert resp is not None and resp.status == 401
    card = page.locator(".login-card")
    expect(card).to_be_visible(timeout=T)
    expect(card.get_by_role("heading")).to_have_text(re.compile("Sign in"))
    expect(card).to_contain_text("agentboard serve")
    expect(card).to_contain_text("/login?token=")
    text = card.inner_text()
    assert not text.lstrip().startswith("no token"), text
    assert "Authorization: Bearer" not in text  # the API's wording is for programs, not for a person
    # styled: the dashboard's dark card, a sans-serif face, nothing wider than the window
    style = page.evaluate("""() => { const c = getComputedStyle(document.querySelector('.login-card'));
        const b = getComputedStyle(document.body);
        return { bg: b.backgroundColor, font: b.fontFamily, radius: c.borderTopLeftRadius }; }""")
    assert style["bg"] != "rgba(0, 0, 0, 0)" and "serif" not in style["font"].replace("sans-serif", "")
    assert style["radius"] != "0px"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shot(page, f"login_page_{width}.png")
    # a wrong token: the page says that token is not accepted, and how to get a good one
    page.goto(server.url + "/login?token=not-a-token")
    expect(page.locator(".login-card")).to_contain_text(re.compile("not accepted|not valid|invalid", re.I), timeout=T)
    expect(page.locator(".login-card")).to_contain_text("agentboard tokens create")
    shot(page, f"login_page_bad_token_{width}.png")
    # and the login URL the server printed lets the person in
    page.goto(server.login_url)
    expect(page.locator(".column[data-status='todo']")).to_be_visible(timeout=T)
    close(page)


# ---- the worker log ------------------------------------------------------------------------


def test_the_worker_log_box_shows_a_short_log_from_its_first_line(browser: Any, server: Any, kernel: Any) -> None:
    coder(kernel)
    b = kernel.board()
    t = b.create(uniq("Short log"), assignee="coder")
    run = b.claim(t["id"])
    log = server.home / f"short-{t['id']}.log"
    # a dozen lines a CLI prints (over 200 bytes: more than the box used to ask for)
    lines = [f"line {i}: {'first' if i == 1 else 'then'} step of the agent, reading and editing files"
             for i in range(1, 13)]
    log.write_text("\n".join(lines) + "\n")
    b.record_spawn(t["id"], run["run_id"], pid=4242, log_path=str(log))
    page = open_page(browser, server, 1400)
    page.locator(f".card[data-id='{t['id']}']").click()
    tail = page.locator("#drawer .log-tail")
    expect(tail).to_have_text("\n".join(lines) + "\n", timeout=T)
    tail.scroll_into_view_if_needed()
    shot(page, "worker_log_short.png")
    box = page.evaluate("""() => { const p = document.querySelector('#drawer .log-tail');
        const lh = parseFloat(getComputedStyle(p).lineHeight) || 16;
        return { top: p.scrollTop, fits: p.scrollHeight <= p.clientHeight + 1, lines: p.clientHeight / lh }; }""")
    assert box["top"] == 0 and box["fits"], f"the short log is scrolled or cut: {box}"
    first = page.evaluate("""() => { const p = document.querySelector('#drawer .log-tail');
        const r = document.createRange(); r.setStart(p.firstChild, 0); r.setEnd(p.firstChild, 6);
        const a = r.getBoundingClientRect(), b = p.getBoundingClientRect();
        return a.top >= b.top && a.bottom <= b.bottom; }""")
    assert first, "the first line of the log is not inside the box"

    # a long log gets a box a person can read: well over four lines, scrolled to its end
    log.write_text("".join(f"progress {i}: still working through the files\n" for i in range(1, 401)))
    b.heartbeat(t["id"], run_id=run["run_id"], note="more")
    expect(tail).to_contain_text("progress 400:", timeout=T)
    expect(tail).to_contain_text("progress 1: still")  # 17 KB: all of it
    long = page.evaluate("""() => { const p = document.querySelector('#drawer .log-tail');
        const lh = parseFloat(getComputedStyle(p).lineHeight) || 16;
        return { lines: p.clientHeight / lh, end: p.scrollHeight - p.scrollTop - p.clientHeight }; }""")
    assert long["lines"] >= 15, f"the log box shows only {long['lines']:.1f} lines"
    assert long["end"] < 20
    shot(page, "worker_log_long.png")
    # a log larger than what the box fetches starts at a whole line, under a note saying so
    log.write_text("".join(f"chunk {i}: {'x' * 90}\n" for i in range(1, 1201)))
    b.heartbeat(t["id"], run_id=run["run_id"], note="much more")
    expect(tail).to_contain_text("chunk 1200:", timeout=T)
    text = tail.inner_text()
    assert text.startswith("… earlier output left out") and str(log) in text.splitlines()[0]
    assert re.match(r"chunk \d+: x", text.splitlines()[1]), text.splitlines()[1]
    b.reclaim(t["id"])
    b.archive(t["id"])
    close(page)


# ---- the drawer's moves --------------------------------------------------------------------


def _task_in(kernel: Any, status: str) -> dict[str, Any]:
    coder(kernel)
    b = kernel.board()
    review = status == "review"
    t = b.create(uniq(f"A {status} task"), assignee=None if status == "todo" else "coder", review=review)
    if status in ("running", "review"):
        run = b.claim(t["id"])
        if review:
            b.complete(t["id"], summary="for review", run_id=run["run_id"])
    elif status == "blocked":
        b.block(t["id"], "waiting for the design")
    elif status == "done":
        b.complete(t["id"], summary="by hand")
    assert b.show(t["id"])["status"] == status
    return t


EXPECTED = {  # what a person should be offered (labels as the buttons read)
    "todo": ["Block", "Archive"],  # unassigned: it cannot be ready yet, and never "Complete"
    "ready": ["→ Todo", "Block", "Complete", "Archive"],
    "running": ["Reclaim → Todo", "Reclaim → Ready", "→ Review", "Block", "Complete", "Archive"],
    "review": ["Request changes → Todo", "Request changes → Ready", "Reject", "Approve", "Archive"],
    "blocked": ["Unblock → Todo", "Unblock → Ready", "Complete", "Archive"],
    "done": ["Reopen → Todo", "Reopen → Ready", "Archive"],
}


@pytest.mark.parametrize("status", list(EXPECTED))
def test_the_drawer_shows_exactly_the_moves_the_server_allows(browser: Any, server: Any, kernel: Any,
                                                              status: str) -> None:
    t = _task_in(kernel, status)
    allowed = server.api("GET", f"/api/tasks/{t['id']}")["moves"]
    page = open_page(browser, server, 1400)
    page.locator(f".card[data-id='{t['id']}']").click()
    drawer = page.locator("#drawer")
    buttons = drawer.locator(".action-row button[data-action]")
    expect(buttons).to_have_count(len(allowed), timeout=T)
    shown = [(b.get_attribute("data-action"), b.get_attribute("data-verb")) for b in buttons.all()]
    assert shown == [(m["status"], m["verb"]) for m in allowed]
    assert [b.inner_text() for b in buttons.all()] == EXPECTED[status]
    shot(page, f"drawer_moves_{status}.png")
    close(page)


def test_a_task_in_review_is_rejected_from_the_drawer_with_the_reason_the_person_gives(
        browser: Any, server: Any, kernel: Any) -> None:
    t = _task_in(kernel, "review")
    page = open_page(browser, server, 1400)
    page.locator(f".card[data-id='{t['id']}']").click()
    drawer = page.locator("#drawer")
    drawer.get_by_role("button", name="Reject").click()
    dialog = page.get_by_role("dialog")
    dialog.locator("input, textarea").first.fill("the migration drops a column still read")
    shot(page, "drawer_reject_dialog.png")
    dialog.get_by_role("button", name="Reject").click()
    expect(drawer.locator(".status-label")).to_have_text("Blocked", timeout=T)
    shown = kernel.board().show(t["id"])
    assert (shown["status"], shown["block_kind"]) == ("blocked", "rejected")
    assert shown["reviews"][-1]["verdict"] == "rejected"
    assert "drops a column" in (shown["reviews"][-1]["summary"] or "")
    expect(drawer.locator(".notice-blocked")).to_contain_text("drops a column", timeout=T)
    close(page)


def test_a_move_from_the_drawer_succeeds_and_the_offer_follows_the_task(browser: Any, server: Any,
                                                                       kernel: Any) -> None:
    t = _task_in(kernel, "blocked")
    page = open_page(browser, server, 1400)
    page.locator(f".card[data-id='{t['id']}']").click()
    drawer = page.locator("#drawer")
    drawer.get_by_role("button", name="Unblock → Todo").click()
    expect(drawer.locator(".status-label")).to_have_text("Todo", timeout=T)
    assert kernel.board().show(t["id"])["status"] == "todo"
    expect(drawer.get_by_role("button", name="→ Ready")).to_be_visible(timeout=T)
    expect(drawer.get_by_role("button", name="Complete")).to_have_count(0)  # a todo task cannot be completed
    drawer.get_by_role("button", name="→ Ready").click()
    expect(drawer.locator(".status-label")).to_have_text("Ready", timeout=T)
    assert kernel.board().show(t["id"])["status"] == "ready"
    drawer.get_by_role("button", name="Complete").click()
    page.get_by_role("dialog").get_by_role("button", name="Mark as done").click()
    expect(drawer.locator(".status-label")).to_have_text("Done", timeout=T)
    assert kernel.board().show(t["id"])["status"] == "done"
    expect(drawer.get_by_role("button", name="Reopen → Ready")).to_be_visible()
    shot(page, "drawer_move_done.png")
    close(page)


def test_the_bulk_bar_offers_the_moves_of_the_selected_tasks(browser: Any, server: Any, kernel: Any) -> None:
    coder(kernel)
    b = kernel.board()
    todo = b.create(uniq("Bulk todo"))
    ready = b.create(uniq("Bulk ready"), assignee="coder")
    page = open_page(browser, server, 1400)
    page.locator(f".card[data-id='{todo['id']}'] .card-check").check()
    options = page.locator("#bulkbar .bulk-status option")
    expect(options).to_have_text(["Move to…", "Blocked"], timeout=T)  # unassigned: it cannot be ready
    page.locator(f".card[data-id='{ready['id']}'] .card-check").check()
    expect(options).to_have_text(["Move to…", "Todo (1 of 2)", "Blocked", "Done (1 of 2)"], timeout=T)
    shot(page, "bulk_moves.png")
    page.locator("#bulkbar .bulk-status").select_option("blocked")
    dialog = page.get_by_role("dialog")
    dialog.locator("input").fill("both wait for the release")
    dialog.get_by_role("button", name="Block").click()
    expect(page.locator(".toast", has_text="2 tasks updated")).to_be_visible(timeout=T)
    assert b.show(todo["id"])["status"] == b.show(ready["id"])["status"] == "blocked"
    close(page)


# ---- supervision tasks ---------------------------------------------------------------------


def test_supervision_tasks_stay_out_of_the_columns_until_the_filter_shows_them(browser: Any, server: Any,
                                                                                kernel: Any) -> None:
    from agentboard.kernel import supervision

    if not any(b["slug"] == "watched" for b in kernel.boards()):
        kernel.create_board("watched")
    if not any(p["name"] == "overseer" for p in kernel.profiles()):
        kernel.add_profile("overseer", command="true")
    supervision.set_supervisor(kernel.db, "watched", "overseer", actor="alice")
    b = kernel.board("watched")
    stuck = b.create(uniq("Stuck on a question"), assignee="overseer")
    b.block(stuck["id"], "which region should we deploy to?", actor="alice")
    made = supervision.take_due(kernel.db, "watched")["tasks"]  # what the dispatcher's pass does
    assert len(made) == 1
    sup_id = made[0]["id"]
    page = open_page(browser, server, 1400, path="/?board=watched")
    expect(page.locator(f".card[data-id='{stuck['id']}']")).to_be_visible(timeout=T)
    expect(page.locator(f".card[data-id='{sup_id}']")).to_have_count(0)
    toggle = page.locator("#toolbar .toggle-supervision")
    expect(toggle).to_be_visible()
    expect(toggle).to_have_text(re.compile(r"Supervision\s*\(1\)"))
    shot(page, "supervision_hidden.png")
    toggle.locator("input").check()
    expect(page.locator(f".card[data-id='{sup_id}']")).to_be_visible(timeout=T)
    shot(page, "supervision_shown.png")
    toggle.locator("input").uncheck()
    expect(page.locator(f".card[data-id='{sup_id}']")).to_have_count(0, timeout=T)
    # a board without supervision tasks does not show the box at all
    page.locator("select.board-switch").select_option("default")
    expect(page.locator(".column[data-status='todo']")).to_be_visible(timeout=T)
    expect(page.locator("#toolbar .toggle-supervision")).to_be_hidden(timeout=T)
    supervision.set_supervisor(kernel.db, "watched", None, actor="alice")
    close(page)


def test_a_card_dragged_onto_a_column_it_cannot_move_to_stays_and_says_where_it_can_go(
        browser: Any, server: Any, kernel: Any) -> None:
    t = kernel.board().create(uniq("Not done yet"))  # todo, unassigned
    page = open_page(browser, server, 1920)
    source = page.locator(f".card[data-id='{t['id']}']")
    expect(source).to_be_visible(timeout=T)
    box = source.bounding_box()
    target = page.locator(".column[data-status='done'] .column-body").bounding_box()
    assert box and target
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 30)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 + 20, box["y"] + 40, steps=4)
    page.mouse.move(target["x"] + target["width"] / 2, target["y"] + 60, steps=12)
    expect(page.locator(".column[data-status='done']")).to_have_class(re.compile("drop-refused"))
    shot(page, "drag_refused.png")
    page.mouse.up()
    expect(page.locator(".toast-error")).to_contain_text("cannot move to Done", timeout=T)
    expect(page.locator(".toast-error")).to_contain_text("(it can move to Blocked)")  # unassigned: not Ready
    expect(page.get_by_role("dialog")).to_have_count(0)  # nothing to confirm: nothing was asked of the server
    assert kernel.board().show(t["id"])["status"] == "todo"
    close(page)


# ---- moves the card's data says the server refuses -------------------------------------------


def _drag_over(page: Any, card: Any, status: str) -> None:
    """Press on ``card`` and move the pointer over column ``status`` (the button stays down)."""
    box = card.bounding_box()
    target = page.locator(f".column[data-status='{status}'] .column-body").bounding_box()
    assert box and target
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 20)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 + 20, box["y"] + 30, steps=4)
    page.mouse.move(target["x"] + target["width"] / 2, target["y"] + 60, steps=12)


def test_a_card_that_requires_review_is_never_offered_done_nor_an_unassigned_one_ready(
        browser: Any, server: Any, kernel: Any) -> None:
    coder(kernel)
    b = kernel.board()
    reviewed = b.create(uniq("Needs a review"), assignee="coder", review=True)  # ready
    loose = b.create(uniq("Nobody on it"))  # todo, unassigned
    assert b.show(reviewed["id"])["status"] == "ready"
    page = open_page(browser, server, 1920)
    card = page.locator(f".card[data-id='{reviewed['id']}']")
    expect(card).to_be_visible(timeout=T)
    # dragging: Done does not light up (Todo, which it may move to, does)
    _drag_over(page, card, "todo")
    expect(page.locator(".column[data-status='todo']")).to_have_class(re.compile("drop-target"))
    # before the pointer gets there, the columns it may not move to are dimmed and those it may
    # move to lit: Done (review required) and Running (only the dispatcher) dim, Blocked lights
    for status in ("done", "running"):
        expect(page.locator(f".column[data-status='{status}']")).to_have_class(re.compile("drop-dim"))
    expect(page.locator(".column[data-status='blocked']")).to_have_class(re.compile("drop-allowed"))
    expect(page.locator(".column[data-status='ready']")).not_to_have_class(re.compile("drop-"))  # its own
    target = page.locator(".column[data-status='done'] .column-body").bounding_box()
    page.mouse.move(target["x"] + target["width"] / 2, target["y"] + 80, steps=8)
    done = page.locator(".column[data-status='done']")
    expect(done).to_have_class(re.compile("drop-refused"))
    expect(done).not_to_have_class(re.compile("drop-target"))
    shot(page, "drag_review_over_done.png")
    page.mouse.up()
    expect(page.locator(".toast-error")).to_contain_text("requires review", timeout=T)
    expect(page.locator(".column.drop-dim, .column.drop-allowed")).to_have_count(0)  # the drag is over
    expect(page.get_by_role("dialog")).to_have_count(0)  # nothing asked: the move was never offered
    assert b.show(reviewed["id"])["status"] == "ready"
    page.locator(".toast-x").first.click()
    _drag_over(page, page.locator(f".card[data-id='{loose['id']}']"), "ready")
    expect(page.locator(".column[data-status='ready']")).to_have_class(re.compile("drop-refused"))
    page.mouse.up()
    expect(page.locator(".toast-error", has_text="no assignee")).to_be_visible(timeout=T)
    assert b.show(loose["id"])["status"] == "todo"
    # the bulk bar's Move to… leaves them out as well
    page.locator(f".card[data-id='{reviewed['id']}'] .card-check").check()
    page.locator(f".card[data-id='{loose['id']}'] .card-check").check()
    options = page.locator("#bulkbar .bulk-status option")
    expect(options).to_have_text(["Move to…", "Todo (1 of 2)", "Blocked"], timeout=T)
    shot(page, "bulk_moves_refused_left_out.png")
    # what the drawer offers (the server's own answer) agrees
    moves = {m["status"] for m in server.api("GET", f"/api/tasks/{reviewed['id']}")["moves"]}
    assert "done" not in moves
    moves = {m["status"] for m in server.api("GET", f"/api/tasks/{loose['id']}")["moves"]}
    assert "ready" not in moves
    for t in (reviewed, loose):
        b.archive(t["id"])
    close(page)


# ---- a running card's clock ------------------------------------------------------------------


def test_a_running_cards_clock_counts_its_current_attempt_not_its_first(browser: Any, server: Any,
                                                                         kernel: Any) -> None:
    coder(kernel)
    b = kernel.board()
    t = b.create(uniq("Sent back for changes"), assignee="coder", review=True)
    first = b.claim(t["id"])["run_id"]
    b.complete(t["id"], summary="for review", run_id=first)
    b.request_changes(t["id"], "handle the empty input too")
    # its first attempt began two hours ago (tasks.started_at is set on the first claim only)
    kernel.db.write(lambda tx: tx.execute("UPDATE tasks SET started_at = started_at - 7200 WHERE id = :i",
                                          {"i": t["id"]}))
    if b.show(t["id"])["status"] != "ready":
        b.promote(t["id"])
    b.claim(t["id"])  # the second attempt starts now
    page = open_page(browser, server, 1920)
    clock = page.locator(f".card[data-id='{t['id']}'] .meta-time")
    expect(clock).to_have_text(re.compile(r"^\s*\d+s$"), timeout=T)  # seconds, not "2h 0m"
    assert "attempt" in (clock.get_attribute("title") or "")
    shot(page, "running_clock_current_attempt.png")
    # with no event about the task, the clock still counts on
    first = int(clock.inner_text().strip().rstrip("s"))
    page.wait_for_timeout(3200)
    assert int(clock.inner_text().strip().rstrip("s")) >= first + 2
    # and so does the open run in its drawer
    clock.click()
    run = page.locator("#drawer li.run-running .run-dur")
    expect(run).to_have_text(re.compile(r"^\d+s$"), timeout=T)
    shown = int(run.inner_text().rstrip("s"))
    page.wait_for_timeout(2200)
    assert int(run.inner_text().rstrip("s")) >= shown + 1
    b.reclaim(t["id"])
    b.archive(t["id"])
    close(page)


# ---- the inline create form ------------------------------------------------------------------


@pytest.mark.parametrize("width", [1280, 1400])
def test_the_inline_create_forms_race_field_shows_its_placeholder_whole(browser: Any, server: Any,
                                                                       kernel: Any, width: int) -> None:
    coder(kernel)
    b = kernel.board()
    for status in ("todo", "ready", "blocked", "done"):  # columns with cards: each at its narrowest
        if not b.list(status=status):
            t = b.create(uniq(f"A {status} card"), assignee=None if status == "todo" else "coder")
            if status == "blocked":
                b.block(t["id"], "waiting")
            elif status == "done":
                b.complete(t["id"], summary="by hand")
    page = open_page(browser, server, width)
    col = page.locator(".column[data-status='ready']")
    col.locator(".column-add").click()
    race = col.locator(".create-race")
    expect(race).to_be_visible(timeout=T)
    fit = race.evaluate("""(el) => { const s = getComputedStyle(el); const c = document.createElement('canvas').getContext('2d');
        c.font = `${s.fontSize} ${s.fontFamily}`;
        return { text: c.measureText(el.placeholder).width,
                 room: el.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight) }; }""")
    shot(page, f"create_form_race_{width}.png")
    assert fit["room"] >= fit["text"], f"the race field's placeholder is cut: {fit}"
    until = col.locator(".create-race-until")
    assert inside(page, until) and until.bounding_box()["width"] > 80
    page.keyboard.press("Escape")
    close(page)
