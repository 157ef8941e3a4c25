"""A race in the dashboard: one card with its attempts and a badge, the drawer comparing them
side by side (outcome, verification, cost, each diff) with a Pick button only on the attempt
that may win, and the pick integrating its branch (Chromium on a real server, real git, script
agents run by a real dispatcher)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-race-dashboard")]

T = 10_000  # ms: the longest a user-visible change may take to appear
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the browser fixture skips first
    expect = None

GOOD = ("printf 'good\\n' > notes.txt && git commit -qam 'good change' && "
        "agentboard complete --summary 'wrote the good line'")
BAD = ("printf 'bad\\n' > notes.txt && git commit -qam 'bad change' && "
       "agentboard complete --summary 'wrote the bad line'")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout


def _shot(name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / name


def test_a_race_is_one_card_whose_drawer_compares_the_attempts_and_picks_the_winner(
        page: Any, kernel: Any, server: Any, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "dev")
    (repo / "notes.txt").write_text("start\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    kernel.create_board("race", workdir=str(repo), settings={"integrate": "merge"})
    kernel.add_profile("good", command="sh -c " + shlex.quote(GOOD))
    kernel.add_profile("bad", command="sh -c " + shlex.quote(BAD))
    race = kernel.board("race").create("Fix the notes", race=["bad,good"], verify=["grep -q good notes.txt"],
                                       max_retries=1)
    for _ in range(4):  # start the attempts, run them, verify them, settle the race
        server.cli("dispatch", "--wait", "--all-boards")
        if kernel.board("race").show(race["id"])["status"] == "review":
            break
    assert kernel.board("race").show(race["id"])["status"] == "review"

    page.goto(f"{server.url}/?board=race")
    cards = page.locator(".card")
    expect(cards).to_have_count(1, timeout=T)  # the attempts are not cards of their own
    card = cards.first
    expect(card.locator(".pill-race")).to_contain_text("race 1/2 passed", timeout=T)
    expect(card.locator(".race-chip")).to_have_count(2)
    page.screenshot(path=str(_shot("race_card.png")))

    card.click()
    drawer = page.locator("#drawer")
    grid = drawer.locator(".race-grid")
    expect(grid).to_be_visible(timeout=T)
    expect(grid.locator(".race-cell[data-n='1'] .race-outcome")).to_have_text("failed")
    expect(grid.locator(".race-cell[data-n='2'] .race-outcome")).to_have_text("done")
    expect(grid.locator(".race-cell[data-n='1'] .race-verify")).to_have_text("failed")
    expect(grid.locator(".race-cell[data-n='2'] .race-verify")).to_have_text("passed")
    expect(grid.locator("button.race-pick")).to_have_count(1)  # only the attempt that passed may be picked
    expect(grid.locator("button.race-pick")).to_have_text("Pick #2")
    diff = drawer.locator("details.race-diff[data-n='2']")
    diff.locator("summary").click()
    diff.locator("button.diff-file-name", has_text="notes.txt").click()
    expect(diff.locator(".diff-line-add")).to_contain_text("+good", timeout=T)
    drawer.locator(".race-grid").scroll_into_view_if_needed()
    page.screenshot(path=str(_shot("race_drawer.png")))

    grid.locator("button.race-pick").click()
    expect(page.locator(".card .pill-git")).to_contain_text("merged", timeout=T)
    assert (repo / "notes.txt").read_text() == "good\n"
    t = kernel.board("race").show(race["id"])
    assert (t["status"], t["branch_name"]) == ("done", f"ab/{race['id']}-a2")
    page.screenshot(path=str(_shot("race_picked.png")))


def test_the_create_form_makes_a_race_of_the_profiles_it_names(page: Any, kernel: Any, server: Any) -> None:
    for name in ("alpha", "beta"):
        if not any(p["name"] == name for p in kernel.profiles()):
            kernel.add_profile(name, command="true")
    page.goto(f"{server.url}/?board=default")
    col = page.locator(".column[data-status='todo']")
    col.get_by_role("button", name="New task in Todo").click()
    form = col.locator(".create-form")
    form.locator(".create-race").fill("alpha,beta:model-b")
    form.locator(".create-race-until").select_option("first-pass")
    form.locator(".create-title").fill("Raced from the form")
    page.screenshot(path=str(_shot("race_create_form.png")))
    form.locator(".create-title").press("Enter")
    made = page.locator(".card", has=page.locator(".card-title", has_text="Raced from the form"))
    expect(made.locator(".pill-race")).to_contain_text("race 0/2 passed", timeout=T)
    task = next(t for t in kernel.board().list() if t["title"] == "Raced from the form")
    detail = kernel.board().show(task["id"])
    assert detail["race_until"] == "first-pass"
    assert [(a["profile"], a["model"]) for a in detail["race"]["attempts"]] == [("alpha", None), ("beta", "model-b")]
