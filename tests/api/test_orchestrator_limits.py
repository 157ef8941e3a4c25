"""An orchestrator's run creates tasks that start by themselves: within ``run_create_limit``
tasks per run, and no deeper than ``delegation_depth_limit`` levels of delegation (a task created
by a run of a task created by a run of …). Past either the API answers 429 and writes nothing;
its proposals into triage stay open to it, counted as proposals."""

from __future__ import annotations

from typing import Any

from agentboard.kernel import profiles, runs, tokens
from api.conftest import Api


def _run_token(api: Api, tid: str) -> Any:
    run_id = int(runs.claim(api.db, "default", tid)["run_id"])
    return api.client(tokens.create_run_token(api.db, "default", tid, run_id)), run_id


def test_an_orchestrator_runs_creates_are_recorded_on_its_task_and_bounded(api_any: Api) -> None:
    api = api_any
    api.db.settings.run_create_limit = 3
    profiles.add(api.db, "lead", command="true", orchestrator=True)
    profiles.add(api.db, "coder", command="true")
    root = api.ab.board().create("plan the release", assignee="lead")["id"]
    lead, run_id = _run_token(api, root)
    made = [lead.post("/api/tasks", json={"title": f"part {i}", "assignee": "coder"}) for i in range(3)]
    assert [r.status_code for r in made] == [201, 201, 201] and {r.json()["status"] for r in made} == {"ready"}
    refused = lead.post("/api/tasks", json={"title": "part 3", "assignee": "coder"})
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "too_many" and "run_create_limit = 3" in error["message"]
    assert "--triage" in error["message"]
    titles = sorted(t["title"] for t in api.as_admin.get("/api/tasks").json())
    assert titles == ["part 0", "part 1", "part 2", "plan the release"]
    delegated = [e for e in api.ab.board().events(task_id=root, limit=10_000) if e["kind"] == "delegated"]
    assert sorted(e["payload"]["task"] for e in delegated) == sorted(r.json()["id"] for r in made)
    assert {(e["run_id"], e["payload"]["depth"]) for e in delegated} == {(run_id, 1)}
    # a proposal into triage is still open to it (a person releases it), counted as a proposal
    proposal = lead.post("/api/tasks", json={"title": "an idea for later", "triage": True})
    assert proposal.status_code == 201 and proposal.json()["status"] == "triage"
    # a person is bound by neither
    assert api.as_admin.post("/api/tasks", json={"title": "by a person", "assignee": "coder"}).status_code == 201


def test_an_orchestrator_that_delegates_to_itself_stops_at_the_delegation_depth_limit(api_any: Api) -> None:
    api = api_any
    api.db.settings.delegation_depth_limit = 2
    profiles.add(api.db, "lead", command="true", orchestrator=True)
    task = api.ab.board().create("do everything", assignee="lead")["id"]  # a person's: depth 0
    for depth in (1, 2):
        lead, _ = _run_token(api, task)
        made = lead.post("/api/tasks", json={"title": f"do everything (level {depth})", "assignee": "lead"})
        assert made.status_code == 201, made.text
        task = made.json()["id"]
    lead, _ = _run_token(api, task)  # a run of a task two levels deep
    refused = lead.post("/api/tasks", json={"title": "do everything (level 3)", "assignee": "lead"})
    assert refused.status_code == 429, refused.text
    assert "delegation_depth_limit = 2" in refused.json()["error"]["message"]
    assert len(api.as_admin.get("/api/tasks").json()) == 3
    # what it cannot start itself it may still propose, for a person
    assert lead.post("/api/tasks", json={"title": "propose it", "triage": True}).status_code == 201


def test_a_retried_orchestrator_task_creates_no_more_than_its_limit_over_all_its_runs(api_any: Api) -> None:
    """A run that created its sub-tasks and then crashed: the retry sees them counted, so each
    retry does not create them again (fan-out stays within run_create_limit per task)."""
    api = api_any
    api.db.settings.run_create_limit = 3
    api.db.settings.run_proposal_limit = 2
    profiles.add(api.db, "lead", command="true", orchestrator=True)
    profiles.add(api.db, "coder", command="true")
    root = api.ab.board().create("plan the release", assignee="lead")["id"]
    lead, run_id = _run_token(api, root)
    for i in range(2):
        assert lead.post("/api/tasks", json={"title": f"part {i}", "assignee": "coder"}).status_code == 201
    assert lead.post("/api/tasks", json={"title": "an idea", "triage": True}).status_code == 201
    runs.fail(api.db, "default", root, "crashed", run_id=run_id, error="the agent died")
    retry, _ = _run_token(api, root)
    assert retry.post("/api/tasks", json={"title": "part 2", "assignee": "coder"}).status_code == 201
    refused = retry.post("/api/tasks", json={"title": "part 0", "assignee": "coder"})
    assert refused.status_code == 429, refused.text
    assert "the runs of task" in refused.json()["error"]["message"] and "run_create_limit = 3" in refused.json()["error"]["message"]
    assert retry.post("/api/tasks", json={"title": "another idea", "triage": True}).status_code == 201
    assert retry.post("/api/tasks", json={"title": "a third idea", "triage": True}).status_code == 429
    titles = sorted(t["title"] for t in api.as_admin.get("/api/tasks", params={"include_triage": True}).json())
    assert [t for t in titles if t.startswith("part")] == ["part 0", "part 1", "part 2"]
    # a person reopening the task gives it new work: its runs may create again
    api.ab.board().complete(root, summary="planned")
    api.ab.board().reopen(root, reason="plan the next release")
    again, _ = _run_token(api, root)
    assert again.post("/api/tasks", json={"title": "next 0", "assignee": "coder"}).status_code == 201
