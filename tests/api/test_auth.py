"""Auth: no token → 401 everywhere; roles and board scopes → 403; run tokens; the login cookie."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agentboard.api.auth import CHAT_PATHS
from agentboard.kernel import profiles, runs, tokens

from .conftest import Api


def _seed(api: Api) -> dict[str, Any]:
    """A default board with tasks, a second board, a goal, a profile, a wiki page."""
    b = api.ab.board()
    t1 = b.create("first", assignee="worker")
    t2 = b.create("second", assignee="worker")
    goal = b.goal("ship it")
    api.ab.create_board("other")
    o1 = api.ab.board("other").create("elsewhere", assignee="worker")
    profiles.add(api.db, "worker", command="true")
    from agentboard.kernel import wiki

    wiki.add(api.db, "default", "notes", title="Notes", body="hello")
    return {"t1": t1["id"], "t2": t2["id"], "goal": goal["id"], "o1": o1["id"]}


def _writes(ids: dict[str, Any]) -> list[tuple[str, str, dict[str, Any] | None, dict[str, Any]]]:
    """One valid request for every write route: (method, path, json, params)."""
    t1 = ids["t1"]
    return [
        ("POST", "/api/boards", {"slug": "newboard"}, {}),
        ("PATCH", "/api/boards/{slug}", {"name": "Renamed"}, {}),
        ("DELETE", "/api/boards/{slug}", None, {}),
        ("POST", "/api/tasks", {"title": "new", "assignee": "worker"}, {}),
        ("POST", "/api/tasks/bulk", {"ids": [t1], "action": "priority", "priority": 5}, {}),
        ("PATCH", "/api/tasks/{task_id}", {"priority": 3}, {}),
        ("POST", "/api/tasks/{task_id}/comments", {"body": "hi"}, {}),
        ("POST", "/api/tasks/{task_id}/review", {"verdict": "approved"}, {}),
        ("POST", "/api/tasks/{task_id}/reclaim", {}, {}),
        ("POST", "/api/tasks/{task_id}/heartbeat", {"note": "alive"}, {}),
        ("POST", "/api/tasks/{task_id}/complete", {"summary": "done"}, {}),
        ("POST", "/api/tasks/{task_id}/block", {"reason": "waiting"}, {}),
        ("POST", "/api/tasks/{task_id}/request-review", {}, {}),
        ("POST", "/api/tasks/{task_id}/pick", {"n": 1}, {}),
        ("POST", "/api/tasks/{task_id}/specify", None, {}),
        ("POST", "/api/tasks/{task_id}/decompose", None, {}),
        ("POST", "/api/tasks/specify", {"ids": [t1]}, {}),
        ("POST", "/api/tasks/decompose", {"ids": [t1]}, {}),
        ("POST", "/api/tasks/{task_id}/attachments", None, {"name": "a.txt"}),
        ("POST", "/api/links", {"parent_id": ids["t2"], "child_id": t1}, {}),
        ("DELETE", "/api/links", None, {"parent_id": ids["t2"], "child_id": t1}),
        ("POST", "/api/goals", {"title": "g"}, {}),
        ("PATCH", "/api/goals/{goal_id}", {"title": "g2"}, {}),
        ("POST", "/api/profiles", {"name": "p2", "command": "true"}, {}),
        ("PATCH", "/api/profiles/{name}", {"description": "d"}, {}),
        ("DELETE", "/api/profiles/{name}", None, {}),
        ("POST", "/api/profiles/{name}/check", None, {"run": "false"}),
        ("POST", "/api/wiki", {"slug": "p", "title": "P", "body": "b"}, {}),
        ("PATCH", "/api/wiki/{page}", {"action": "publish"}, {}),
        ("POST", "/api/dispatch", None, {}),
        ("POST", "/api/tokens", {"name": "x"}, {}),
        ("DELETE", "/api/tokens/{name}", None, {}),
        ("POST", "/api/notify/subscriptions", {"target": "json://127.0.0.1:9/x"}, {}),
        ("DELETE", "/api/notify/subscriptions/{sub_id}", None, {}),
        ("POST", "/api/notify/subscriptions/{sub_id}/resume", None, {}),
        ("POST", "/api/notify/subscriptions/{sub_id}/test", None, {}),
        ("POST", "/api/notify/test", {"target": "json://127.0.0.1:9/x"}, {}),
        ("DELETE", "/api/tasks/{task_id}", None, {}),
        ("DELETE", "/api/tasks/{task_id}/attachments/{attachment_id}", None, {}),
        ("POST", "/api/tasks/{task_id}/inbox", {}, {}),
        ("POST", "/api/templates/{name}/run", {"set": {}}, {}),
        ("POST", "/api/schedules", {"cron": "@daily", "clone": t1}, {}),
        ("DELETE", "/api/schedules/{schedule_id}", None, {}),
        ("POST", "/api/supervisor/enable", {"profile": "worker"}, {}),
        ("POST", "/api/supervisor/disable", None, {}),
        ("POST", "/api/supervisor/proposals", {"title": "p"}, {}),
        ("POST", "/api/supervisor/wakes/handled", {"wakes": [1]}, {}),
        ("POST", "/api/supervisor/goals/{goal_id}/verdict", {"passed": True, "evidence": "e"}, {}),
        *[("POST", f"/api/supervisor/tasks/{{task_id}}/{verb}", body, {}) for verb, body in (
            ("comment", {"body": "b"}), ("priority", {"priority": 1}), ("release", None), ("discard", None),
            ("unblock", None), ("assign", {"assignee": "w"}), ("reclaim", {}), ("escalate", {"reason": "r"}))],
        ("PUT", "/api/budgets/{scope}/{ref}", {"max_cost": 5}, {}),
        ("DELETE", "/api/budgets/{scope}/{ref}", None, {}),
        ("POST", "/api/tasks/{task_id}/promote", {"force": True}, {}),
        ("POST", "/api/tasks/{task_id}/unguard", None, {}),
    ]


def _fill(path: str, ids: dict[str, Any], board: str = "default") -> str:
    values = {"slug": board, "task_id": ids.get("t1", "t_00000000"), "goal_id": ids.get("goal", "g_00000000"),
              "name": "worker", "page": "notes", "run_id": "1", "attachment_id": "1", "sub_id": "1",
              "schedule_id": "1", "scope": "board", "ref": board}
    return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]), path)


def _operations(api: Api) -> list[tuple[str, str]]:
    spec = api.as_admin.get("/api/openapi.json").json()
    return [(m.upper(), p) for p, item in spec["paths"].items() for m in item]


def test_every_route_without_a_token_is_401(api: Api) -> None:
    ids = _seed(api)
    anon = api.client()
    ops = _operations(api)
    assert len(ops) >= 35
    for method, path in ops + [("GET", "/"), ("GET", "/index.html"), ("GET", "/api/openapi.json")]:
        r = anon.request(method, _fill(path, ids), json={} if method != "GET" else None)
        assert r.status_code == 401, (method, path, r.text)
        assert r.json()["error"]["code"] == "unauthorized"
    # a browser without the cookie gets a page telling it how to log in
    page = anon.get("/", headers={"Accept": "text/html"})
    assert page.status_code == 401 and "/login?token=" in page.text


@pytest.mark.parametrize("bad", ["nonsense", "abt_" + "x" * 43, "Basic"])
def test_a_bad_token_is_401(api: Api, bad: str) -> None:
    header = bad if bad == "Basic" else f"Bearer {bad}"
    r = api.client().get("/api/board", headers={"Authorization": header})
    assert r.status_code == 401


def test_a_revoked_or_expired_token_stops_working(api: Api) -> None:
    tok = api.token("temp")
    c = api.client(tok)
    assert c.get("/api/board").status_code == 200
    tokens.revoke(api.db, "temp")
    r = c.get("/api/board")
    assert r.status_code == 401 and "revoked" in r.json()["error"]["message"]
    old = tokens.create(api.db, "old", role="admin", expires_at=1.0)["token"]
    assert api.client(old).get("/api/config").status_code == 401


def test_a_viewer_can_read_but_every_write_is_403_and_changes_nothing(api: Api) -> None:
    ids = _seed(api)
    viewer = api.client(api.token("v", role="viewer"))
    assert viewer.get("/api/board").status_code == 200
    assert viewer.get(f"/api/tasks/{ids['t1']}").status_code == 200
    writes = _writes(ids)
    covered = {(m, p) for m, p, _, _ in writes}
    # the chat routes take no token: a viewer linked in chat is checked in tests/chat
    missing = {op for op in _operations(api) if op[0] != "GET" and op[1] not in CHAT_PATHS} - covered
    assert not missing, f"write routes without an auth check in this test: {missing}"
    before = api.last_event()
    for method, path, body, params in writes:
        content = b"data" if path.endswith("/attachments") else None
        r = viewer.request(method, _fill(path, ids), json=body, params=params, content=content)
        assert r.status_code == 403, (method, path, r.text)
        assert r.json()["error"]["code"] == "forbidden"
    assert api.last_event() == before
    assert len(api.ab.board().list()) == 2


def test_a_member_writes_tasks_but_not_boards_profiles_or_tokens(api: Api) -> None:
    ids = _seed(api)
    member = api.client(api.token("m"))
    assert member.patch(f"/api/tasks/{ids['t1']}", json={"priority": 9}).json()["priority"] == 9
    assert member.post("/api/goals", json={"title": "g"}).status_code == 201
    for method, path, body in [
        ("POST", "/api/boards", {"slug": "b2"}),
        ("PATCH", "/api/boards/default", {"name": "x"}),
        ("DELETE", "/api/boards/other", None),
        ("POST", "/api/profiles", {"name": "p", "command": "true"}),
        ("DELETE", "/api/profiles/worker", None),
        ("GET", "/api/tokens", None),
        ("POST", "/api/tokens", {"name": "t"}),
        # the board's supervisor is one of its settings: an admin's, as PATCH /api/boards says
        ("POST", "/api/supervisor/enable", {"profile": "worker"}),
        ("POST", "/api/supervisor/disable", None),
    ]:
        r = member.request(method, path, json=body)
        assert r.status_code == 403, (method, path, r.text)
    assert api.as_admin.get("/api/boards/default").json()["settings"].get("supervisor") is None
    assert api.as_admin.post("/api/supervisor/enable", json={"profile": "worker"}).json()["supervisor"] == "worker"
    # profiles are readable, but their environment values are an administrator's business
    profiles.update(api.db, "worker", env={"API_KEY": "s3cret"})
    shown = member.get("/api/profiles").json()
    assert shown[0]["env"] == {"API_KEY": "***"}
    assert api.as_admin.get("/api/profiles").json()[0]["env"] == {"API_KEY": "s3cret"}


def test_a_board_scoped_token_cannot_touch_another_board(api: Api) -> None:
    ids = _seed(api)
    scoped = api.client(api.token("s", boards=("other",)))
    assert [b["slug"] for b in scoped.get("/api/boards").json()] == ["other"]
    assert scoped.get("/api/board").json()["board"] == "other"  # its only board is the default
    assert scoped.get("/api/board", params={"board": "other"}).status_code == 200
    before = api.last_event()
    for method, path, kw, status in [
        ("GET", "/api/board", {}, 403),
        ("GET", f"/api/tasks/{ids['t1']}", {}, 404),  # as for a task that does not exist
        ("GET", "/api/stats", {}, 403),
        ("PATCH", f"/api/tasks/{ids['t1']}", {"json": {"priority": 1}}, 404),
        ("POST", "/api/tasks", {"json": {"title": "sneaky"}}, 403),
        ("POST", "/api/tasks/bulk", {"json": {"ids": [ids["t1"]], "action": "archive"}}, 403),
    ]:
        r = scoped.request(method, path, params={"board": "default"}, **kw)
        assert r.status_code == status, (method, path, r.text)
    assert api.last_event() == before
    admin_scoped = api.client(api.token("sa", role="admin", boards=("other",)))
    assert admin_scoped.patch("/api/boards/other", json={"name": "Other"}).status_code == 200
    assert admin_scoped.patch("/api/boards/default", json={"name": "x"}).status_code == 403
    assert admin_scoped.post("/api/boards", json={"slug": "third"}).status_code == 403


def _running(api: Api, board: str, task_id: str) -> int:
    return int(runs.claim(api.db, board, task_id)["run_id"])


def test_run_token_reads_its_board_and_writes_only_its_own_task(api_any: Api) -> None:
    api = api_any
    ids = _seed(api)
    run_id = _running(api, "default", ids["t1"])
    tok = tokens.create_run_token(api.db, "default", ids["t1"], run_id)
    worker = api.client(tok)
    assert worker.get("/api/board").json()["board"] == "default"
    assert worker.get(f"/api/tasks/{ids['t2']}").status_code == 200
    assert worker.get("/api/board", params={"board": "other"}).status_code == 403
    assert worker.get(f"/api/tasks/{ids['o1']}", params={"board": "other"}).status_code == 404
    r = worker.post(f"/api/tasks/{ids['t1']}/comments", json={"body": "progress"})
    assert r.status_code == 201
    assert worker.post(f"/api/tasks/{ids['t2']}/comments", json={"body": "x"}).status_code == 403
    assert worker.patch(f"/api/tasks/{ids['t2']}", json={"priority": 1}).status_code == 403
    assert worker.post("/api/tasks", json={"title": "more work", "assignee": "worker"}).status_code == 403
    assert worker.post("/api/links", json={"parent_id": ids["t2"], "child_id": ids["t1"]}).status_code == 403
    assert worker.post("/api/goals", json={"title": "g"}).status_code == 403
    # proposing follow-up work is allowed: it lands in triage
    proposed = worker.post("/api/tasks", json={"title": "found a bug", "triage": True})
    assert proposed.status_code == 201 and proposed.json()["status"] == "triage"
    # a worker changes its task only through the worker verbs: no PATCH, no bulk action
    bulk = worker.post("/api/tasks/bulk", json={"ids": [ids["t1"], ids["t2"]], "action": "priority",
                                                "priority": 2})
    assert bulk.status_code == 403 and bulk.json()["error"]["code"] == "forbidden"
    assert worker.patch(f"/api/tasks/{ids['t1']}", json={"priority": 2}).status_code == 403
    # finishing its task closes the run; the token dies with it
    done = worker.post(f"/api/tasks/{ids['t1']}/complete", json={"summary": "finished"})
    assert done.status_code == 200 and done.json()["status"] == "done"
    r = worker.get("/api/board")
    assert r.status_code == 401 and "closed" in r.json()["error"]["message"]


def test_a_worker_is_not_told_where_the_home_and_the_database_are(api: Api) -> None:
    ids = _seed(api)
    run_id = _running(api, "default", ids["t1"])
    worker = api.client(tokens.create_run_token(api.db, "default", ids["t1"], run_id))
    seen = worker.get("/api/config").json()["settings"]
    assert "home" not in seen and "database_url" not in seen and str(api.db.settings.home) not in str(seen)
    assert api.as_admin.get("/api/config").json()["settings"]["home"] == str(api.db.settings.home)


def test_run_token_is_refused_once_its_run_is_reclaimed(api: Api) -> None:
    ids = _seed(api)
    run_id = _running(api, "default", ids["t1"])
    worker = api.client(tokens.create_run_token(api.db, "default", ids["t1"], run_id))
    assert worker.get("/api/config").status_code == 200
    runs.reclaim(api.db, "default", ids["t1"])
    assert worker.get("/api/config").status_code == 401
    assert worker.post(f"/api/tasks/{ids['t1']}/comments", json={"body": "late"}).status_code == 401


def test_run_tokens_issued_together_work_each_for_its_own_run_only(api_any: Api) -> None:
    """What a dispatcher starting a batch of workers asks for, in one transaction."""
    api = api_any
    ids = _seed(api)
    r1, r2, ro = _running(api, "default", ids["t1"]), _running(api, "default", ids["t2"]), \
        _running(api, "other", ids["o1"])
    t3 = api.ab.board().create("third", assignee="worker")["id"]
    r3 = _running(api, "default", t3)
    runs.reclaim(api.db, "default", t3)  # closed: gets no token
    t4 = api.ab.board().create("fourth", assignee="worker")["id"]
    r4 = _running(api, "default", t4)
    issued = tokens.create_run_tokens(api.db, "default", [(ids["t1"], r1), (ids["t2"], r2), (ids["o1"], ro),
                                                          (t3, r3), (ids["t1"], r4)])
    # another board's run, a closed one, a run named with the wrong task: none
    assert set(issued) == {r1, r2} and issued[r1] != issued[r2]
    one, two = api.client(issued[r1]), api.client(issued[r2])
    assert one.post(f"/api/tasks/{ids['t1']}/comments", json={"body": "mine"}).status_code == 201
    assert one.post(f"/api/tasks/{ids['t2']}/comments", json={"body": "not mine"}).status_code == 403
    assert two.post(f"/api/tasks/{ids['t2']}/comments", json={"body": "mine"}).status_code == 201
    runs.reclaim(api.db, "default", ids["t1"])
    assert one.get("/api/config").status_code == 401 and two.get("/api/config").status_code == 200
    assert tokens.create_run_tokens(api.db, "default", []) == {}


def test_an_orchestrator_run_token_plans_on_its_board_only(api: Api) -> None:
    ids = _seed(api)
    profiles.add(api.db, "lead", command="true", orchestrator=True)
    root = api.ab.board().create("plan", assignee="lead")
    run_id = _running(api, "default", root["id"])
    lead = api.client(tokens.create_run_token(api.db, "default", root["id"], run_id))
    child = lead.post("/api/tasks", json={"title": "step", "assignee": "worker"})
    assert child.status_code == 201
    assert lead.post("/api/links", json={"parent_id": child.json()["id"], "child_id": ids["t2"]}).status_code == 201
    assert lead.post("/api/tasks", params={"board": "other"}, json={"title": "x"}).status_code == 403
    assert lead.post("/api/boards", json={"slug": "mine"}).status_code == 403


def test_login_url_sets_an_httponly_strict_cookie_and_csrf_guards_writes(api: Api) -> None:
    ids = _seed(api)
    browser = api.client(follow_redirects=False)
    r = browser.get("/login", params={"token": api.admin})
    assert r.status_code == 303 and r.headers["location"] == "/"
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and api.admin.lower() not in r.text.lower()
    assert browser.get("/").status_code == 200
    assert browser.get("/api/board").status_code == 200
    # a write with only the cookie (what a cross-site form would send) is refused
    r = browser.patch(f"/api/tasks/{ids['t1']}", json={"priority": 4})
    assert r.status_code == 403 and r.json()["error"]["code"] == "csrf"
    assert api.ab.board().show(ids["t1"])["priority"] == 0
    ok = browser.patch(f"/api/tasks/{ids['t1']}", json={"priority": 4}, headers={"X-Agentboard": "1"})
    assert ok.status_code == 200
    same = browser.patch(f"/api/tasks/{ids['t1']}", json={"priority": 5}, headers={"Origin": api.url})
    assert same.status_code == 200
    evil = browser.patch(f"/api/tasks/{ids['t1']}", json={"priority": 6}, headers={"Origin": "http://evil.example"})
    assert evil.status_code == 403
    # logging out forgets the cookie
    browser.get("/logout")
    assert browser.get("/api/board").status_code == 401


def test_login_with_a_bad_token_is_refused(api: Api) -> None:
    r = api.client(follow_redirects=False).get("/login", params={"token": "abt_nope"})
    assert r.status_code == 401 and "set-cookie" not in r.headers


def test_config_hides_secrets_and_says_who_is_calling(home: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import agentboard
    from agentboard.api import create_app
    from agentboard.api.serve import BackgroundServer

    monkeypatch.setenv("AGENTBOARD_LLM_API_KEY", "sk-very-secret")
    client = agentboard.connect(str(home))
    tok = tokens.create(client.db, "v", role="viewer")["token"]
    with BackgroundServer(create_app(client.settings, client.db)) as srv:
        import httpx

        r = httpx.get(srv.url + "/api/config", headers={"Authorization": f"Bearer {tok}"})
    client.close()
    assert r.status_code == 200
    assert "sk-very-secret" not in r.text
    body = r.json()
    assert body["me"]["role"] == "viewer" and body["settings"]["max_request_bytes"] > 0
