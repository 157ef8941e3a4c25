"""Every REST route: its happy path and its errors, over real HTTP."""

from __future__ import annotations

from typing import Any

import httpx

from agentboard.kernel import profiles, runs

from .conftest import Api


def err(r: httpx.Response, status: int, code: str | None = None) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    if code:
        assert body["error"]["code"] == code, body
    return str(body["error"]["message"])


def test_task_lifecycle_through_the_api(api_any: Api) -> None:
    """Create, link, drag through the columns, comment, review: what the dashboard does."""
    c = api_any.as_admin
    a = c.post("/api/tasks", json={"title": "research", "assignee": "r"}).json()
    b = c.post("/api/tasks", json={"title": "write", "assignee": "w", "parents": [a["id"]]}).json()
    assert (a["status"], b["status"]) == ("ready", "todo")
    view = c.get("/api/board").json()
    counts = {col["status"]: col["count"] for col in view["columns"]}
    assert counts["ready"] == 1 and counts["todo"] == 1 and "archived" not in counts
    # moving the child to ready while its parent is pending names the parent
    msg = err(c.patch(f"/api/tasks/{b['id']}", json={"status": "ready"}), 409, "conflict")
    assert a["id"] in msg
    # moving to running by hand is refused; done completes and promotes the child
    err(c.patch(f"/api/tasks/{a['id']}", json={"status": "running"}), 409)
    done = c.patch(f"/api/tasks/{a['id']}", json={"status": "done"}).json()
    assert done["status"] == "done"
    detail = c.get(f"/api/tasks/{b['id']}").json()
    assert detail["status"] == "ready" and detail["parents"][0]["id"] == a["id"]
    assert [r["outcome"] for r in c.get(f"/api/tasks/{a['id']}").json()["runs"]] == ["completed"]
    c.post(f"/api/tasks/{b['id']}/comments", json={"body": "looks good"})
    detail = c.get(f"/api/tasks/{b['id']}").json()
    assert [cm["body"] for cm in detail["comments"]] == ["looks good"]
    assert detail["comments"][0]["author"] == "admin"
    kinds = [e["kind"] for e in detail["events"]]
    assert "created" in kinds and "promoted" in kinds and "commented" in kinds


def test_patch_edits_fields_assigns_and_validates_before_changing_anything(api: Api) -> None:
    c = api.as_admin
    t = c.post("/api/tasks", json={"title": "t"}).json()
    assert t["status"] == "todo"
    out = c.patch(f"/api/tasks/{t['id']}", json={"title": "better", "body": "# plan", "priority": 7,
                                                   "assignee": "bob", "tenant": "acme"}).json()
    assert (out["title"], out["priority"], out["assignee"], out["status"], out["tenant"]) == \
        ("better", 7, "bob", "ready", "acme")
    before = api.last_event()
    err(c.patch(f"/api/tasks/{t['id']}", json={"title": "   ", "priority": 1}), 400, "invalid_input")
    err(c.patch(f"/api/tasks/{t['id']}", json={"assignee": "no spaces allowed"}), 400)
    err(c.patch(f"/api/tasks/{t['id']}", json={"status": "sideways"}), 422, "invalid_request")
    err(c.patch(f"/api/tasks/{t['id']}", json={"colour": "red"}), 422)
    err(c.patch(f"/api/tasks/{t['id']}", json={}), 400)
    msg = err(c.patch(f"/api/tasks/{t['id']}", content=b"{not json", headers={"Content-Type": "application/json"}),
              400, "invalid_input")  # not a schema error: the body cannot be read at all
    assert msg.startswith("the request body is not valid JSON: ") and "line 1, column 2" in msg
    assert api.last_event() == before
    assert api.ab.board().show(t["id"])["title"] == "better"
    err(c.patch("/api/tasks/t_deadbeef", json={"priority": 1}), 404, "not_found")
    unassigned = c.patch(f"/api/tasks/{t['id']}", json={"assignee": None}).json()
    assert unassigned["assignee"] is None and unassigned["status"] == "todo"
    blocked = c.patch(f"/api/tasks/{t['id']}", json={"status": "blocked", "reason": "waiting on legal"}).json()
    assert blocked["status"] == "blocked" and blocked["block_reason"] == "waiting on legal"
    archived = c.patch(f"/api/tasks/{t['id']}", json={"status": "archived"}).json()
    assert archived["status"] == "archived"
    assert c.get("/api/tasks").json() == []
    assert [x["id"] for x in c.get("/api/tasks", params={"include_archived": True}).json()] == [t["id"]]


