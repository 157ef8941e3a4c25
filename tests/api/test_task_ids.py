"""A task id names one task in the whole installation: every route given a task id finds the task
on its own board, while the caller's board scope and token still apply."""

from __future__ import annotations

from agentboard.kernel import profiles, runs, tokens

from .conftest import Api
from .test_routes import err


def _two_boards(api: Api) -> dict[str, str]:
    """Tasks on the default board and on a second board, ``other``."""
    profiles.add(api.db, "worker", command="true")
    api.ab.create_board("other")
    here = api.ab.board().create("here", assignee="worker")
    o1 = api.ab.board("other").create("elsewhere", assignee="worker")
    o2 = api.ab.board("other").create("elsewhere too", assignee="worker")
    return {"here": here["id"], "o1": o1["id"], "o2": o2["id"]}


def test_an_admin_reads_and_changes_a_task_on_another_board_without_naming_it(api_any: Api) -> None:
    ids = _two_boards(api_any)
    c = api_any.as_admin
    o1, o2 = ids["o1"], ids["o2"]
    detail = c.get(f"/api/tasks/{o1}").json()
    assert (detail["id"], detail["board"]) == (o1, "other")
    assert c.post(f"/api/tasks/{o1}/comments", json={"body": "seen from default"}).status_code == 201
    assert c.patch(f"/api/tasks/{o1}", json={"priority": 4}).json()["priority"] == 4
    up = c.post(f"/api/tasks/{o1}/attachments", params={"name": "notes.txt"}, content=b"hello")
    assert up.status_code == 201
    assert [a["name"] for a in c.get(f"/api/tasks/{o1}/attachments").json()] == ["notes.txt"]
    assert c.get(f"/api/tasks/{o1}/attachments/{up.json()['id']}").content == b"hello"
    assert c.get(f"/api/tasks/{o1}/log").json()["task_id"] == o1
    # naming the task's own board is fine too
    assert c.get(f"/api/tasks/{o1}", params={"board": "other"}).status_code == 200
    # links between two tasks of that board, found without ?board=
    assert c.post("/api/links", json={"parent_id": o1, "child_id": o2}).status_code == 201
    assert c.get(f"/api/tasks/{o2}").json()["parents"][0]["id"] == o1
    assert c.delete("/api/links", params={"parent_id": o1, "child_id": o2}).status_code == 200
    msg = err(c.post("/api/links", json={"parent_id": ids["here"], "child_id": o1}), 400)
    assert "across boards" in msg
    # bulk: each id on its own board
    out = c.post("/api/tasks/bulk", json={"ids": [ids["here"], o2], "action": "priority", "priority": 7}).json()
    assert [(r["ok"], r["task"]["board"]) for r in out["results"]] == [(True, "default"), (True, "other")]
    comments = c.get(f"/api/tasks/{o1}").json()["comments"]
    assert [cm["body"] for cm in comments] == ["seen from default"]


def test_a_board_param_naming_another_board_is_a_400_that_changes_nothing(api: Api) -> None:
    ids = _two_boards(api)
    c = api.as_admin
    o1 = ids["o1"]
    before = api.last_event()
    msg = err(c.get(f"/api/tasks/{o1}", params={"board": "default"}), 400, "invalid_input")
    assert "'other'" in msg and "'default'" in msg
    err(c.post(f"/api/tasks/{o1}/comments", params={"board": "default"}, json={"body": "x"}), 400)
    err(c.patch(f"/api/tasks/{o1}", params={"board": "default"}, json={"priority": 1}), 400)
    err(c.post("/api/links", params={"board": "default"}, json={"parent_id": o1, "child_id": ids["o2"]}), 400)
    out = c.post("/api/tasks/bulk", params={"board": "default"},
                 json={"ids": [ids["here"], o1], "action": "priority", "priority": 2}).json()
    assert [r["ok"] for r in out["results"]] == [True, False]
    assert out["results"][1]["error"]["code"] == "invalid_input"
    assert api.ab.board("other").events(before) == []
    assert api.ab.board("other").show(o1)["priority"] == 0


