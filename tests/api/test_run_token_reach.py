"""What a run token may do to tasks that are not its own, whichever surface it uses: an
orchestrator's run creates, links, comments and blocks on its board, but never reports for
another task (complete, heartbeat, request review), never writes another run's summary or usage,
never records a review verdict, and no run token sets the block kinds that are a person's or the
dispatcher's (a budget's, a rejection's, giving up)."""

from __future__ import annotations

from typing import Any

from agentboard.kernel import profiles, runs, tokens
from api.conftest import Api


def _run_token(api: Api, tid: str) -> Any:
    run_id = int(runs.claim(api.db, "default", tid)["run_id"])
    return api.client(tokens.create_run_token(api.db, "default", tid, run_id)), run_id


def _forbidden(r: Any, *words: str) -> None:
    assert r.status_code == 403, r.text
    message = r.json()["error"]["message"]
    assert all(w in message for w in words), message


def test_an_orchestrators_run_cannot_finish_approve_or_report_for_another_task(api: Api) -> None:
    profiles.add(api.db, "lead", command="true", orchestrator=True)
    profiles.add(api.db, "coder", command="true")
    b = api.ab.board()
    lead, _ = _run_token(api, b.create("plan", assignee="lead")["id"])
    waiting = b.create("nobody did this", assignee="coder")["id"]
    in_review = b.create("reviewed by a person", assignee="coder", review=True)["id"]
    other_run = int(runs.claim(api.db, "default", in_review)["run_id"])
    b.complete(in_review, summary="my work", run_id=other_run)
    busy = b.create("another worker's", assignee="coder")["id"]
    busy_run = int(runs.claim(api.db, "default", busy)["run_id"])
    before = {t: b.show(t)["status"] for t in (waiting, in_review, busy)}

    _forbidden(lead.post(f"/api/tasks/{waiting}/complete", json={}), "only its own task", waiting)
    _forbidden(lead.post(f"/api/tasks/{busy}/complete",
                         json={"run_id": busy_run, "summary": "forged", "usage": {"cost_usd": 99}}), "only its own task")
    _forbidden(lead.post(f"/api/tasks/{busy}/heartbeat", json={"run_id": busy_run}), "only its own task")
    _forbidden(lead.post(f"/api/tasks/{busy}/request-review", json={"run_id": busy_run}), "only its own task")
    _forbidden(lead.post(f"/api/tasks/{in_review}/review", json={"verdict": "approved"}), "review verdict")

    assert {t: b.show(t)["status"] for t in (waiting, in_review, busy)} == before
    run = [r for r in b.runs(busy) if r["id"] == busy_run][0]
    assert run["status"] == "open" and run["summary"] is None and run["cost_usd"] is None
    # a person still does all of it
    assert api.as_admin.post(f"/api/tasks/{in_review}/review", json={"verdict": "approved"}).json()["status"] == "done"


def test_an_orchestrators_block_of_another_task_is_a_persons_and_no_run_sets_a_budget_or_rejection_block(
        api: Api) -> None:
    profiles.add(api.db, "lead", command="true", orchestrator=True)
    profiles.add(api.db, "coder", command="true")
    b = api.ab.board()
    own = b.create("plan", assignee="lead")["id"]
    lead, lead_run = _run_token(api, own)
    busy = b.create("another worker's", assignee="coder")["id"]
    busy_run = int(runs.claim(api.db, "default", busy)["run_id"])

    for kind in ("budget", "rejected", "gave_up"):
        _forbidden(lead.post(f"/api/tasks/{busy}/block", json={"reason": "stop", "kind": kind}), repr(kind))
        _forbidden(lead.post(f"/api/tasks/{own}/block", json={"reason": "stop", "kind": kind}), repr(kind))
    assert b.show(busy)["status"] == "running" and b.show(own)["status"] == "running"

    out = lead.post(f"/api/tasks/{busy}/block", json={"reason": "wait for the schema", "run_id": busy_run})
    assert out.status_code == 200 and out.json()["block_kind"] == "manual"
    closed = [r for r in b.runs(busy) if r["id"] == busy_run][0]
    assert closed["status"] == "closed" and (closed.get("metadata") or {}).get("closed_by_hand") is True, \
        "a person's block: the worker is stopped at once, not given a reporter's grace"
    mine = lead.post(f"/api/tasks/{own}/block", json={"reason": "need the API key"})
    assert mine.status_code == 200 and mine.json()["block_kind"] == "needs_input"
    assert [r for r in b.runs(own) if r["id"] == lead_run][0]["outcome"] == "blocked"