def test_a_branch_is_set_over_patch_before_the_task_starts_as_edit_branch_sets_it(api: Api) -> None:
    c = api.as_admin
    profiles.add(api.db, "coder", command="true")
    t = c.post("/api/tasks", json={"title": "on my branch", "assignee": "coder"}).json()
    assert c.patch(f"/api/tasks/{t['id']}", json={"branch": "feature/x"}).json()["branch_name"] == "feature/x"
    assert "invalid branch 'bad..name'" in err(c.patch(f"/api/tasks/{t['id']}", json={"branch": "bad..name"}), 400)
    assert c.patch(f"/api/tasks/{t['id']}", json={"branch": ""}).json()["branch_name"] is None  # the default again
    runs.claim(api.db, "default", t["id"])
    assert "has started" in err(c.patch(f"/api/tasks/{t['id']}", json={"branch": "late"}), 409)
    assert api.ab.board().show(t["id"])["branch_name"] is None


def test_an_out_of_range_priority_is_the_same_400_on_create_edit_and_bulk(api: Api) -> None:
    c = api.as_admin
    t = c.post("/api/tasks", json={"title": "t", "priority": 3}).json()
    want = "priority is 2000000; give -1000000 to 1000000"
    before = api.last_event()
    assert err(c.post("/api/tasks", json={"title": "u", "priority": 2_000_000}), 400, "invalid_input") == want
    assert err(c.patch(f"/api/tasks/{t['id']}", json={"priority": 2_000_000}), 400, "invalid_input") == want
    bulk = {"ids": [t["id"]], "action": "priority", "priority": 2_000_000}
    assert err(c.post("/api/tasks/bulk", json=bulk), 400, "invalid_input") == want
    assert api.last_event() == before and api.ab.board().show(t["id"])["priority"] == 3
    assert c.patch(f"/api/tasks/{t['id']}", json={"priority": -1_000_000}).json()["priority"] == -1_000_000


def test_a_body_that_is_not_json_is_a_400_saying_so_and_where(api: Api) -> None:
    c = api.as_admin
    before = api.last_event()
    msg = err(c.post("/api/tasks", content=b'{"title": "x",\n  oops}', headers={"Content-Type": "application/json"}),
              400, "invalid_input")
    assert msg.startswith("the request body is not valid JSON: ") and "at line 2, column 3" in msg, msg
    assert api.last_event() == before
    err(c.post("/api/tasks", json={"title": "x", "colour": "red"}), 422, "invalid_request")  # a schema error stays 422


def test_create_and_list_with_filters_and_errors(api: Api) -> None:
    c = api.as_admin
    r = c.post("/api/tasks", json={"title": "a", "assignee": "x", "tenant": "acme", "priority": 5})
    assert r.status_code == 201
    c.post("/api/tasks", json={"title": "b", "assignee": "y"})
    c.post("/api/tasks", json={"title": "idea", "triage": True})
    assert [t["title"] for t in c.get("/api/tasks", params={"tenant": "acme"}).json()] == ["a"]
    assert [t["title"] for t in c.get("/api/tasks", params={"assignee": "y"}).json()] == ["b"]
    assert [t["title"] for t in c.get("/api/tasks", params={"status": "triage"}).json()] == ["idea"]
    assert [t["title"] for t in c.get("/api/tasks", params={"search": "IDE"}).json()] == ["idea"]
    assert len(c.get("/api/tasks", params={"limit": 1}).json()) == 1
    err(c.get("/api/tasks", params={"status": "bogus"}), 400)
    err(c.get("/api/tasks", params={"limit": -1}), 422)
    err(c.get("/api/tasks", params={"board": "Not A Slug!"}), 400, "invalid_input")
    err(c.get("/api/tasks", params={"board": "missing"}), 404)
    before = api.last_event()
    err(c.post("/api/tasks", json={"title": ""}), 400)
    err(c.post("/api/tasks", json={"title": "x", "parents": ["t_00000000"]}), 404)
    err(c.post("/api/tasks", json={}), 422)
    err(c.post("/api/tasks", json={"title": "x", "workspace": "dir:../../etc"}), 400)
    assert api.last_event() == before
    # an idempotency key returns the same task
    k1 = c.post("/api/tasks", json={"title": "once", "idempotency_key": "k"}).json()
    k2 = c.post("/api/tasks", json={"title": "once", "idempotency_key": "k"}).json()
    assert k1["id"] == k2["id"]


