"""`agentboard mcp` driven over stdio by the official MCP client.

Each test runs twice: started by a person on the home (the tools call the kernel), and as the
dispatcher starts it for a worker, with the API's URL and a run token and no home (the tools call
the API).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

Env = Callable[..., dict[str, str]]


@pytest.fixture(params=["home", "api"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def _env(ab: Any, mode: str) -> Iterator[Env]:
    """``_env(task_id, run_id, profile=..., **extra)``: the MCP server's environment."""
    api = None
    if mode == "api":
        from agentboard.api.serve import WorkerAPI, run_tokens

        api = WorkerAPI(ab.settings, ab.db).start()
        tokens = run_tokens(ab.db)

    def make(task_id: str | None, run_id: int | None, profile: str = "worker-a", **extra: str) -> dict[str, str]:
        env = {"AGENTBOARD_BOARD": "default", "AGENTBOARD_PROFILE": profile}
        if api is not None:
            assert task_id and run_id is not None
            env.update(AGENTBOARD_API_URL=api.url, AGENTBOARD_TOKEN=tokens("default", task_id, run_id))
        else:
            env["AGENTBOARD_HOME"] = str(ab.settings.home)
            if ab.settings.database_url:
                env["AGENTBOARD_DATABASE_URL"] = ab.settings.database_url
        if task_id:
            env["AGENTBOARD_TASK"] = task_id
        if run_id is not None:
            env["AGENTBOARD_RUN_ID"] = str(run_id)
        env.update(extra)
        return env

    yield make
    if api is not None:
        api.stop()


