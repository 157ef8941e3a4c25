"""The moves a task offers (``GET /api/tasks/{id}`` ``moves``, from the transition table) are
exactly the status changes the kernel accepts for it over ``PATCH``: every offered one lands the
task where it says, every other one is refused and leaves the task as it was."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentboard.api.models import TaskPatch
from agentboard.domain import states

from .conftest import Api

Make = Callable[[], dict[str, Any]]


def makers(a: Api) -> dict[str, Make]:
    """One way per case to put a fresh task of the default board in a status (a person's or a
    worker's doing, through the Python API)."""
    b = a.ab.board()
    if not any(p["name"] == "coder" for p in a.ab.profiles()):
        a.ab.add_profile("coder", command="true")

    def running(review: bool = False) -> dict[str, Any]:
        t = b.create("running", assignee="coder", review=review)
        b.claim(t["id"])
        return t

    def review() -> dict[str, Any]:
        t = running(review=True)
        b.complete(t["id"], summary="did it", run_id=b.show(t["id"])["current_run_id"])
        return t

    def waiting() -> dict[str, Any]:
        parent = b.create("parent", assignee="coder")
        return b.create("waits for its parent", assignee="coder", parents=[parent["id"]])

    def blocked(assignee: str | None = "coder") -> dict[str, Any]:
        t = b.create("blocked", assignee=assignee)
        b.block(t["id"], "waiting for a person")
        return t

    def done() -> dict[str, Any]:
        t = b.create("done", assignee="coder")
        b.complete(t["id"], summary="by hand")
        return t

    def archived() -> dict[str, Any]:
        t = b.create("archived", assignee="coder")
        b.archive(t["id"])
        return t

    return {
        "triage": lambda: b.create("an idea", triage=True),
        "todo (unassigned)": lambda: b.create("nobody's"),
        "todo (assigned, parent pending)": waiting,
        "ready": lambda: b.create("ready", assignee="coder"),
        "running": running,
        "review": review,
        "blocked": blocked,
        "blocked (unassigned)": lambda: blocked(None),
        "done": done,
        "archived": archived,
    }


CASES = ["triage", "todo (unassigned)", "todo (assigned, parent pending)", "ready", "running", "review",
         "blocked", "blocked (unassigned)", "done", "archived"]


@pytest.mark.parametrize("case", CASES)
def test_the_moves_a_task_offers_are_exactly_those_the_kernel_accepts(api_any: Api, case: str) -> None:
    api = api_any  # SQLite and PostgreSQL
    make = makers(api)[case]
    http = api.as_admin
    first = make()
    detail = http.get(f"/api/tasks/{first['id']}").json()
    offered = {m["status"]: m["verb"] for m in detail["moves"]}
    assert all(m["verb"] == states.hand_verb(detail["status"], m["status"]) for m in detail["moves"])
    for target in states.STATUSES:
        if target == detail["status"]:
            continue
        t = make()  # each move on a fresh task in the same state
        before = api.ab.board().show(t["id"])
        resp = http.patch(f"/api/tasks/{t['id']}", json={"status": target, "reason": "a person said so"})
        after = api.ab.board().show(t["id"])
        if target in offered:
            assert resp.status_code == 200, f"{case} → {target} offered ({offered[target]}) but refused: {resp.text}"
            # a reviewed task completed by hand from running goes to review, as its flag says
            assert after["status"] == target, f"{case} → {target} landed in {after['status']}"
            if offered[target] == "reject":  # the reviewed work is rejected: a review verdict, with the reason
                assert after["block_kind"] == "rejected" and after["reviews"][-1]["verdict"] == "rejected"
                assert "a person said so" in (after["reviews"][-1]["summary"] or "")
        else:
            assert resp.status_code in (400, 409), f"{case} → {target} not offered but answered {resp.status_code}"
            assert resp.json()["error"]["message"]
            assert (after["status"], after["updated_at"]) == (before["status"], before["updated_at"])


def test_a_todo_task_never_offers_complete_and_a_blocked_one_offers_unblock(api: Api) -> None:
    m = makers(api)
    http = api.as_admin

    def moves(case: str) -> dict[str, str]:
        t = m[case]()
        return {x["status"]: x["verb"] for x in http.get(f"/api/tasks/{t['id']}").json()["moves"]}

    assert moves("todo (unassigned)") == {"blocked": "block", "archived": "archive"}
    assert moves("todo (assigned, parent pending)") == {"blocked": "block", "archived": "archive"}
    assert moves("blocked") == {"todo": "unblock", "ready": "unblock", "done": "complete", "archived": "archive"}
    assert moves("blocked (unassigned)") == {"todo": "unblock", "done": "complete", "archived": "archive"}
    assert moves("review") == {"todo": "request_changes", "ready": "request_changes", "blocked": "reject",
                               "done": "approve", "archived": "archive"}


def test_the_status_lists_are_the_domains_served_once(api: Api) -> None:
    meta = api.as_admin.get("/api/meta").json()
    assert meta["statuses"] == list(states.STATUSES)
    assert meta["goal_statuses"] == list(states.GOAL_STATUSES)
    assert meta["hand_create_statuses"] == ["triage", "todo", "ready"]
    assert meta["wake_statuses"] == list(states.WAKE_STATUSES) and meta["verdicts"] == list(states.VERDICTS)
    assert meta["moves"]["todo"] == {"ready": "promote", "blocked": "block", "archived": "archive"}
    assert meta["verbs"]["assign"] == ["triage", "todo", "ready", "review", "blocked"]
    schema = json.dumps(TaskPatch.model_json_schema()["properties"]["status"])
    assert json.dumps(list(states.STATUSES)) in schema  # the request models' enum is the same list
    assert api.as_admin.get("/api/goals", params={"status": "finished"}).status_code == 422
    assert api.as_admin.get("/api/goals", params={"status": "verifying"}).status_code == 200
    spec = api.as_admin.get("/api/openapi.json").json()["paths"]["/api/goals"]["get"]["parameters"]
    status = next(p for p in spec if p["name"] == "status")
    assert "active, verifying, done, cancelled" in status["description"]


def test_the_dashboard_repeats_no_status_list() -> None:
    """The dashboard's scripts take the statuses and moves from ``GET /api/meta``: no list of
    task statuses (four or more, as the columns or a move menu would need) is written out in
    them."""
    import re
    from pathlib import Path

    import agentboard

    names = "|".join(states.STATUSES)
    one = rf'"(?:{names})"'
    listed = re.compile(rf"\[\s*{one}(?:\s*,\s*{one}){{3,}}")
    web = Path(agentboard.__file__).parent / "web"
    found = {f.name: m.group(0) for f in web.glob("*.js") for m in [listed.search(f.read_text())] if m}
    assert found == {}


def test_a_move_of_a_blocked_task_to_blocked_with_a_new_reason_is_refused_not_dropped(api_any: Api) -> None:
    c = api_any.as_admin
    tid = api_any.ab.board().create("waits")["id"]
    assert c.patch(f"/api/tasks/{tid}", json={"status": "blocked", "reason": "waiting for legal"}).status_code == 200
    # the same column again (a drag) is a no-op; a new reason is refused as `agentboard block` refuses it
    assert c.patch(f"/api/tasks/{tid}", json={"status": "blocked"}).status_code == 200
    again = c.patch(f"/api/tasks/{tid}", json={"status": "blocked", "reason": "waiting for finance"})
    assert again.status_code == 409 and "blocked already" in again.json()["error"]["message"]
    assert c.get(f"/api/tasks/{tid}").json()["block_reason"] == "waiting for legal"