def test_board_view_filters_and_lanes(api: Api) -> None:
    c = api.as_admin
    for who in ("a", "b"):
        t = c.post("/api/tasks", json={"title": f"for {who}", "assignee": who, "tenant": who}).json()
        runs.claim(api.db, "default", t["id"])
    view = c.get("/api/board", params={"lanes": True}).json()
    running = next(col for col in view["columns"] if col["status"] == "running")
    assert running["count"] == 2 and [lane["assignee"] for lane in running["lanes"]] == ["a", "b"]
    only_a = c.get("/api/board", params={"tenant": "a"}).json()
    assert only_a["total"] == 1
    assert any(col["status"] == "archived" for col in
               c.get("/api/board", params={"include_archived": True}).json()["columns"])
    err(c.get("/api/board", params={"per_column": 0}), 422)


def test_a_done_card_without_a_result_shows_the_first_line_of_its_last_runs_summary(api_any: Api) -> None:
    c = api_any.as_admin
    ids = [c.post("/api/tasks", json={"title": f"card {i}", "assignee": "x"}).json()["id"] for i in range(4)]
    first = runs.claim(api_any.db, "default", ids[0])
    runs.fail(api_any.db, "default", ids[0], "crashed", run_id=first["run_id"], error="boom")
    again = runs.claim(api_any.db, "default", ids[0])
    runs.complete(api_any.db, "default", ids[0], run_id=again["run_id"], summary="\n  Wrote the parser\nand its tests")
    said = runs.claim(api_any.db, "default", ids[1])
    runs.complete(api_any.db, "default", ids[1], run_id=said["run_id"], summary="long notes", result="p99 4.1 ms")
    quiet = runs.claim(api_any.db, "default", ids[2])
    runs.complete(api_any.db, "default", ids[2], run_id=quiet["run_id"])
    view = c.get("/api/board").json()
    done = {t["id"]: t for col in view["columns"] if col["status"] == "done" for t in col["tasks"]}
    assert done[ids[0]]["summary_line"] == "Wrote the parser"
    assert done[ids[1]]["result"] == "p99 4.1 ms" and "summary_line" not in done[ids[1]]
    assert "summary_line" not in done[ids[2]]
    ready = next(col for col in view["columns"] if col["status"] == "ready")
    assert all("summary_line" not in t for t in ready["tasks"])


def test_bulk_reports_each_id_without_aborting_siblings(api: Api) -> None:
    c = api.as_admin
    a = c.post("/api/tasks", json={"title": "a", "assignee": "x"}).json()
    b = c.post("/api/tasks", json={"title": "b", "assignee": "x"}).json()
    out = c.post("/api/tasks/bulk", json={"ids": [a["id"], "t_00000000", b["id"]], "action": "archive"}).json()
    assert [r["ok"] for r in out["results"]] == [True, False, True]
    assert out["results"][1]["error"]["code"] == "not_found"
    assert (out["ok"], out["failed"]) == (2, 1)
    moved = c.post("/api/tasks/bulk", json={"ids": [a["id"], b["id"]], "action": "status", "status": "ready"}).json()
    assert [r["status"] for r in moved["results"]] == ["ready", "ready"]
    re = c.post("/api/tasks/bulk", json={"ids": [a["id"]], "action": "assign", "assignee": "z"}).json()
    assert re["results"][0]["task"]["assignee"] == "z"
    err(c.post("/api/tasks/bulk", json={"ids": [a["id"]], "action": "status"}), 400)
    err(c.post("/api/tasks/bulk", json={"ids": [], "action": "archive"}), 422)
    err(c.post("/api/tasks/bulk", json={"ids": [a["id"]], "action": "explode"}), 422)


