"""DELETE /api/tasks/{id} (admin purge) and removing an attachment over REST."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Api


def test_delete_task_needs_an_admin_refuses_running_work_and_purges(api: Api, home: Path) -> None:
    board = api.ab.board()
    done = board.create("finished")
    member = api.client(api.token("m", "member"))
    r = member.delete(f"/api/tasks/{done['id']}")
    assert r.status_code == 403
    running = board.create("busy", assignee="worker")
    board.claim(running["id"])
    r = api.as_admin.delete(f"/api/tasks/{running['id']}")
    assert r.status_code == 409 and "is running" in r.json()["error"]["message"]
    before = api.last_event()
    r = api.as_admin.delete(f"/api/tasks/{done['id']}")
    assert r.status_code == 200, r.text
    assert r.json()["purged"] is True
    assert api.as_admin.get(f"/api/tasks/{done['id']}").status_code == 404
    kinds = [e["kind"] for e in board.events(cursor=before)]
    assert kinds == ["purged"]
    r = api.as_admin.delete(f"/api/tasks/{running['id']}", params={"force": "true"})
    assert r.status_code == 200 and r.json()["removed"]["task_runs"] == 1


def test_an_attachment_uploaded_over_rest_can_be_removed(api: Api) -> None:
    board = api.ab.board()
    tid = board.create("files")["id"]
    c = api.as_admin
    r = c.post(f"/api/tasks/{tid}/attachments", params={"name": "n.txt"}, content=b"hello")
    assert r.status_code == 201
    aid = r.json()["id"]
    r = c.delete(f"/api/tasks/{tid}/attachments/{aid}")
    assert r.status_code == 200 and r.json()["removed"] is True
    assert c.get(f"/api/tasks/{tid}/attachments").json() == []
    assert c.delete(f"/api/tasks/{tid}/attachments/{aid}").status_code == 404


def test_templates_over_rest_list_show_and_run_in_one_go(api: Api, home: Path) -> None:
    folder = home / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pair.toml").write_text('description = "two steps"\n[[task]]\nkey = "a"\ntitle = "First {what}"\n'
                                      'assignee = "coder"\n[[task]]\ntitle = "Then {what}"\nparents = ["a"]\n')
    (folder / "checked.toml").write_text('[[task]]\ntitle = "checked"\nverify = ["make test"]\n')
    member = api.client(api.token("m", "member"))
    listed = member.get("/api/templates").json()
    assert [t["name"] for t in listed] == ["checked", "pair"]
    shown = member.get("/api/templates/pair").json()
    assert shown["placeholders"] == ["what"] and len(shown["tasks"]) == 2
    r = member.post("/api/templates/pair/run", json={})
    assert r.status_code == 400 and "--set what=" in r.json()["error"]["message"]
    r = member.post("/api/templates/pair/run", json={"set": {"what": "thing"}})
    assert r.status_code == 201, r.text
    titles = [t["title"] for t in r.json()["tasks"]]
    assert titles == ["First thing", "Then thing"]
    before = len(api.ab.board().list())
    r = member.post("/api/templates/checked/run", json={})
    assert r.status_code == 403 and "admin" in r.json()["error"]["message"]
    assert len(api.ab.board().list()) == before
    assert api.as_admin.post("/api/templates/checked/run", json={}).status_code == 201
    assert member.get("/api/templates/nope").status_code == 404


def test_schedules_over_rest_and_a_task_that_waits(api: Api, home: Path) -> None:
    import time

    board = api.ab.board()
    src = board.create("nightly backup check", assignee="ops")
    c = api.as_admin
    r = c.post("/api/schedules", json={"cron": "0 3 * * *", "clone": src["id"], "missed": "once"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    assert [s["id"] for s in c.get("/api/schedules").json()] == [sid]
    assert c.post("/api/schedules", json={"cron": "0 3 * *", "clone": src["id"]}).status_code == 400
    assert c.delete(f"/api/schedules/{sid}").json()["removed"] is True
    assert c.get("/api/schedules").json() == []
    r = c.post("/api/tasks", json={"title": "tomorrow", "assignee": "ops", "not_before": "1d"})
    assert r.status_code == 201 and r.json()["status"] == "todo"
    assert r.json()["not_before"] == pytest.approx(time.time() + 86400, abs=60)
