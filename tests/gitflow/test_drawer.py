"""The dashboard drawer shows a worktree task's branch and its diff (Chromium, Playwright)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from testenv import copy_template

from .conftest import make_repo, sh, wait_for

T = 15000
EDIT = ("printf 'def add(a, b):\\n    return a + b\\n' > calc.py && echo 'notes' > NOTES.md && git add -A . && "
        "git commit -qm 'fix add, add notes' && agentboard complete --summary 'fixed add()'")


def test_the_drawer_shows_the_branch_and_the_diff(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  sqlite_template: Path) -> None:
    e2e = pytest.importorskip("e2e.conftest")
    if not Path(e2e.CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {e2e.CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    import agentboard
    from agentboard.api.serve import WorkerAPI, run_tokens
    from agentboard.dispatch.dispatcher import Dispatcher

    home = tmp_path / "home"
    monkeypatch.setenv("AGENTBOARD_HOME", str(home))
    repo = make_repo(tmp_path / "proj", {"calc.py": "def add(a, b):\n    return a - b\n"})
    copy_template(sqlite_template, home)
    ab = agentboard.connect(str(home))
    ab.settings.home = home
    ab.settings.spawn_grace = 0.5
    ab.create_board("proj", workdir=str(repo), settings={"integrate": "merge"})
    ab.add_profile("fixer", command=sh(EDIT))
    task = ab.board("proj").create("Fix add()", assignee="fixer", review=True)
    api = WorkerAPI(ab.settings, ab.db).start()
    d = Dispatcher(ab.db, ab.settings, api_url=api.url, token_factory=run_tokens(ab.db))
    d.start()
    try:
        wait_for(lambda: ab.board("proj").show(task["id"])["status"] == "review", what="the task in review")
    finally:
        d.stop()
        api.stop()
        ab.close()

    (home / "current_board").write_text("proj\n")  # what `agentboard boards switch proj` saves
    with e2e.serving(home) as srv, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=e2e.CHROMIUM, args=e2e.CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(srv.login_url)
            # the board switcher opens on the CLI's current board
            expect = sync_api.expect
            expect(page.locator("select.board-switch")).to_have_value("proj", timeout=T)
            page.locator(f".card[data-id='{task['id']}']").click()
            drawer = page.locator("#drawer")
            expect = sync_api.expect
            expect(drawer.locator(".git-branch")).to_have_text(f"ab/{task['id']}", timeout=T)
            expect(drawer.locator(".git-base")).to_have_text("main")
            expect(drawer.locator(".git-ahead")).to_have_text("1 ahead, 0 behind")
            expect(drawer.locator(".git-stat")).to_contain_text("2 files +2 −1")
            expect(drawer.locator(".diff-file")).to_have_count(2, timeout=T)
            calc = drawer.locator(".diff-file[data-path='calc.py']")
            expect(calc.locator(".diff-counts")).to_have_text("+1 −1")
            calc.locator(".diff-file-name").click()
            expect(calc.locator(".diff-line-add")).to_contain_text(["+    return a + b"], timeout=T)
            expect(calc.locator(".diff-line-del")).to_contain_text(["-    return a - b"])
            shot = tmp_path / "drawer-branch-and-diff.png"
            page.screenshot(path=str(shot), full_page=False)
            assert shot.stat().st_size > 0

            # the verify commands change from the drawer
            drawer.locator(".verify-edit").click()
            drawer.locator(".verify-input").fill("true\necho checked")
            drawer.locator(".verify-save").click()
            expect(drawer.locator(".verify-cmd")).to_have_text(["true", "echo checked"], timeout=T)

            # the approve confirmation describes an approval; approving merges the branch
            drawer.locator("button[data-action='done']").first.click()
            dialog = page.locator(".modal")
            expect(dialog).to_contain_text("Approve", timeout=T)
            expect(dialog).to_contain_text("Approval accepts the reviewed work")
            dialog.locator("button", has_text=re.compile("^Approve$")).click()
            expect(drawer.locator(".git-integration")).to_have_text("merged into the base branch", timeout=T)
            expect(page.locator(f".card[data-id='{task['id']}'] .pill-git")).to_have_text("⎇ merged", timeout=T)
            page.screenshot(path=str(tmp_path / "drawer-after-approval.png"))
            e2e.SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # kept after pytest prunes its tmp dirs
            for png in tmp_path.glob("drawer-*.png"):
                shutil.copy(png, e2e.SCREENSHOTS / png.name)
            assert not errors, errors
        finally:
            browser.close()
    assert "a + b" in (repo / "calc.py").read_text()
    check = agentboard.connect(str(home))
    try:
        assert check.board("proj").show(task["id"])["verify"] == ["true", "echo checked"]
    finally:
        check.close()


def test_the_create_form_closes_after_a_create_and_toasts_leave_the_drawer_alone(tmp_path: Path,
                                                                                sqlite_template: Path) -> None:
    e2e = pytest.importorskip("e2e.conftest")
    if not Path(e2e.CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {e2e.CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    expect = sync_api.expect
    with e2e.serving(tmp_path / "home", sqlite_template) as srv, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=e2e.CHROMIUM, args=e2e.CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 800}).new_page()
            page.goto(srv.login_url)
            col = page.locator(".column[data-status='todo']")
            expect(col).to_be_visible(timeout=T)
            for how in ("Escape", "Cancel"):
                col.locator(".column-add").click()
                form = page.locator(".create-form")
                expect(form).to_be_visible(timeout=T)
                form.locator("textarea").fill(f"made before {how}")
                form.locator("textarea").press("Enter")
                expect(page.locator(".card", has_text=f"made before {how}")).to_be_visible(timeout=T)
                if how == "Escape":
                    page.locator(".create-form textarea").press("Escape")
                else:
                    page.locator(".create-form button", has_text="Cancel").click()
                expect(page.locator(".create-form")).to_have_count(0, timeout=T)

            # an error toast while the drawer is open keeps clear of the drawer, then goes away
            page.locator(".card", has_text="made before Escape").click()
            drawer = page.locator("#drawer")
            expect(drawer.locator(".drawer-title")).to_be_visible(timeout=T)
            page.evaluate("import('/dom.js').then((m) => m.toast('something failed', 'error', 1000))")
            toast = page.locator(".toast-error")
            expect(toast).to_be_visible(timeout=T)
            tb, db = toast.bounding_box(), drawer.bounding_box()
            assert tb is not None and db is not None
            assert tb["x"] + tb["width"] <= db["x"], "the toast covers the drawer"
            expect(toast).to_have_count(0, timeout=T)
        finally:
            browser.close()