def test_links_refuse_cycles_naming_the_path(api: Api) -> None:
    c = api.as_admin
    a, b, d = (c.post("/api/tasks", json={"title": n, "assignee": "x"}).json()["id"] for n in "abd")
    assert c.post("/api/links", json={"parent_id": a, "child_id": b}).status_code == 201
    assert c.post("/api/links", json={"parent_id": b, "child_id": d}).status_code == 201
    msg = err(c.post("/api/links", json={"parent_id": d, "child_id": a}), 409)
    assert a in msg and d in msg
    err(c.post("/api/links", json={"parent_id": a, "child_id": a}), 400)
    assert c.delete("/api/links", params={"parent_id": a, "child_id": b}).status_code == 200
    err(c.delete("/api/links", params={"parent_id": a, "child_id": b}), 404)
    err(c.delete("/api/links", params={"parent_id": a}), 422)


def test_review_reclaim_and_runs(api: Api) -> None:
    c = api.as_admin
    t = c.post("/api/tasks", json={"title": "t", "assignee": "x", "review": True}).json()
    err(c.post(f"/api/tasks/{t['id']}/reclaim", json={}), 409)
    run = runs.claim(api.db, "default", t["id"])
    got = c.get(f"/api/runs/{run['run_id']}").json()
    assert got["status"] == "open" and got["task_id"] == t["id"]
    err(c.get("/api/runs/999999"), 404)
    back = c.post(f"/api/tasks/{t['id']}/reclaim", json={"reason": "stuck"}).json()
    assert back["status"] == "ready"
    run = runs.claim(api.db, "default", t["id"])
    runs.complete(api.db, "default", t["id"], summary="did it", run_id=run["run_id"])
    err(c.post(f"/api/tasks/{t['id']}/review", json={"verdict": "rejected"}), 400)
    err(c.post(f"/api/tasks/{t['id']}/review", json={"verdict": "meh"}), 422)
    changes = c.post(f"/api/tasks/{t['id']}/review", json={"verdict": "changes_requested", "text": "add tests"}).json()
    assert changes["status"] == "ready"
    run = runs.claim(api.db, "default", t["id"])
    runs.complete(api.db, "default", t["id"], summary="with tests", run_id=run["run_id"])
    ok = c.post(f"/api/tasks/{t['id']}/review", json={"verdict": "approved", "score": 90}).json()
    assert ok["status"] == "done"
    err(c.post(f"/api/tasks/{t['id']}/review", json={"verdict": "approved"}), 409)


def test_specify_and_decompose_without_an_llm_say_so(api: Api) -> None:
    c = api.as_admin
    t = c.post("/api/tasks", json={"title": "vague idea", "triage": True}).json()
    for action in ("specify", "decompose"):
        r = c.post(f"/api/tasks/{t['id']}/{action}")
        assert r.status_code == 200
        assert r.json()["ok"] is False and r.json()["reason"].startswith("unavailable: no LLM is configured")
    assert api.ab.board().show(t["id"])["status"] == "triage"
    err(c.post("/api/tasks/t_00000000/specify"), 404)
    ready = c.post("/api/tasks", json={"title": "clear", "assignee": "x"}).json()
    err(c.post(f"/api/tasks/{ready['id']}/decompose"), 400)


def test_attachments_upload_list_download_and_limits(api: Api) -> None:
    c = api.as_admin
    t = c.post("/api/tasks", json={"title": "t"}).json()
    up = c.post(f"/api/tasks/{t['id']}/attachments", params={"name": "notes.html"},
                content=b"<script>alert(1)</script>")
    assert up.status_code == 201 and up.json()["size"] == 25
    listed = c.get(f"/api/tasks/{t['id']}/attachments").json()
    assert [a["name"] for a in listed] == ["notes.html"]
    got = c.get(f"/api/tasks/{t['id']}/attachments/{listed[0]['id']}")
    assert got.content == b"<script>alert(1)</script>"
    assert got.headers["content-type"] == "application/octet-stream"
    assert got.headers["content-disposition"].startswith("attachment")
    err(c.get(f"/api/tasks/{t['id']}/attachments/999"), 404)
    err(c.post(f"/api/tasks/{t['id']}/attachments", params={"name": "notes.html"}, content=b"x"), 409)
    for bad in ("../../escape.txt", "a/b", ".."):
        err(c.post(f"/api/tasks/{t['id']}/attachments", params={"name": bad}, content=b"x"), 400)
    assert not (api.ab.home / "boards" / "default" / "escape.txt").exists()
    err(c.post(f"/api/tasks/{t['id']}/attachments", content=b"x"), 422)


