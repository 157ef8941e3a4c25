"""The supervisor's run token reaches every one of its tools over real HTTP, and nothing else;
other run tokens and viewers cannot use the tools."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentboard.api.serve import WorkerAPI
from agentboard.kernel import goals, runs, supervision, tokens

from .conftest import ACTOR, supervise


@pytest.fixture
def api(ab: Any) -> Iterator[str]:
    server = WorkerAPI(ab.settings, ab.db).start()
    try:
        yield server.url
    finally:
        server.stop()


def _client(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, trust_env=False, timeout=30)


def _run_token(ab: Any, board: Any, task_id: str) -> str:
    run = runs.claim(ab.db, board.slug, task_id)
    return tokens.create_run_token(ab.db, board.slug, task_id, run["run_id"])


def test_the_supervisor_token_reaches_every_tool_and_nothing_else(ab: Any, board: Any, api: str) -> None:
    supervise(ab, board)
    ab.add_profile("w", command="true")
    blocked = board.create("blocked one", assignee="w")["id"]
    board.block(blocked, "waits for a person", actor="alice")
    running = board.create("running one", assignee="w")["id"]
    runs.claim(ab.db, board.slug, running)
    other = board.create("someone's proposal", triage=True, actor="worker")["id"]
    g = board.goal("g")["id"]
    done = board.create("goal task", assignee="w", goal=g)["id"]
    board.complete(done, summary="ok")
    taken = supervision.take_due(ab.db, board.slug)["tasks"]
    assert sorted(x["subject"] for x in taken) == sorted([blocked, g])  # one supervision task per subject
    sup = next(x for x in taken if x["subject"] == blocked)
    s = _client(api, _run_token(ab, board, sup["id"]))

    assert s.get("/api/me").json()["supervisor"] == "sup"
    # reads
    assert s.get("/api/supervisor/board").json()["blocked"][0]["id"] == blocked
    assert s.get(f"/api/supervisor/tasks/{blocked}").json()["id"] == blocked
    assert s.get(f"/api/supervisor/tasks/{running}/runs").status_code == 200
    assert s.get(f"/api/supervisor/goals/{g}").json()["status"] == "verifying"
    # writes, each recorded as the supervisor
    assert s.post(f"/api/supervisor/tasks/{blocked}/comment", json={"body": "the reason: ..."}).status_code == 201
    assert s.post(f"/api/supervisor/tasks/{blocked}/priority", json={"priority": 9}).json()["priority"] == 9
    verdict = s.post(f"/api/supervisor/goals/{g}/verdict", json={"passed": False, "evidence": "no docs"}).json()
    assert verdict["status"] == "active" and verdict["proposal"]
    prop = s.post("/api/supervisor/proposals", json={"title": "split the parser", "goal": g}).json()
    assert prop["status"] == "triage" and prop["created_by"] == ACTOR
    assert s.post(f"/api/supervisor/tasks/{prop['id']}/release").json()["status"] in ("ready", "todo")
    prop2 = s.post("/api/supervisor/proposals", json={"title": "not needed after all"}).json()
    assert s.post(f"/api/supervisor/tasks/{prop2['id']}/discard").json()["status"] == "archived"
    forbidden = s.post(f"/api/supervisor/tasks/{other}/release")
    assert forbidden.status_code == 403 and "its own proposals" in forbidden.json()["error"]["message"]
    assert s.post(f"/api/supervisor/tasks/{blocked}/unblock").json()["status"] == "ready"
    assert s.post(f"/api/supervisor/tasks/{blocked}/assign", json={"assignee": "w2"}).json()["assignee"] == "w2"
    assert s.post(f"/api/supervisor/tasks/{running}/reclaim", json={"reason": "stuck"}).json()["status"] == "ready"
    esc = s.post(f"/api/supervisor/tasks/{blocked}/escalate", json={"reason": "licence?", "to": "carol"}).json()
    assert (esc["block_kind"], esc["block_to"]) == ("needs_input", "carol")
    handled = s.post("/api/supervisor/wakes/handled", json={"wakes": sup["wakes"], "note": "done"}).json()
    assert [w["status"] for w in handled] == ["handled"]
    actors = {e["actor"] for e in board.events(0, limit=10000) if e["kind"] in (
        "commented", "reprioritized", "released", "unblocked", "assigned", "reclaimed", "escalated", "wake_handled",
        "goal_verify_failed")}
    assert actors == {ACTOR}
    # nothing else: the general write routes stay closed to it
    denied = s.post(f"/api/tasks/{blocked}/complete", json={"summary": "not mine"})
    assert denied.status_code == 403
    assert s.post(f"/api/tasks/{blocked}/block", json={"reason": "x"}).status_code == 403
    # and its own actions woke nothing
    assert [w["reason"] for w in supervision.wakes(ab.db, board.slug)].count("blocked") == 1


def test_other_tokens_cannot_use_the_supervisors_tools(ab: Any, board: Any, api: str) -> None:
    supervise(ab, board)
    ab.add_profile("w", command="true")
    t = board.create("work", assignee="w")["id"]
    target = board.create("blocked", assignee="w")["id"]
    board.block(target, "waits", actor="alice")
    worker = _client(api, _run_token(ab, board, t))
    r = worker.post(f"/api/supervisor/tasks/{target}/unblock")
    assert r.status_code == 403 and "supervisor's run token" in r.json()["error"]["message"]
    viewer = _client(api, tokens.create(ab.db, "viewer", role="viewer")["token"])
    assert viewer.post(f"/api/supervisor/tasks/{target}/unblock").status_code == 403
    assert viewer.get("/api/supervisor/panel").status_code == 200
    person = _client(api, tokens.create(ab.db, "alice", role="member")["token"])
    assert person.post(f"/api/supervisor/tasks/{target}/unblock").json()["status"] == "ready"
    assert board.show(target)["status"] == "ready"
    assert goals.list_goals(ab.db, board.slug) == []


def test_a_goals_verify_commands_need_an_admin_over_the_api(ab: Any, board: Any, api: str) -> None:
    member = _client(api, tokens.create(ab.db, "bob", role="member")["token"])
    refused = member.post("/api/goals", json={"title": "ship", "verify": ["make test"]})
    assert refused.status_code == 403 and "admin" in refused.json()["error"]["message"]
    assert goals.list_goals(ab.db, board.slug) == []
    admin = _client(api, tokens.create(ab.db, "root", role="admin")["token"])
    made = admin.post("/api/goals", json={"title": "ship", "verify": ["make test"]})
    assert made.status_code == 201 and made.json()["verify"] == ["make test"]
