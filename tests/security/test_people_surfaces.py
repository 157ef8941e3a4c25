"""The surfaces people use: guessing tokens at /login, a cross-site request that would start a
program on the host, a worker reading other agents' command lines, and titles that display as
another text."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from api.conftest import Api, start_api

import agentboard
from agentboard.domain.errors import InvalidInput
from agentboard.kernel import profiles, runs, tokens


@pytest.fixture
def api(home: Path) -> Iterator[Api]:
    with agentboard.connect(str(home)) as client, start_api(client) as a:
        yield a


@pytest.fixture
def api_any(ab: Any) -> Iterator[Api]:
    with start_api(ab) as a:
        yield a


def _from(api: Api, address: str) -> httpx.Client:
    """A client whose requests come from ``address`` (another loopback address: another client)."""
    c = httpx.Client(base_url=api.url, timeout=30, follow_redirects=False,
                     transport=httpx.HTTPTransport(local_address=address))
    api._clients.append(c)
    return c


def test_guessing_tokens_at_login_is_slowed_down_per_client(api: Api) -> None:
    guesser = _from(api, "127.0.0.1")
    for n in range(5):
        r = guesser.get("/login", params={"token": f"abt_guess{n}"})
        assert r.status_code == 401, (n, r.status_code)
    # the sixth try waits, even with the right token: the guesser learns nothing
    r = guesser.get("/login", params={"token": api.admin})
    assert r.status_code == 429
    assert int(r.headers["retry-after"]) > 0
    assert "set-cookie" not in r.headers
    # another client is not held back by this one's failures
    other = _from(api, "127.0.0.2")
    r = other.get("/login", params={"token": api.admin})
    assert r.status_code == 303 and "agentboard_token=" in r.headers["set-cookie"]


def test_a_successful_login_forgets_the_clients_earlier_failures(api: Api) -> None:
    c = _from(api, "127.0.0.1")
    for n in range(4):
        assert c.get("/login", params={"token": f"abt_typo{n}"}).status_code == 401
    assert c.get("/login", params={"token": api.admin}).status_code == 303
    for n in range(4):
        assert c.get("/login", params={"token": f"abt_again{n}"}).status_code == 401
    assert c.get("/login", params={"token": api.admin}).status_code == 303


def _marking_cli(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in for an agent CLI that leaves a marker each time it is started."""
    marker = tmp_path / "started.txt"
    script = tmp_path / "claude"
    script.write_text(f"#!/bin/sh\necho started >> {marker}\necho '2.0.0 (Claude Code)'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, marker


def test_a_cross_site_request_cannot_make_a_profile_check_start_the_agent_program(
        api: Api, tmp_path: Path) -> None:
    script, marker = _marking_cli(tmp_path)
    profiles.add(api.db, "coder", adapter="claude", command=str(script))
    browser = httpx.Client(base_url=api.url, timeout=60, follow_redirects=False)
    api._clients.append(browser)
    assert browser.get("/login", params={"token": api.admin}).status_code == 303
    # what an <img src> or a link on another site would send: a GET with the cookie
    assert browser.get("/api/profiles/coder/check").status_code in (404, 405)
    assert not marker.exists()
    # a cross-site form POST: the cookie, no CSRF header, a foreign Origin
    r = browser.post("/api/profiles/coder/check", headers={"Origin": "https://evil.example"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "csrf"
    assert not marker.exists()
    # the dashboard's own request carries the header
    r = browser.post("/api/profiles/coder/check", headers={"X-Agentboard": "1"})
    assert r.status_code == 200, r.text
    assert marker.exists()


def test_a_run_token_cannot_read_the_profiles_command_lines(api_any: Api) -> None:
    profiles.add(api_any.db, "deployer", command="deploy --key /srv/keys/prod.pem", env={"API_KEY": "s3cret"})
    profiles.add(api_any.db, "worker", command="true")
    task = api_any.ab.board().create("work", assignee="worker")
    claimed = runs.claim(api_any.db, "default", task["id"])
    run_token = tokens.create_run_token(api_any.db, "default", task["id"], claimed["run_id"])
    worker = api_any.client(run_token)
    shown = {p["name"]: p for p in worker.get("/api/profiles").json()}
    assert shown["deployer"]["command"] is None and shown["deployer"]["env"] == {}
    assert "prod.pem" not in worker.get("/api/profiles").text
    member = api_any.client(api_any.token("alice"))
    seen = {p["name"]: p for p in member.get("/api/profiles").json()}
    assert "prod.pem" in str(seen["deployer"]["command"]) and seen["deployer"]["env"] == {"API_KEY": "***"}
    viewer = api_any.client(api_any.token("carol", role="viewer"))
    assert "prod.pem" not in viewer.get("/api/profiles").text


@pytest.mark.parametrize("title", [
    "Fix login \u202egnp.exe",          # right-to-left override
    "Ship \u2066it\u2069 now",          # isolates
    "approve\u200b me",                 # zero-width space
    "mark\u200e left",                  # left-to-right mark
    "two\nlines",                       # a line break in a one-line title
    "bell\x07",
])
def test_titles_with_bidi_zero_width_or_control_characters_are_refused(api_any: Api, title: str) -> None:
    r = api_any.as_admin.post("/api/tasks", json={"title": title})
    assert r.status_code == 400, r.text
    assert "U+" in r.json()["error"]["message"]
    assert api_any.ab.board().list() == []
    r = api_any.as_admin.post("/api/goals", json={"title": title})
    assert r.status_code == 400, r.text
    with pytest.raises(InvalidInput):
        api_any.ab.board().create(title)


def test_a_title_with_accents_and_emoji_is_still_a_title(api: Api) -> None:
    r = api.as_admin.post("/api/tasks", json={"title": "Café — déployer ✓ 🚀"})
    assert r.status_code == 201, r.text
