"""PATCH /api/tasks/{id} is one transaction: a refused step leaves nothing of the request behind."""

from __future__ import annotations

from .conftest import Api


def test_patch_with_an_edit_and_a_refused_status_changes_nothing(api_any: Api) -> None:
    c = api_any.as_admin
    parent = c.post("/api/tasks", json={"title": "research", "assignee": "r"}).json()
    child = c.post("/api/tasks", json={"title": "write", "assignee": "w", "parents": [parent["id"]]}).json()
    assert child["status"] == "todo"
    before = api_any.last_event()

    r = c.patch(f"/api/tasks/{child['id']}", json={"title": "write the report", "priority": 5, "status": "ready"})

    assert r.status_code == 409, r.text
    assert parent["id"] in r.json()["error"]["message"]
    task = c.get(f"/api/tasks/{child['id']}").json()
    assert (task["title"], task["priority"], task["status"]) == ("write", 0, "todo")
    assert api_any.last_event() == before, "a refused PATCH appends no event"


def test_patch_with_an_assignee_and_a_refused_status_keeps_the_old_assignee(api_any: Api) -> None:
    c = api_any.as_admin
    t = c.post("/api/tasks", json={"title": "deploy", "assignee": "ops"}).json()
    assert t["status"] == "ready"

    r = c.patch(f"/api/tasks/{t['id']}", json={"assignee": "dev", "title": "deploy v2", "status": "triage"})

    assert r.status_code == 409, r.text
    task = c.get(f"/api/tasks/{t['id']}").json()
    assert (task["title"], task["assignee"], task["status"]) == ("deploy", "ops", "ready")


def test_patch_applies_edit_assignee_and_status_together(api_any: Api) -> None:
    c = api_any.as_admin
    t = c.post("/api/tasks", json={"title": "draft"}).json()
    assert t["status"] == "todo"

    out = c.patch(f"/api/tasks/{t['id']}", json={"title": "final", "assignee": "w", "status": "blocked",
                                                  "reason": "waiting on legal"}).json()

    assert (out["title"], out["assignee"], out["status"], out["block_reason"]) == \
        ("final", "w", "blocked", "waiting on legal")
    assert c.get(f"/api/tasks/{t['id']}").json()["title"] == "final"


def test_a_patch_changes_a_tasks_runtime_and_retry_limits_as_agentboard_edit_does(api_any: Api) -> None:
    c = api_any.as_admin
    tid = api_any.ab.board().create("bounded")["id"]
    r = c.patch(f"/api/tasks/{tid}", json={"max_runtime": "90m", "max_retries": 5})
    assert r.status_code == 200, r.text
    shown = c.get(f"/api/tasks/{tid}").json()
    assert (shown["max_runtime_seconds"], shown["max_retries"]) == (5400, 5)
    bad = c.patch(f"/api/tasks/{tid}", json={"max_retries": 5000, "title": "renamed"})
    assert bad.status_code == 400 and "max_retries" in bad.json()["error"]["message"]
    assert c.get(f"/api/tasks/{tid}").json()["title"] == "bounded"  # nothing changed
    assert c.patch(f"/api/tasks/{tid}", json={"max_runtime": None}).status_code == 200
    assert c.get(f"/api/tasks/{tid}").json()["max_runtime_seconds"] is None