def _session(env: dict[str, str], calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[Any]]:
    """Start `agentboard mcp`, list its tools and make ``calls`` in order."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentboard", "mcp"], env=env)

    async def main() -> tuple[list[str], list[Any]]:
        async with Client(params, read_timeout_seconds=60) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            results = [await client.call_tool(name, args) for name, args in calls]
            return tools, results

    return anyio.run(main)


def _data(result: Any) -> dict[str, Any]:
    return result.structured_content or json.loads(result.content[0].text)


def test_show_heartbeat_complete_over_stdio(ab: Any, board: Any, _env: Env, mode: str) -> None:
    parent = board.create("design the parser", assignee="worker-a")
    run = board.claim(parent["id"])
    board.complete(parent["id"], summary="grammar in docs/grammar.md", run_id=run["run_id"])
    t = board.create("implement the parser", body="Follow the grammar.", assignee="worker-a", parents=[parent["id"]])
    run = board.claim(t["id"])
    tools, (show, hb, empty, done) = _session(_env(t["id"], run["run_id"]), [
        ("kanban_show", {}),
        ("kanban_heartbeat", {"note": "halfway"}),
        ("kanban_complete", {"summary": "   "}),
        ("kanban_complete", {"summary": "parser implemented", "metadata": {"files": ["parser.py"]}}),
    ])
    assert {"kanban_show", "kanban_complete", "kanban_block", "kanban_heartbeat", "kanban_comment",
            "kanban_request_review", "kanban_attach", "kanban_propose"} <= set(tools)
    assert "kanban_create" not in tools and "kanban_list" not in tools  # not an orchestrator
    shown = _data(show)
    assert not show.is_error and shown["id"] == t["id"]
    assert "grammar in docs/grammar.md" in shown["worker_context"]  # the parent's hand-off
    assert not hb.is_error
    assert empty.is_error and _data(empty)["error"] == "invalid_input" and "summary is empty" in _data(empty)["message"]
    assert not done.is_error and _data(done)["status"] == "done"
    detail = board.show(t["id"])
    assert detail["status"] == "done"
    assert detail["runs"][-1]["summary"] == "parser implemented"
    assert detail["runs"][-1]["metadata"] == {"files": ["parser.py"]}
    assert any(e["kind"] == "heartbeat" and e["payload"].get("note") == "halfway" for e in detail["events"])


def test_stale_run_is_refused(ab: Any, board: Any, _env: Env, mode: str) -> None:
    t = board.create("long job", assignee="worker-a")
    old = board.claim(t["id"])
    late_worker = _env(t["id"], old["run_id"])  # (its run token is issued while the run is open)
    board.reclaim(t["id"], reason="host lost")
    new = board.claim(t["id"])
    _, (late_hb, late_done) = _session(late_worker, [
        ("kanban_heartbeat", {}),
        ("kanban_complete", {"summary": "finished late"}),
    ])
    for res in (late_hb, late_done):
        assert res.is_error
        assert _data(res)["error"] == "stale_run"
        assert f"run {old['run_id']} is no longer current" in _data(res)["message"]
    detail = board.show(t["id"])
    assert detail["status"] == "running" and detail["current_run_id"] == new["run_id"]
    assert all(r["summary"] != "finished late" for r in detail["runs"])


def test_orchestrator_tools_only_for_orchestrators(ab: Any, board: Any, _env: Env, mode: str) -> None:
    ab.add_profile("lead", command="true", orchestrator=True)
    t = board.create("plan the release", assignee="lead")
    run = board.claim(t["id"])
    tools, (created, listed, bad) = _session(_env(t["id"], run["run_id"], profile="lead"), [
        ("kanban_create", {"title": "write notes", "assignee": "writer"}),
        ("kanban_list", {"status": "ready"}),
        ("kanban_link", {"parent_id": t["id"], "child_id": t["id"]}),
    ])
    assert {"kanban_list", "kanban_create", "kanban_link", "kanban_unblock"} <= set(tools)
    child = _data(created)
    assert child["status"] == "ready" and child["assignee"] == "writer"
    assert child["id"] in [x["id"] for x in _data(listed)["tasks"]]
    assert bad.is_error and _data(bad)["error"] in ("invalid_input", "conflict")


def test_a_worker_comments_only_on_its_own_task_and_an_orchestrator_creates_within_its_limit_either_way(
        ab: Any, board: Any, _env: Env, mode: str) -> None:
    """The same rules whether the MCP server calls the kernel on the home or the API."""
    ab.settings.run_create_limit = 1
    ab.add_profile("lead", command="true", orchestrator=True)
    neighbour = board.create("write the changelog", assignee="worker-b")
    t = board.create("fix login", assignee="worker-a")
    run = board.claim(t["id"])
    _, (other, own) = _session(_env(t["id"], run["run_id"]), [
        ("kanban_comment", {"task_id": neighbour["id"], "body": "I will do it instead"}),
        ("kanban_comment", {"task_id": t["id"], "body": "halfway"}),
    ])
    assert other.is_error and _data(other)["error"] == "forbidden", _data(other)
    assert not own.is_error and board.show(neighbour["id"])["comments"] == []

    lead = board.create("plan the release", assignee="lead")
    lead_run = board.claim(lead["id"])
    env = _env(lead["id"], lead_run["run_id"], profile="lead", AGENTBOARD_RUN_CREATE_LIMIT="1")
    _, (first, second) = _session(env, [
        ("kanban_create", {"title": "part 1", "assignee": "writer"}),
        ("kanban_create", {"title": "part 2", "assignee": "writer"}),
    ])
    assert not first.is_error
    assert second.is_error and _data(second)["error"] == "too_many" and "run_create_limit = 1" in _data(second)["message"]
    assert [x["title"] for x in board.list() if x["title"].startswith("part")] == ["part 1"]


def test_propose_lands_in_triage_with_the_goal(ab: Any, board: Any, tmp_path: Path, _env: Env, mode: str) -> None:
    goal = board.goal("ship v2")
    t = board.create("fix login", assignee="worker-a", goal=goal["id"])
    run = board.claim(t["id"])
    (tmp_path / "notes.txt").write_text("evidence")
    env = _env(t["id"], run["run_id"], AGENTBOARD_WORKSPACE=str(tmp_path))
    _, (proposed, attached, escaped) = _session(env, [
        ("kanban_propose", {"title": "rate-limit the login endpoint"}),
        ("kanban_attach", {"path": "notes.txt"}),
        ("kanban_attach", {"path": "../../etc/passwd"}),
    ])
    p = _data(proposed)
    assert p["status"] == "triage" and p["goal_id"] == goal["id"]
    assert not attached.is_error and [a["name"] for a in board.show(t["id"])["attachments"]] == ["notes.txt"]
    assert escaped.is_error and "inside the workspace" in _data(escaped)["message"]


def test_review_through_mcp_says_review_is_unavailable(ab: Any, board: Any, _env: Env, mode: str) -> None:
    t = board.create("draft the announcement", assignee="worker-a", review=True)
    run = board.claim(t["id"])
    _, (done,) = _session(_env(t["id"], run["run_id"]), [("kanban_complete", {"summary": "drafted"})])
    assert _data(done)["status"] == "review" and _data(done)["review"] == "unavailable"
    kinds = [e["kind"] for e in board.events(task_id=t["id"])]
    assert kinds.count("review_unavailable") == 1 and "approved" not in kinds


def test_task_ids_are_found_on_any_board_but_a_worker_acts_only_on_its_own(ab: Any, board: Any, _env: Env, mode: str) -> None:
    ab.create_board("ops")
    elsewhere = ab.board("ops").create("rotate the keys", assignee="worker-b")
    neighbour = board.create("write the changelog", assignee="worker-b")
    t = board.create("fix login", assignee="worker-a")
    run = board.claim(t["id"])
    _, (foreign_show, foreign_comment, missing, near) = _session(_env(t["id"], run["run_id"]), [
        ("kanban_show", {"task_id": elsewhere["id"]}),
        ("kanban_comment", {"task_id": elsewhere["id"], "body": "I can help"}),
        ("kanban_show", {"task_id": "t_00000000"}),
        ("kanban_show", {"task_id": neighbour["id"]}),
    ])
    for res in (foreign_show, foreign_comment):
        if mode == "home":  # a person's MCP server on the home says where the task lives
            assert res.is_error and _data(res)["error"] == "forbidden"
            assert f"task {elsewhere['id']} is on board 'ops'" in _data(res)["message"]
        elif res is foreign_show:  # through the API: the same answer as for no task at all
            assert res.is_error and _data(res)["error"] == "not_found"
            assert _data(res)["message"] == f"no task {elsewhere['id']}"
        else:  # and a run token changes nothing but its own task, wherever the other lives
            assert res.is_error and _data(res)["error"] == "forbidden"
            assert "may only change its own task" in _data(res)["message"]
            assert "ops" not in _data(res)["message"]
    assert ab.board("ops").show(elsewhere["id"])["comments"] == []
    assert missing.is_error and _data(missing)["error"] == "not_found"
    assert not near.is_error and _data(near)["id"] == neighbour["id"]
    assert _data(near)["worker_context"].startswith(f"# Task {neighbour['id']}: write the changelog")


def test_an_orchestrator_creates_a_race_reads_its_attempts_and_may_pick_only_a_passed_one(
        ab: Any, board: Any, _env: Env, mode: str) -> None:
    ab.add_profile("lead", command="true", orchestrator=True)
    ab.add_profile("writer", command="true")
    t = board.create("plan the release", assignee="lead")
    run = board.claim(t["id"])
    created_call = ("kanban_create", {"title": "write notes", "assignee": "writer", "race": ["writer", "writer:m2"],
                                      "race_until": "first-pass"})
    _, (created,) = _session(_env(t["id"], run["run_id"], profile="lead"), [created_call])
    race = _data(created)
    assert race["race_until"] == "first-pass"
    assert [(a["n"], a["profile"], a["model"]) for a in race["attempts"]] == [(1, "writer", None), (2, "writer", "m2")]
    tools, (shown, pick) = _session(_env(t["id"], run["run_id"], profile="lead"), [
        ("kanban_attempts", {"task_id": race["id"]}),
        ("kanban_pick", {"task_id": race["id"], "n": 1}),
    ])
    assert {"kanban_attempts", "kanban_pick"} <= set(tools)
    assert [a["state"] for a in _data(shown)["attempts"]] == ["pending", "pending"]
    assert pick.is_error and _data(pick)["error"] == "conflict"


def test_an_empty_block_reason_is_refused_in_the_words_of_the_cli_and_rest(ab: Any, board: Any, _env: Env) -> None:
    t = board.create("needs input", assignee="worker-a")
    run = board.claim(t["id"])
    _, (empty,) = _session(_env(t["id"], run["run_id"]), [("kanban_block", {"reason": "  "})])
    assert empty.is_error
    assert _data(empty) == {"error": "invalid_input",
                            "message": "a block needs a reason: say what the task is waiting for"}
    assert board.show(t["id"])["status"] == "running"