def test_worker_log_tail(api: Api) -> None:
    c = api.as_admin
    t = c.post("/api/tasks", json={"title": "t", "assignee": "x"}).json()
    assert c.get(f"/api/tasks/{t['id']}/log").json()["text"] == ""
    run = runs.claim(api.db, "default", t["id"])
    log = api.ab.home / "w.log"
    log.write_text("line 1\n" + "x" * 5000 + "\nlast line\n")
    runs.update_run(api.db, run["run_id"], log_path=str(log))
    out = c.get(f"/api/tasks/{t['id']}/log", params={"tail": 100}).json()
    assert out["run_id"] == run["run_id"] and out["truncated"] is True
    assert out["text"].endswith("last line\n") and "line 1" not in out["text"]
    err(c.get(f"/api/tasks/{t['id']}/log", params={"run_id": 424242}), 404)
    err(c.get("/api/tasks/t_00000000/log"), 404)


def test_boards_create_edit_archive_restore_delete(api: Api) -> None:
    c = api.as_admin
    r = c.post("/api/boards", json={"slug": "Ops", "name": "Operations"})
    assert r.status_code == 201 and r.json()["slug"] == "ops"
    err(c.post("/api/boards", json={"slug": "ops"}), 409)
    err(c.post("/api/boards", json={"slug": "../etc"}), 400)
    err(c.post("/api/boards", json={"slug": "x", "workdir": "relative/path"}), 400)
    assert c.get("/api/boards/ops").json()["name"] == "Operations"
    assert c.patch("/api/boards/ops", json={"description": "on call", "settings": {"auto_decompose": False}}).json()["settings"] == {"auto_decompose": False}
    page = c.post("/api/tasks", params={"board": "ops"}, json={"title": "page"}).json()
    assert c.delete("/api/boards/ops").json()["archived"] is True
    assert [b["slug"] for b in c.get("/api/boards").json()] == ["default"]
    assert "ops" in [b["slug"] for b in c.get("/api/boards", params={"include_archived": True}).json()]
    err(c.post("/api/tasks", params={"board": "ops"}, json={"title": "x"}), 400)
    for move in ("blocked", "archived", "done", "ready"):  # its tasks stay as they are until it is restored
        refused = c.patch(f"/api/tasks/{page['id']}", json={"status": move})
        assert refused.status_code == 400 and "is archived" in refused.json()["error"]["message"], (move, refused.text)
    shown = c.get(f"/api/tasks/{page['id']}").json()
    assert shown["status"] == page["status"] and shown["moves"] == [], "no move is offered that would be refused"
    assert c.patch("/api/boards/ops", json={"archived": False}).json()["archived"] is False
    assert c.patch(f"/api/tasks/{page['id']}", json={"status": "blocked", "reason": "later"}).json()["status"] == "blocked"
    assert c.delete("/api/boards/ops", params={"purge": True}).status_code == 200
    err(c.get("/api/boards/ops"), 404)
    err(c.get("/api/board", params={"board": "ops"}), 404)
    err(c.patch("/api/boards/nope", json={"name": "x"}), 404)


def test_goals(api: Api) -> None:
    c = api.as_admin
    g = c.post("/api/goals", json={"title": "launch", "acceptance": ["site up"]})
    assert g.status_code == 201
    gid = g.json()["id"]
    c.post("/api/tasks", json={"title": "deploy", "goal": gid, "assignee": "x"})
    listed = c.get("/api/goals").json()
    assert listed[0]["id"] == gid and listed[0]["total"] == 1
    assert c.get(f"/api/goals/{gid}").json()["tasks"][0]["title"] == "deploy"
    assert c.patch(f"/api/goals/{gid}", json={"title": "launch v2"}).json()["title"] == "launch v2"
    # a goal's limits are its budgets (PUT /api/budgets/goal/{id}, an admin's): no unenforced field beside them
    err(c.patch(f"/api/goals/{gid}", json={"budget": {"max_cost": 5}}), 422)
    assert c.patch(f"/api/goals/{gid}", json={"verify": ["make check"]}).json()["verify"] == ["make check"]
    member = api.client(api.token("goal-member"))  # a raw command is an admin's, as on create
    assert member.patch(f"/api/goals/{gid}", json={"verify": ["rm -rf /"]}).status_code == 403
    assert c.get(f"/api/goals/{gid}").json()["verify"] == ["make check"]
    assert "budget" not in c.get(f"/api/goals/{gid}").json()
    assert c.patch(f"/api/goals/{gid}", json={"status": "cancelled"}).json()["status"] == "cancelled"
    err(c.patch(f"/api/goals/{gid}", json={"status": "cancelled"}), 409)
    err(c.patch(f"/api/goals/{gid}", json={}), 400)
    err(c.get("/api/goals/g_00000000"), 404)
    err(c.post("/api/goals", json={"title": " "}), 400)
    err(c.get("/api/goals", params={"status": "sleepy"}), 422)


