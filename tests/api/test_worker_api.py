"""The API a standalone dispatcher serves its workers: its port is bound before the first worker
starts, and the app behind it is built only when a worker needs it."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx

from agentboard.api.serve import API_FILE, WorkerAPI


def test_a_call_made_before_the_app_is_built_waits_and_is_answered(ab: Any) -> None:
    api = WorkerAPI(ab.settings, ab.db).start(lazy=True)
    try:
        assert api.own and api.url.startswith("http://127.0.0.1:")
        assert not (ab.home / API_FILE).exists()  # nothing answers there yet: not recorded
        answers: list[httpx.Response] = []
        caller = threading.Thread(target=lambda: answers.append(httpx.get(f"{api.url}/api/me", timeout=60)))
        caller.start()
        caller.join(0.3)
        assert caller.is_alive() and not answers  # waiting in the port's backlog, not refused
        api.serve()
        caller.join(60)
        assert answers[0].status_code == 401
        assert answers[0].json()["error"]["code"] == "unauthorized"
        assert json.loads((ab.home / API_FILE).read_text())["url"] == api.url
    finally:
        api.stop()
    assert not (ab.home / API_FILE).exists()


def test_a_worker_api_never_served_frees_its_port_and_records_nothing(ab: Any) -> None:
    api = WorkerAPI(ab.settings, ab.db).start(lazy=True)
    url = api.url
    api.stop()
    assert not api.own and not (ab.home / API_FILE).exists()
    try:
        httpx.get(f"{url}/api/me", timeout=5)
        raise AssertionError("the port still answers")
    except httpx.ConnectError:
        pass


def test_a_one_shot_pass_on_the_home_uses_the_api_a_live_process_serves(ab: Any) -> None:
    first = WorkerAPI(ab.settings, ab.db).start(lazy=True)
    first.serve_in_background()
    try:
        first.serve()  # waits for the build the background thread started, builds nothing more
        second = WorkerAPI(ab.settings, ab.db).start(lazy=True)
        assert not second.own and second.url == first.url
        second.stop()
    finally:
        first.stop()
