"""A worker's run token changes its task only through the worker verbs (complete, block,
heartbeat, request review): a PATCH or a bulk action that would mark its task done around the
verification, rewrite its body or model, or requeue it around the failure limit is refused (403)
and leaves the database as it was — on SQLite and PostgreSQL, and from a hostile agent under
the real dispatcher."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from api.conftest import Api, start_api
from testenv import wait_for

from agentboard.kernel import runs, tokens


@pytest.fixture
def api_any(ab: Any) -> Any:
    with start_api(ab) as a:
        yield a


def _snapshot(api: Api, task_id: str) -> tuple[Any, ...]:
    """Everything a refused request must leave as it was: the task row, its runs, the event log."""
    def read(tx: Any) -> tuple[Any, ...]:
        task = tx.one("SELECT * FROM tasks WHERE id = :t", {"t": task_id})
        task_runs = tx.all("SELECT * FROM task_runs WHERE task_id = :t ORDER BY id", {"t": task_id})
        last = tx.scalar("SELECT COALESCE(MAX(id), 0) FROM task_events")
        return dict(task), [dict(r) for r in task_runs], last
    return tuple(api.db.read(read))


_ATTEMPTS: list[tuple[str, str, dict[str, Any]]] = [
    ("PATCH", "", {"status": "done"}),
    ("PATCH", "", {"status": "done", "result": "all good"}),
    ("PATCH", "", {"status": "review"}),
    ("PATCH", "", {"status": "ready"}),  # requeue itself: the run would close without counting a failure
    ("PATCH", "", {"status": "blocked", "reason": "x"}),
    ("PATCH", "", {"body": "a different task"}),
    ("PATCH", "", {"model": "the-expensive-one"}),
    ("PATCH", "", {"priority": 1000}),
    ("PATCH", "", {"assignee": "someone-else"}),
    ("BULK", "status", {"status": "done"}),
    ("BULK", "status", {"status": "ready"}),
    ("BULK", "reclaim", {}),
    ("BULK", "archive", {}),
    ("BULK", "assign", {"assignee": "someone-else"}),
    ("BULK", "priority", {"priority": 5}),
    # requeue itself, its failure counter reset, as often as it likes (a reclaim counts no failure)
    ("POST", "reclaim", {}),
    ("POST", "unguard", {}),
    ("POST", "promote", {"force": True}),
]


@pytest.mark.parametrize("method,action,body", _ATTEMPTS,
                         ids=[f"{m.lower()}-{a or next(iter(b), '')}-{i}" for i, (m, a, b) in enumerate(_ATTEMPTS)])
def test_a_run_token_cannot_change_its_task_outside_the_worker_verbs(api_any: Api, method: str, action: str,
                                                                      body: dict[str, Any]) -> None:
    api = api_any
    board = api.ab.board()
    api.ab.add_profile("worker", command="true")
    task = board.create("guarded by checks", assignee="worker", verify=["python -m pytest -q"], max_retries=3)
    run_id = int(runs.claim(api.db, "default", task["id"])["run_id"])
    worker = api.client(tokens.create_run_token(api.db, "default", task["id"], run_id))
    before = _snapshot(api, task["id"])
    if method == "PATCH":
        r = worker.patch(f"/api/tasks/{task['id']}", json=body)
    elif method == "POST":
        r = worker.post(f"/api/tasks/{task['id']}/{action}", json=body)
    else:
        r = worker.post("/api/tasks/bulk", json={"ids": [task["id"]], "action": action, **body})
    assert r.status_code == 403, r.text
    err = r.json()["error"]
    assert err["code"] == "forbidden" and "run token" in err["message"]
    assert _snapshot(api, task["id"]) == before
    # the worker verb still works, and is held for the checks
    done = worker.post(f"/api/tasks/{task['id']}/complete", json={"summary": "finished"})
    assert done.status_code == 200 and done.json()["status"] == "running" and done.json()["pending_verification"]


def test_an_orchestrator_still_unblocks_through_bulk(api_any: Api) -> None:
    api = api_any
    board = api.ab.board()
    api.ab.add_profile("lead", command="true", orchestrator=True)
    api.ab.add_profile("worker", command="true")
    lead = board.create("coordinate", assignee="lead")
    stuck = board.create("stuck", assignee="worker")
    board.block(stuck["id"], "waiting for the API key")
    run_id = int(runs.claim(api.db, "default", lead["id"])["run_id"])
    orch = api.client(tokens.create_run_token(api.db, "default", lead["id"], run_id))
    out = orch.post("/api/tasks/bulk", json={"ids": [stuck["id"]], "action": "unblock"})
    assert out.status_code == 200 and out.json()["results"][0]["ok"], out.text
    assert board.show(stuck["id"])["status"] == "ready"
    refused = orch.post("/api/tasks/bulk", json={"ids": [stuck["id"]], "action": "status", "status": "done"})
    assert refused.status_code == 403 and board.show(stuck["id"])["status"] == "ready"


# a hostile agent: tries to mark its own task done (and rewrite it) with its run token, records the
# answers in its workspace and exits without reporting
HOSTILE = r'''
import json, os, urllib.error, urllib.request
url, tok, tid = os.environ["AGENTBOARD_API_URL"], os.environ["AGENTBOARD_TOKEN"], os.environ["AGENTBOARD_TASK"]
def call(method, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method=method,
                                 headers={"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
    try:
        return urllib.request.urlopen(req, timeout=30).status
    except urllib.error.HTTPError as exc:
        return exc.code
codes = [call("PATCH", "/api/tasks/" + tid, {"status": "done"}),
         call("POST", "/api/tasks/bulk", {"ids": [tid], "action": "status", "status": "done"}),
         call("PATCH", "/api/tasks/" + tid, {"body": "nothing to do here"}),
         call("PATCH", "/api/tasks/" + tid, {"status": "ready"})]
open("codes.json", "w").write(json.dumps(codes))
'''


def test_a_hostile_worker_cannot_mark_its_task_done_around_its_checks(ab: Any, tmp_path: Path) -> None:
    from agentboard.api.serve import WorkerAPI, run_tokens
    from agentboard.dispatch.dispatcher import Dispatcher

    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE)
    ab.add_profile("hostile", command=f"{sys.executable} {script}")
    board = ab.board()
    task = board.create("prove it works", assignee="hostile", verify=["false"], max_retries=1)
    ab.settings.spawn_grace = 0.5
    api = WorkerAPI(ab.settings, ab.db).start()
    d = Dispatcher(ab.db, ab.settings, api_url=api.url, token_factory=run_tokens(ab.db))
    d.start()
    try:
        wait_for(lambda: board.show(task["id"])["status"] not in ("ready", "running"),
                 what="the end of the hostile worker's run")
    finally:
        d.stop()
        api.stop()
    t = board.show(task["id"])
    codes = json.loads((Path(t["workspace_path"]) / "codes.json").read_text())
    assert codes == [403, 403, 403, 403]
    assert t["status"] == "blocked" and t["body"] == ""  # gave up: it never reported, nothing was rewritten
    kinds = [e["kind"] for e in board.events(0, task_id=task["id"], limit=1000)]
    assert "completed" not in kinds and "edited" not in kinds and "reclaimed" not in kinds


@pytest.mark.parametrize("bad", ["{own}/runs", "{own}/heartbeat?x=", "../../etc", "{own}?events=1", "{own}#x",
                                 "{own}\n"])
def test_a_worker_naming_a_task_with_a_path_in_it_is_refused_before_anything_is_sent(api_any: Api, bad: str) -> None:
    """An agent's ``t_…/runs`` or ``t_…/heartbeat?x=`` as a task id reached another route of the API
    (a comment that was a heartbeat, an answer of the wrong shape that crashed its MCP tool)."""
    from agentboard.domain.errors import InvalidInput
    from agentboard.remote import WorkerClient

    api = api_any
    api.ab.add_profile("worker", command="true")
    task = api.ab.board().create("mine", assignee="worker")
    run_id = int(runs.claim(api.db, "default", task["id"])["run_id"])
    client = WorkerClient(api.url, tokens.create_run_token(api.db, "default", task["id"], run_id), retry_for=0)
    before = _snapshot(api, task["id"])
    tid = bad.format(own=task["id"])
    for call in (lambda: client.task_detail(tid), lambda: client.comment(tid, "hello"),
                 lambda: client.heartbeat(tid, run_id=run_id)):
        with pytest.raises(InvalidInput, match="is not a task id"):
            call()
    assert _snapshot(api, task["id"]) == before
    assert client.task_detail(task["id"])["id"] == task["id"]


def test_a_workers_blank_summary_is_refused_through_rest_as_through_its_mcp_tool(api_any: Api) -> None:
    api = api_any
    api.ab.add_profile("worker", command="true")
    task = api.ab.board().create("mine", assignee="worker")
    run_id = int(runs.claim(api.db, "default", task["id"])["run_id"])
    worker = api.client(tokens.create_run_token(api.db, "default", task["id"], run_id))
    before = _snapshot(api, task["id"])
    for said in ({"summary": "   "}, {}, {"result": " "}):  # blank, or left out (the CLI's bare `complete`)
        r = worker.post(f"/api/tasks/{task['id']}/complete", json=said)
        assert r.status_code == 400 and "summary is empty" in r.json()["error"]["message"], r.text
    # nothing changed but the refusal its run keeps (``report_refused``: an exit without a report says so)
    after = _snapshot(api, task["id"])
    refused = json.loads(after[1][0].pop("metadata"))["report_refused"]
    before[1][0].pop("metadata")
    assert after == before
    assert refused["verb"] == "complete" and refused["error"].startswith("summary is empty")
    assert worker.post(f"/api/tasks/{task['id']}/complete", json={"summary": "did it"}).json()["status"] == "done"