def test_profiles(api: Api) -> None:
    c = api.as_admin
    assert c.post("/api/profiles", json={"name": "coder", "command": "echo hi", "description": "writes code"}).status_code == 201
    err(c.post("/api/profiles", json={"name": "coder", "command": "x"}), 409)
    err(c.post("/api/profiles", json={"name": "bad name", "command": "x"}), 400)
    err(c.post("/api/profiles", json={"name": "p", "command": "x", "adapter": "nope"}), 400)
    assert c.patch("/api/profiles/coder", json={"description": "writes tests too"}).json()["description"] == "writes tests too"
    err(c.patch("/api/profiles/ghost", json={"description": "x"}), 404)
    assert [p["name"] for p in c.get("/api/profiles").json()] == ["coder"]
    assert c.delete("/api/profiles/coder").status_code == 200
    err(c.delete("/api/profiles/coder"), 404)


def test_an_agent_cli_profile_without_a_command_runs_the_cli_of_its_adapter(api: Api) -> None:
    c = api.as_admin
    made = c.post("/api/profiles", json={"name": "coder", "adapter": "codex"})
    assert made.status_code == 201 and made.json()["command"] == "codex"
    # a script's profile says how to start it: refused, nothing stored
    assert "needs --command" in err(c.post("/api/profiles", json={"name": "script"}), 400, "invalid_input")
    assert [p["name"] for p in c.get("/api/profiles").json()] == ["coder"]


def test_wiki_pages_and_drafts(api: Api) -> None:
    c = api.as_admin
    assert c.post("/api/wiki", json={"slug": "deploy", "title": "Deploying", "body": "run make"}).status_code == 201
    assert c.get("/api/wiki", params={"status": "draft"}).json()[0]["slug"] == "deploy"
    assert c.patch("/api/wiki/deploy", json={}).json()["status"] == "published"
    err(c.patch("/api/wiki/deploy", json={"action": "publish"}), 409)
    assert c.get("/api/wiki/deploy").json()["body"] == "run make"
    err(c.get("/api/wiki/nothing-here"), 404)
    err(c.post("/api/wiki", json={"slug": "../x", "title": "t", "body": "b"}), 400)
    c.post("/api/wiki", json={"slug": "tmp", "title": "T", "body": "b"})
    assert c.patch("/api/wiki/tmp", json={"action": "discard"}).status_code == 200


def test_stats_assignees_tenants_config_and_dispatch_without_a_dispatcher(api: Api) -> None:
    c = api.as_admin
    c.post("/api/tasks", json={"title": "a", "assignee": "x", "tenant": "acme"})
    profiles.add(api.db, "x", command="true")
    assert c.get("/api/stats").json()["by_status"]["ready"] == 1
    assert c.get("/api/assignees").json()[0]["name"] == "x"
    assert c.get("/api/tenants").json() == [{"tenant": "acme", "n": 1}]
    cfg = c.get("/api/config").json()
    assert cfg["dispatcher"]["running"] is False and cfg["llm"]["configured"] is False
    err(c.post("/api/dispatch"), 503, "unavailable")


