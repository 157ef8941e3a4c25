"""A move a person confirmed runs only from the status they saw: ``PATCH /api/tasks/{id}`` and the
bulk move carry the status the dashboard showed (``expected_status`` / ``expected_statuses``),
and a task that has left it meanwhile (a worker finished it, a reviewer approved it) is refused
with a 409 naming the status it is in now, the database as it was. Without the field the API
answers as before. Also: a template run given a blank value treats it as not given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .conftest import Api


def _coder(api: Api) -> Any:
    if not any(p["name"] == "coder" for p in api.ab.profiles()):
        api.ab.add_profile("coder", command="true")
    return api.ab.board()


def _in_review(api: Api, title: str) -> dict[str, Any]:
    b = _coder(api)
    t = b.create(title, assignee="coder", review=True)
    run = b.claim(t["id"])
    b.complete(t["id"], summary="please look", run_id=run["run_id"])
    assert b.show(t["id"])["status"] == "review"
    return t


def _trail(api: Api, task_id: str) -> tuple[str, Any, int]:
    shown = api.as_admin.get(f"/api/tasks/{task_id}", params={"events": 1000}).json()
    return shown["status"], shown["updated_at"], len(shown["events"])


def test_request_changes_on_a_task_approved_meanwhile_is_refused_naming_done_and_nothing_changes(api: Api) -> None:
    b = _coder(api)
    t = _in_review(api, "approved while the dialog was open")
    b.review(t["id"], "approved", "looks good")  # the reviewer, in another tab
    before = _trail(api, t["id"])
    r = api.as_admin.patch(f"/api/tasks/{t['id']}",
                           json={"status": "todo", "expected_status": "review", "reason": "redo the tests"})
    assert r.status_code == 409, r.text
    error = r.json()["error"]
    assert error["code"] == "conflict"
    assert error["message"] == f"task {t['id']} is now done, no longer review: nothing changed"
    assert _trail(api, t["id"]) == before  # not reopened: no event, the same row


def test_a_reclaim_of_a_task_its_worker_completed_meanwhile_is_refused(api: Api) -> None:
    b = _coder(api)
    t = b.create("finished by its worker", assignee="coder")
    run = b.claim(t["id"])
    b.complete(t["id"], summary="finished by worker", run_id=run["run_id"])
    before = _trail(api, t["id"])
    r = api.as_admin.patch(f"/api/tasks/{t['id']}", json={"status": "ready", "expected_status": "running"})
    assert r.status_code == 409 and "is now done, no longer running" in r.json()["error"]["message"]
    assert _trail(api, t["id"]) == before


def test_an_approval_of_a_task_sent_back_meanwhile_is_refused_before_anything_is_approved(api: Api) -> None:
    b = _coder(api)
    t = _in_review(api, "sent back while the dialog was open")
    b.review(t["id"], "changes_requested", "not yet")
    before = _trail(api, t["id"])
    r = api.as_admin.patch(f"/api/tasks/{t['id']}", json={"status": "done", "expected_status": "review"})
    assert r.status_code == 409 and f"task {t['id']} is now ready, no longer review" in r.json()["error"]["message"]
    assert _trail(api, t["id"]) == before


def test_a_move_from_the_status_the_person_saw_goes_through_and_without_one_as_before(api: Api) -> None:
    b = _coder(api)
    t = _in_review(api, "still in review")
    r = api.as_admin.patch(f"/api/tasks/{t['id']}",
                           json={"status": "todo", "expected_status": "review", "reason": "redo the tests"})
    assert r.status_code == 200 and r.json()["status"] == "todo"
    kinds = [e["kind"] for e in api.as_admin.get(f"/api/tasks/{t['id']}", params={"events": 1000}).json()["events"]]
    assert "changes_requested" in kinds and "reopened" not in kinds
    # an API client that sends no expectation: the move maps from the status as it is (optional field)
    other = b.create("no expectation", assignee="coder")
    r = api.as_admin.patch(f"/api/tasks/{other['id']}", json={"status": "todo"})
    assert r.status_code == 200 and r.json()["status"] == "todo"
    # an expectation that is no status at all is refused by the schema, nothing changed
    r = api.as_admin.patch(f"/api/tasks/{other['id']}", json={"status": "ready", "expected_status": "finished"})
    assert r.status_code == 422 and b.show(other["id"])["status"] == "todo"


def test_an_edit_sent_with_the_status_seen_is_refused_once_the_task_moved(api: Api) -> None:
    b = _coder(api)
    t = b.create("renamed after it ran", assignee="coder")
    run = b.claim(t["id"])
    b.complete(t["id"], summary="done", run_id=run["run_id"])
    r = api.as_admin.patch(f"/api/tasks/{t['id']}", json={"title": "new name", "expected_status": "ready"})
    assert r.status_code == 409
    assert b.show(t["id"])["title"] == "renamed after it ran"


def test_a_bulk_move_refuses_only_the_tasks_that_left_the_status_the_person_saw(api: Api) -> None:
    b = _coder(api)
    stays = _in_review(api, "bulk: still in review")
    moved = _in_review(api, "bulk: approved meanwhile")
    b.review(moved["id"], "approved", "ok")
    before = _trail(api, moved["id"])
    r = api.as_admin.post("/api/tasks/bulk", json={
        "ids": [stays["id"], moved["id"]], "action": "status", "status": "todo", "reason": "again",
        "expected_statuses": {stays["id"]: "review", moved["id"]: "review"}})
    assert r.status_code == 200, r.text
    results = {x["id"]: x for x in r.json()["results"]}
    assert results[stays["id"]]["ok"] and results[stays["id"]]["status"] == "todo"
    refused = results[moved["id"]]
    assert not refused["ok"] and refused["error"]["code"] == "conflict"
    assert refused["error"]["message"] == f"task {moved['id']} is now done, no longer review: nothing changed"
    assert _trail(api, moved["id"]) == before

    # an archive the person confirmed: only from the status they saw
    running = b.create("bulk: started meanwhile", assignee="coder")
    b.claim(running["id"])
    r = api.as_admin.post("/api/tasks/bulk", json={"ids": [running["id"]], "action": "archive",
                                                   "expected_statuses": {running["id"]: "ready"}})
    assert r.json()["failed"] == 1 and "is now running, no longer ready" in r.json()["results"][0]["error"]["message"]
    assert b.show(running["id"])["status"] == "running"


def test_a_template_run_with_an_empty_value_is_refused_as_the_cli_refuses_it(api: Api, home: Path) -> None:
    folder = home / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "feature.toml").write_text(
        '[vars]\nowner = "alice"\n[[task]]\nkey = "spec"\ntitle = "Spec {feature}"\nassignee = "{owner}"\n'
        '[[task]]\ntitle = "Build {feature}"\nparents = ["spec"]\n')
    member = api.client(api.token("m", "member"))
    before = len(api.ab.board().list())
    r = member.post("/api/templates/feature/run", json={"set": {"feature": "", "owner": ""}})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "template feature needs a value for feature: add --set feature=…"
    r = member.post("/api/templates/feature/run", json={"set": {"feature": "   "}})
    assert r.status_code == 400
    assert len(api.ab.board().list()) == before  # nothing created
    # an emptied placeholder that has a default takes it
    r = member.post("/api/templates/feature/run", json={"set": {"feature": "login", "owner": ""}})
    assert r.status_code == 201, r.text
    spec = r.json()["tasks"][0]
    assert (spec["title"], spec["assignee"]) == ("Spec login", "alice")
