"""DELETE /api/tasks/{id} (admin purge) and removing an attachment over REST."""

from __future__ import annotations

from pathlib import Path

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
