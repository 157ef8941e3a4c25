"""The event WebSocket: pushes, cursor resume, board scope, 4401 and 4403 closes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

import agentboard

from .conftest import Api


def ws_url(api: Api, **params: Any) -> str:
    from urllib.parse import urlencode

    return api.url.replace("http://", "ws://") + "/api/events?" + urlencode(params)


def recv(ws: ClientConnection, timeout: float = 10.0) -> dict[str, Any]:
    return json.loads(ws.recv(timeout=timeout))


def recv_until(ws: ClientConnection, pred: Any, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Events until one matches ``pred`` (generous timeout: this is not a speed test)."""
    seen: list[dict[str, Any]] = []
    while True:
        msg = recv(ws, timeout)
        seen.extend(msg["events"])
        if any(pred(e) for e in msg["events"]):
            return seen


def close_code(ws: ClientConnection) -> tuple[int, str]:
    with pytest.raises(ConnectionClosed) as info:
        ws.recv(timeout=10)
    rcvd = info.value.rcvd
    assert rcvd is not None
    return rcvd.code, rcvd.reason


def test_a_change_made_through_the_api_is_pushed(api_any: Api) -> None:
    with connect(ws_url(api_any, token=api_any.admin, board="default")) as ws:
        hello = recv(ws)
        assert hello["events"] == [] and hello["cursor"] == api_any.last_event()
        t = api_any.as_admin.post("/api/tasks", json={"title": "live", "assignee": "x"}).json()
        events = recv_until(ws, lambda e: e["task_id"] == t["id"] and e["kind"] == "created")
    created = next(e for e in events if e["kind"] == "created")
    assert set(created) >= {"id", "task_id", "run_id", "kind", "payload", "created_at"}
    assert created["payload"]["assignee"] == "x"


def test_a_change_made_by_another_connection_to_the_database_is_pushed(api_any: Api) -> None:
    """A writer that shares nothing with the server but the database (as the CLI or a worker)."""
    other = agentboard.connect(api_any.db.url if api_any.db.dialect == "postgresql" else str(api_any.ab.home))
    try:
        with connect(ws_url(api_any, token=api_any.admin)) as ws:
            recv(ws)
            t = other.board().create("from elsewhere")
            events = recv_until(ws, lambda e: e["task_id"] == t["id"])
        assert events[-1]["kind"] == "created"
    finally:
        other.close()


def test_cursor_resume_replays_what_was_missed_in_order(api: Api) -> None:
    b = api.ab.board()
    first = b.create("one")
    cursor = api.last_event()
    ids = [b.create(f"task {i}")["id"] for i in range(3)]
    with connect(ws_url(api, token=api.admin, since=cursor)) as ws:
        msg = recv(ws)
    got = [e["task_id"] for e in msg["events"]]
    assert got == ids and first["id"] not in got
    assert msg["cursor"] == api.last_event()
    assert [e["id"] for e in msg["events"]] == sorted(e["id"] for e in msg["events"])


def test_the_stream_is_scoped_to_one_board(api: Api) -> None:
    api.ab.create_board("other")
    with connect(ws_url(api, token=api.admin, board="other")) as ws:
        recv(ws)
        api.ab.board().create("on default")
        mine = api.ab.board("other").create("on other")
        events = recv_until(ws, lambda e: e["task_id"] == mine["id"])
    assert {e["task_id"] for e in events} == {mine["id"]}


def test_a_bad_token_closes_with_4401(api: Api) -> None:
    for url in (ws_url(api, token="abt_wrong"), ws_url(api)):
        with connect(url) as ws:
            if "token" not in url:
                ws.send(json.dumps({"token": "not-a-token"}))
            assert close_code(ws) == (4401, "UNAUTHORIZED")


def test_the_token_may_come_as_the_first_message(api: Api) -> None:
    with connect(ws_url(api, board="default")) as ws:
        ws.send(json.dumps({"token": api.admin}))
        assert "cursor" in recv(ws)


def test_a_forbidden_board_closes_with_4403(api: Api) -> None:
    api.ab.create_board("secret")
    scoped = api.token("scoped", boards=("default",))
    with connect(ws_url(api, token=scoped, board="secret")) as ws:
        assert close_code(ws) == (4403, "FORBIDDEN")
    with connect(ws_url(api, token=api.admin, board="nosuchboard")) as ws:
        assert close_code(ws)[0] == 4404


def test_the_login_cookie_authenticates_the_socket_from_the_same_origin_only(api: Api) -> None:
    headers = {"Cookie": f"agentboard_token={api.admin}"}
    with connect(ws_url(api), additional_headers=headers, origin=api.url) as ws:  # type: ignore[arg-type]
        assert "cursor" in recv(ws)
    with connect(ws_url(api), additional_headers=headers, origin="http://evil.example") as ws:  # type: ignore[arg-type]
        assert close_code(ws)[0] == 4403


def test_a_run_token_socket_closes_when_its_run_ends(api: Api) -> None:
    from agentboard.kernel import runs, tokens

    t = api.ab.board().create("job", assignee="x")
    run_id = runs.claim(api.db, "default", t["id"])["run_id"]
    tok = tokens.create_run_token(api.db, "default", t["id"], run_id)
    with connect(ws_url(api, token=tok)) as ws:
        recv(ws)
        runs.reclaim(api.db, "default", t["id"])
        assert close_code(ws)[0] == 4401
