"""GET /api/insights over HTTP, on both backends: the same numbers as the kernel's, validated
by the response model; bad input is a JSON error."""

from __future__ import annotations

from typing import Any

from .conftest import Api
from .test_routes import err


def _history(api: Api) -> None:
    b = api.ab.board()
    api.ab.add_profile("alpha", command="true", model_name="m-a")
    t = b.create("one", assignee="alpha")["id"]
    r = b.claim(t)["run_id"]
    b.complete(t, run_id=r, usage={"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.3})
    t = b.create("two", assignee="alpha")["id"]
    r = b.claim(t)["run_id"]
    b.fail(t, "crashed", run_id=r, error="boom")


def test_insights_per_profile_model_and_board_over_http(api_any: Api) -> None:
    _history(api_any)
    c = api_any.as_admin
    got = c.get("/api/insights", params={"by": "profile"})
    assert got.status_code == 200, got.text
    alpha = {g["key"]: g for g in got.json()["groups"]}["alpha"]
    assert (alpha["runs"], alpha["tasks_done"], alpha["first_attempt_success_rate"]) == (2, 1, 0.5)
    assert alpha["cost_per_done_task"] == 0.3 and alpha["failures"] == {"crashed": 1}
    assert alpha["races_entered"] == 0
    models = c.get("/api/insights", params={"by": "model", "since": "7d"}).json()
    assert [g["key"] for g in models["groups"]] == ["m-a"] and models["since_days"] == 7
    board: dict[str, Any] = c.get("/api/insights", params={"by": "board", "since": "2d"}).json()
    assert board["groups"] == [] and [d["tasks_done"] for d in board["timeline"]["days"]] == [0, 1]
    assert board["timeline"]["days"][-1]["work_in_progress"] == 1


def _done_per_profile(api: Api) -> dict[str, int]:
    got = api.as_admin.get("/api/insights", params={"by": "profile"})
    assert got.status_code == 200, got.text
    return {g["key"]: g["tasks_done"] for g in got.json()["groups"]}


def _done_today(api: Api) -> int:
    days = api.as_admin.get("/api/insights", params={"by": "board", "since": "1d"}).json()["timeline"]["days"]
    return int(days[-1]["tasks_done"])


def test_a_task_reopened_and_done_again_counts_once_in_the_insights(api_any: Api) -> None:
    b = api_any.ab.board()
    api_any.ab.add_profile("alpha", command="true", model_name="m-a")
    worked = b.create("worked", assignee="alpha")["id"]
    b.complete(worked, run_id=b.claim(worked)["run_id"])
    by_hand = b.create("by hand", assignee="alpha")["id"]  # closed by a person: nobody's run
    b.complete(by_hand)
    assert _done_per_profile(api_any) == {"alpha": 1, "": 1} and _done_today(api_any) == 2

    # reopened: no longer done, in every view
    b.reopen(worked, reason="not quite")
    b.reopen(by_hand)
    assert _done_per_profile(api_any).get("alpha", 0) == 0 and _done_today(api_any) == 0

    # done again: once each, the worker's task with both its runs
    b.complete(worked, run_id=b.claim(worked)["run_id"])
    b.complete(by_hand)
    assert _done_per_profile(api_any) == {"alpha": 1, "": 1} and _done_today(api_any) == 2
    alpha = {g["key"]: g for g in api_any.as_admin.get("/api/insights", params={"by": "profile"}).json()["groups"]}
    assert alpha["alpha"]["runs"] == 2

    # archived from done and restored: no longer done; done again: once
    b.archive(by_hand)
    assert _done_today(api_any) == 2  # an archived done task still counts
    b.restore(by_hand)
    assert _done_per_profile(api_any).get("", 0) == 0 and _done_today(api_any) == 1
    b.complete(by_hand)
    assert _done_per_profile(api_any) == {"alpha": 1, "": 1} and _done_today(api_any) == 2


def test_bad_insight_queries_are_json_errors(api: Api) -> None:
    c = api.as_admin
    assert "profile" in err(c.get("/api/insights", params={"by": "owner"}), 422, "invalid_request")
    assert "7d" in err(c.get("/api/insights", params={"since": "soon"}), 400, "invalid_input")
    err(c.get("/api/insights", params={"board": "nope"}), 404)
