"""A worker run posts within bounds: past ``run_comment_limit`` comments, or
``run_proposal_limit`` proposals (its triage tasks and the follow-ups its @mentions make), the
API answers 429 with a JSON error and writes nothing; people are not bound by them."""

from __future__ import annotations

from typing import Any

from agentboard.kernel import profiles, runs, tokens
from api.conftest import Api


def _worker(api: Api, comments: int = 200, proposals: int = 25) -> tuple[Any, str, int]:
    api.db.settings.run_comment_limit = comments
    api.db.settings.run_proposal_limit = proposals
    profiles.add(api.db, "worker", command="true")
    tid = api.ab.board().create("the work", assignee="worker")["id"]
    run_id = int(runs.claim(api.db, "default", tid)["run_id"])
    return api.client(tokens.create_run_token(api.db, "default", tid, run_id)), tid, run_id


def _kinds(api: Api, tid: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in api.ab.board().events(task_id=tid, limit=10_000) if e["kind"] == kind]


def test_a_worker_run_past_its_comment_limit_is_answered_429_and_nothing_is_written(api_any: Api) -> None:
    api = api_any
    worker, tid, _ = _worker(api, comments=3)
    assert [worker.post(f"/api/tasks/{tid}/comments", json={"body": f"note {i}"}).status_code
            for i in range(3)] == [201, 201, 201]
    refused = worker.post(f"/api/tasks/{tid}/comments", json={"body": "one more"})
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "too_many" and "run_comment_limit = 3" in error["message"]
    thread = api.as_admin.get(f"/api/tasks/{tid}").json()["comments"]
    assert [c["body"] for c in thread] == ["note 0", "note 1", "note 2"]
    # a person is not bound by a run's limit
    assert api.as_admin.post(f"/api/tasks/{tid}/comments", json={"body": "from a person"}).status_code == 201


def test_a_worker_runs_proposals_are_recorded_on_its_task_and_bounded(api_any: Api) -> None:
    api = api_any
    worker, tid, run_id = _worker(api, proposals=2)
    made = [worker.post("/api/tasks", json={"title": f"idea {i}", "triage": True}) for i in range(2)]
    assert [r.status_code for r in made] == [201, 201] and {r.json()["status"] for r in made} == {"triage"}
    refused = worker.post("/api/tasks", json={"title": "idea 2", "triage": True})
    assert refused.status_code == 429 and "run_proposal_limit = 2" in refused.json()["error"]["message"]
    triage = api.as_admin.get("/api/tasks", params={"status": "triage"}).json()
    assert sorted(t["title"] for t in triage) == ["idea 0", "idea 1"]
    proposed = _kinds(api, tid, "proposed")
    assert sorted(e["payload"]["task"] for e in proposed) == sorted(r.json()["id"] for r in made)
    assert {e["run_id"] for e in proposed} == {run_id}


def test_the_follow_ups_a_worker_runs_mentions_make_count_as_its_proposals(api_any: Api) -> None:
    api = api_any
    worker, tid, _ = _worker(api, proposals=1)
    first = worker.post(f"/api/tasks/{tid}/comments", json={"body": "@worker please check the docs"})
    assert first.status_code == 201 and len(first.json()["spawned_subtasks"]) == 1
    second = worker.post(f"/api/tasks/{tid}/comments", json={"body": "@worker and the tests"})
    assert second.status_code == 429
    assert len(api.as_admin.get(f"/api/tasks/{tid}").json()["comments"]) == 1
    assert len(api.as_admin.get("/api/tasks", params={"status": "triage"}).json()) == 1
