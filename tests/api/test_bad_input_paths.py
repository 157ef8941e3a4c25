"""Bad input over REST, on SQLite and PostgreSQL: terminal controls in one-line fields, NUL
characters (the field named), numbers out of range (the field named), a heartbeat's TTL. Each
refusal is a JSON error and writes nothing."""

from __future__ import annotations

from typing import Any

from agentboard.kernel import runs

from .conftest import Api


def _refused(resp: Any, status: int, *needles: str) -> None:
    assert resp.status_code == status, resp.text
    message = resp.json()["error"]["message"]
    assert "\n" not in message
    for n in needles:
        assert n in message, (n, message)


def test_a_nul_character_is_refused_naming_its_own_field(api_any: Api) -> None:
    admin = api_any.as_admin
    before = api_any.last_event()
    _refused(admin.post("/api/tasks", json={"title": "a\u0000b"}), 422, "title contains a NUL character")
    _refused(admin.post("/api/tasks", json={"title": "p", "body": "a\u0000b"}), 422, "body contains a NUL")
    assert api_any.last_event() == before


def test_one_line_fields_with_terminal_controls_are_refused_and_nothing_is_written(api_any: Api) -> None:
    admin = api_any.as_admin
    t = api_any.ab.board().create("t", assignee="w")
    run = runs.claim(api_any.db, "default", t["id"])
    before = api_any.last_event()
    _refused(admin.post("/api/boards", json={"slug": "bcx", "name": "n\u001b[2Jx"}), 422, "invalid board name")
    _refused(admin.patch("/api/boards/default", json={"name": "n\u202ex"}), 422, "invalid board name")
    _refused(admin.post(f"/api/tasks/{t['id']}/block", json={"reason": "why\u001b[2J"}), 422, "invalid reason")
    _refused(admin.post("/api/profiles", json={"name": "p", "command": "/bin/true", "description": "d\u001b]0;x\u0007"}),
             400, "invalid description")
    _refused(admin.post(f"/api/tasks/{t['id']}/heartbeat", json={"run_id": run["run_id"], "note": "x\u009b2J"}),
             400, "invalid note")
    assert api_any.last_event() == before
    assert api_any.ab.board().show(t["id"])["status"] == "running"


def test_numbers_out_of_range_are_refused_naming_the_field(api_any: Api) -> None:
    admin = api_any.as_admin
    t = api_any.ab.board().create("t")
    before = api_any.last_event()
    _refused(admin.post("/api/tasks", json={"title": "x", "max_runtime": "999999999999999d"}), 400, "max_runtime")
    _refused(admin.put(f"/api/budgets/task/{t['id']}", json={"max_runs": 10**20}), 400, "max_runs")
    _refused(admin.put(f"/api/budgets/task/{t['id']}", json={"max_runtime": "999999999999999d"}), 400,
             "max_runtime")
    assert api_any.last_event() == before