def test_dispatch_now_runs_a_pass_of_the_hosted_dispatcher(home: Any) -> None:
    import agentboard

    from .conftest import start_api

    calls: list[tuple[Any, bool]] = []

    class Recorder:
        """Stands in for the dispatcher: this test is about the route, not about spawning."""

        def start(self) -> None: ...
        def stop(self) -> None: ...

        def run_pass(self, max_spawn: int | None = None, dry_run: bool = False) -> dict[str, Any]:
            calls.append((max_spawn, dry_run))
            return {"spawned": [], "dry_run": dry_run}

    with agentboard.connect(str(home)) as client, start_api(client, dispatcher=Recorder()) as a:
        r = a.as_admin.post("/api/dispatch", params={"max": 2, "dry_run": True})
        assert r.status_code == 200 and r.json()["dry_run"] is True
        assert calls == [(2, True)]
        assert a.as_admin.get("/api/config").json()["dispatcher"]["running"] is True
        viewer = a.client(a.token("v", role="viewer"))
        err(viewer.post("/api/dispatch"), 403)
        assert calls == [(2, True)]


def test_tokens_over_the_api(api: Api) -> None:
    c = api.as_admin
    made = c.post("/api/tokens", json={"name": "ci", "role": "viewer", "boards": ["default"]})
    assert made.status_code == 201
    tok = made.json()["token"]
    listed = c.get("/api/tokens").json()
    assert "ci" in [t["name"] for t in listed] and all("token_hash" not in t and "token" not in t for t in listed)
    assert api.client(tok).get("/api/board").status_code == 200
    err(c.post("/api/tokens", json={"name": "ci"}), 409)
    err(c.post("/api/tokens", json={"name": "x", "boards": ["nope"]}), 404)
    assert c.delete("/api/tokens/ci").status_code == 200
    assert api.client(tok).get("/api/board").status_code == 401
    err(c.delete("/api/tokens/ci"), 404)


def test_unknown_routes_and_methods_answer_json_errors(api: Api) -> None:
    c = api.as_admin
    err(c.get("/api/nothing"), 404, "not_found")
    err(c.put("/api/tasks"), 405, "method_not_allowed")


def test_request_bodies_over_the_limit_are_413_and_change_nothing(api: Api) -> None:
    c = api.as_admin
    before = api.last_event()
    huge = b'{"title": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    err(c.post("/api/tasks", content=huge, headers={"Content-Type": "application/json"}), 413, "too_large")

    def chunks() -> Any:
        for _ in range(40):
            yield b"x" * 65536

    err(c.post("/api/tasks", content=chunks(), headers={"Content-Type": "application/json"}), 413)
    assert api.last_event() == before
    # attachments have their own (larger) cap, still enforced
    t = c.post("/api/tasks", json={"title": "t"}).json()
    ok = c.post(f"/api/tasks/{t['id']}/attachments", params={"name": "big.bin"}, content=b"y" * (2 * 1024 * 1024))
    assert ok.status_code == 201


def test_attachment_cap_from_settings(home: Any, monkeypatch: Any) -> None:
    import agentboard

    from .conftest import start_api

    monkeypatch.setenv("AGENTBOARD_ATTACHMENT_MAX_BYTES", str(4 * 1024 * 1024))
    with agentboard.connect(str(home)) as client, start_api(client) as a:
        c = a.as_admin
        t = c.post("/api/tasks", json={"title": "t"}).json()
        err(c.post(f"/api/tasks/{t['id']}/attachments", params={"name": "huge.bin"},
                   content=b"z" * (5 * 1024 * 1024)), 413)
        assert c.get(f"/api/tasks/{t['id']}/attachments").json() == []


def test_text_the_database_cannot_store_is_refused_on_every_backend(api_any: Api) -> None:
    c = api_any.as_admin
    before = api_any.last_event()
    err(c.post("/api/tasks", json={"title": "nul\u0000byte"}), 422)
    err(c.post("/api/goals", json={"title": "ok", "acceptance": ["a\u0000"]}), 422)
    r = c.get("/api/tasks", params={"search": "a\u0000b"})
    assert r.status_code in (200, 400)
    err(c.get("/api/runs/99999999999999999"), 404)
    assert api_any.last_event() == before


def test_a_task_for_a_misspelled_profile_is_created_with_the_did_you_mean_the_cli_gives(api_any: Api) -> None:
    from agentboard.kernel import profiles

    profiles.add(api_any.db, "fixer", command="true")
    r = api_any.as_admin.post("/api/tasks", json={"title": "typo", "assignee": "fixr"})
    assert r.status_code == 201
    assert r.json()["warnings"][0].startswith("no profile named 'fixr' (did you mean 'fixer'?):")