def test_a_token_scoped_to_another_board_gets_the_404_of_a_task_that_does_not_exist(api_any: Api) -> None:
    api = api_any
    ids = _two_boards(api)
    o1 = ids["o1"]
    scoped = api.client(api.token("s", boards=("default",)))
    assert scoped.get(f"/api/tasks/{ids['here']}").status_code == 200
    before = api.last_event()
    for method, path, kw in [
        ("GET", f"/api/tasks/{o1}", {}),
        ("GET", f"/api/tasks/{o1}/attachments", {}),
        ("GET", f"/api/tasks/{o1}/log", {}),
        ("POST", f"/api/tasks/{o1}/comments", {"json": {"body": "x"}}),
        ("PATCH", f"/api/tasks/{o1}", {"json": {"priority": 1}}),
        ("POST", f"/api/tasks/{o1}/reclaim", {"json": {}}),
        ("POST", "/api/links", {"json": {"parent_id": o1, "child_id": ids["o2"]}}),
    ]:
        msg = err(scoped.request(method, path, **kw), 404, "not_found")
        assert msg == f"no task {o1}", (method, path, msg)
    out = scoped.post("/api/tasks/bulk", json={"ids": [o1], "action": "archive"}).json()
    assert out["results"][0]["error"] == {"code": "not_found", "message": f"no task {o1}"}
    assert api.last_event() == before
    # an id no board holds gets the same answer
    assert err(scoped.get("/api/tasks/t_00000000"), 404, "not_found") == "no task t_00000000"


def test_a_run_token_acts_on_its_own_task_on_any_board_and_nothing_else(api: Api) -> None:
    ids = _two_boards(api)
    o1 = ids["o1"]
    run_id = int(runs.claim(api.db, "other", o1)["run_id"])
    worker = api.client(tokens.create_run_token(api.db, "other", o1, run_id))
    assert worker.post(f"/api/tasks/{o1}/comments", json={"body": "progress"}).status_code == 201
    assert worker.get(f"/api/tasks/{ids['o2']}").status_code == 200
    err(worker.post(f"/api/tasks/{ids['o2']}/comments", json={"body": "x"}), 403)
    err(worker.get(f"/api/tasks/{ids['here']}"), 404)
    err(worker.post(f"/api/tasks/{ids['here']}/comments", json={"body": "x"}), 403)


def test_a_goal_patch_whose_cancellation_is_refused_keeps_the_goal_as_it_was(api_any: Api) -> None:
    api = api_any
    c = api.as_admin
    gid = c.post("/api/goals", json={"title": "launch"}).json()["id"]
    assert c.patch(f"/api/goals/{gid}", json={"status": "cancelled"}).json()["status"] == "cancelled"
    before = api.last_event()
    err(c.patch(f"/api/goals/{gid}", json={"title": "launch v2", "status": "cancelled"}), 409)
    assert c.get(f"/api/goals/{gid}").json()["title"] == "launch"
    assert api.last_event() == before
    g2 = c.post("/api/goals", json={"title": "beta"}).json()["id"]
    both = c.patch(f"/api/goals/{g2}", json={"title": "beta v2", "status": "cancelled"}).json()
    assert (both["title"], both["status"]) == ("beta v2", "cancelled")


def test_a_board_patch_whose_archiving_is_refused_keeps_the_board_as_it_was(api_any: Api) -> None:
    api = api_any
    ids = _two_boards(api)
    c = api.as_admin
    runs.claim(api.db, "other", ids["o1"])
    before = api.last_event()
    msg = err(c.patch("/api/boards/other", json={"name": "Renamed", "archived": True}), 409)
    assert "running" in msg
    shown = c.get("/api/boards/other").json()
    assert (shown["name"], shown["archived"]) == ("other", False)
    assert api.last_event() == before
    c.post(f"/api/tasks/{ids['o1']}/reclaim", json={})
    both = c.patch("/api/boards/other", json={"name": "Old", "archived": True}).json()
    assert (both["name"], both["archived"]) == ("Old", True)
    back = c.patch("/api/boards/other", json={"description": "again", "archived": False}).json()
    assert (back["description"], back["archived"]) == ("again", False)


def test_a_goal_id_finds_its_own_board_over_rest_as_the_cli_does(api_any: Api) -> None:
    api = api_any
    api.ab.create_board("other")
    goal = api.ab.board("other").goal("ship the other thing")
    c = api.as_admin
    shown = c.get(f"/api/goals/{goal['id']}")
    assert shown.status_code == 200 and shown.json()["title"] == "ship the other thing"
    assert c.patch(f"/api/goals/{goal['id']}", json={"title": "renamed"}).json()["title"] == "renamed"
    wrong = c.get(f"/api/goals/{goal['id']}", params={"board": "default"})
    assert "leave out ?board=" in err(wrong, 400)
    # a token limited to another board learns nothing of it
    scoped = api.client(api.token("dflt", boards=("default",)))
    hidden = scoped.get(f"/api/goals/{goal['id']}")
    assert err(hidden, 404) == f"no goal {goal['id']}"
    assert scoped.patch(f"/api/goals/{goal['id']}", json={"title": "x"}).status_code == 404
    viewer = api.client(api.token("look", role="viewer"))
    assert viewer.get(f"/api/goals/{goal['id']}").status_code == 200
    assert viewer.patch(f"/api/goals/{goal['id']}", json={"title": "x"}).status_code == 403
    assert c.get("/api/goals/g_00000000").status_code == 404
