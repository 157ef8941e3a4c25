"""The dashboard's LLM controls against a real `agentboard serve` whose LLM is the loopback
OpenAI-compatible test server: the drawer's Specify and Decompose, the bulk action and the
Orchestration Auto/Manual switch."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Server, serving
from fakes.fake_openai import FakeOpenAI

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails under CI) with the reason
    expect = None  # type: ignore[assignment]

T = 10_000  # ms


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, llm: FakeOpenAI, sqlite_template: Path) -> Iterator[Server]:
    """`agentboard serve --no-dispatch` with its LLM pointed at the loopback server."""
    with serving(tmp_path_factory.mktemp("e2e-llm") / "home", sqlite_template, AGENTBOARD_LLM_BASE_URL=llm.url,
                 AGENTBOARD_LLM_MODEL="fake-model", AGENTBOARD_LLM_API_KEY="sk-test") as srv:
        yield srv


def card(page: Any, title: str) -> Any:
    return page.locator(".card", has=page.locator(".card-title", has_text=title))


def column(page: Any, status: str) -> Any:
    return page.locator(f".column[data-status='{status}']")


def uniq(label: str) -> str:
    return f"{label} {uuid.uuid4().hex[:6]}"


def test_decompose_in_the_drawer_shows_the_new_cards(page: Any, server: Server, llm: FakeOpenAI) -> None:
    idea = server.api("POST", "/api/tasks", json={"title": uniq("launch the site"), "triage": True})
    parts = [uniq("write the landing copy"), uniq("deploy the site")]
    llm.script("Plan:\n```json\n" + json.dumps({"fanout": True, "tasks": [
        {"title": parts[0]}, {"title": parts[1], "parents": [0]}]}) + "\n```")
    card(page, idea["title"]).click()
    button = page.locator("#drawer button[data-llm='decompose']")
    expect(button).to_be_enabled(timeout=T)
    button.click()
    expect(card(page, parts[0])).to_be_visible(timeout=T)
    expect(column(page, "todo").locator(".card-title", has_text=parts[1])).to_be_visible(timeout=T)
    expect(column(page, "todo").locator(".card-title", has_text=idea["title"])).to_be_visible(timeout=T)


def test_specify_in_the_drawer_rewrites_the_card(page: Any, server: Server, llm: FakeOpenAI) -> None:
    idea = server.api("POST", "/api/tasks", json={"title": uniq("dark mode pls"), "triage": True})
    title = uniq("Add a dark mode")
    llm.script(json.dumps({"title": title, "goal": "dark colours", "acceptance_criteria": ["it toggles"]}))
    card(page, idea["title"]).click()
    page.locator("#drawer button[data-llm='specify']").click()
    expect(column(page, "todo").locator(".card-title", has_text=title)).to_be_visible(timeout=T)
    expect(page.locator("#drawer .task-body")).to_contain_text("Acceptance criteria", timeout=T)


def test_bulk_decompose_and_a_failure_shows_on_the_card(page: Any, server: Server, llm: FakeOpenAI) -> None:
    idea = server.api("POST", "/api/tasks", json={"title": uniq("fuzzy idea"), "triage": True})
    llm.script("I cannot answer in JSON, sorry.")
    page.reload()
    card(page, idea["title"]).locator(".card-check").check()
    page.locator("#bulkbar .bulk-decompose").click()
    expect(page.locator(".toast-error")).to_contain_text("no JSON", timeout=T)
    expect(card(page, idea["title"]).locator(".pill-backoff")).to_be_visible(timeout=T)


def test_the_orchestration_switch_turns_auto_mode_on_for_the_board(page: Any, server: Server) -> None:
    auto = page.locator(".orchestration button[data-mode='auto']")
    expect(auto).to_be_enabled(timeout=T)
    auto.click()
    expect(page.locator(".orchestration button[data-mode='auto']")).to_have_class("seg-btn active", timeout=T)
    board = server.api("GET", "/api/boards/default")
    assert (board.get("settings") or {}).get("auto_decompose") is True
    page.locator(".orchestration button[data-mode='manual']").click()
    expect(page.locator(".orchestration button[data-mode='manual']")).to_have_class("seg-btn active", timeout=T)
