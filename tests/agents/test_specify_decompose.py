"""Specify, decompose and auto mode against a real OpenAI-compatible server on loopback, through
the CLI (a real process), REST (a real server), MCP (stdio) and the dispatcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakes.fake_openai import FakeOpenAI
from testenv import wait_for

import agentboard
from agentboard.dispatch.dispatcher import Dispatcher
from agentboard.kernel import queries

SPEC = {"title": "Add a dark mode to the settings page", "goal": "People can switch the UI to dark colours.",
        "approach": "CSS variables for the palette; a toggle stored per user.",
        "acceptance_criteria": ["the toggle switches the palette", "the choice survives a reload"],
        "out_of_scope": ["custom themes"]}


def fanout(*tasks: dict[str, Any]) -> str:
    """A fan-out answer wrapped in prose and a code fence, as models often answer."""
    return "Here is the plan:\n```json\n" + json.dumps({"fanout": True, "tasks": list(tasks)}) + "\n```\nGood luck!"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentboard", *args], capture_output=True, text=True,
                          timeout=60, env=env or dict(os.environ))


@pytest.fixture
def ab(fake_llm: FakeOpenAI, home: Path) -> Any:
    """A client on a fresh home whose settings point at the fake LLM, with a small roster."""
    client = agentboard.connect(str(home))
    client.add_profile("coder", command="true", description="writes and tests Python code")
    client.add_profile("writer", command="true", description="writes documentation")
    yield client
    client.close()


def events(ab: Any, task_id: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in ab.board().show(task_id)["events"] if e["kind"] == kind]


# -- specify --------------------------------------------------------------------------------------


def test_specify_through_the_cli_rewrites_the_one_liner_and_releases_it(ab: Any, fake_llm: FakeOpenAI) -> None:
    t = ab.board().create("dark mode pls", triage=True, assignee="coder")
    fake_llm.script("Sure.\n```json\n" + json.dumps(SPEC) + "\n```")
    out = cli("specify", t["id"])
    assert out.returncode == 0, out.stderr
    assert "specified as 'Add a dark mode to the settings page', now ready" in out.stdout
    task = ab.board().show(t["id"])
    assert task["status"] == "ready" and task["title"] == SPEC["title"]
    for heading in ("## Goal", "## Approach", "## Acceptance criteria", "## Out of scope"):
        assert heading in task["body"]
    assert "- [ ] the choice survives a reload" in task["body"]
    assert events(ab, t["id"], "specified")[0]["payload"]["model"] == "fake-model"
    used = events(ab, t["id"], "llm_used")[0]["payload"]
    assert used["use"] == "specifier" and used["input_tokens"] > 0
    assert "dark mode pls" in fake_llm.requests[0]["messages"][-1]["content"]


def test_specify_refuses_a_task_that_is_not_in_triage_without_asking(ab: Any, fake_llm: FakeOpenAI) -> None:
    t = ab.board().create("clear already", assignee="coder")
    out = cli("specify", t["id"])
    assert out.returncode == 2 and "only a triage task can be specified" in out.stderr
    assert fake_llm.requests == []


def test_specify_and_decompose_ask_nothing_once_a_budget_covering_the_task_spent_its_tokens(
        ab: Any, fake_llm: FakeOpenAI) -> None:
    from agentboard.kernel import budgets

    g = ab.board().goal("ship it")["id"]
    t = ab.board().create("dark mode pls", triage=True, assignee="coder", goal=g)
    budgets.set_budget(ab.db, "goal", g, budgets.Limits.build(max_tokens=100))
    budgets.record_llm_usage(ab.db, "default", t["id"], {"use": "specifier", "input_tokens": 150})
    for verb in ("specify", "decompose"):
        out = cli(verb, t["id"])
        assert out.returncode == 4, out.stderr
        assert f"the goal {g} budget is spent" in out.stderr and "the LLM is not asked" in out.stderr
    assert fake_llm.requests == [] and ab.board().show(t["id"])["status"] == "triage"


# -- decompose ------------------------------------------------------------------------------------


def test_decompose_through_the_cli_creates_the_whole_graph_and_the_root_waits_for_it(
        ab: Any, fake_llm: FakeOpenAI) -> None:
    root = ab.board().create("ship the blog", triage=True, assignee="writer", tenant="acme", priority=3)
    fake_llm.script(fanout(
        {"title": "Design the post layout", "body": "mockups", "assignee": "writer"},
        {"title": "Build the blog engine", "assignee": "coder", "parents": [0]},
        {"title": "Test the blog", "assignee": "nobody-we-know", "parents": [1]},
    ))
    out = cli("decompose", root["id"], "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["ok"] and data["fanout"] is True
    design, build, test = (c["id"] for c in data["children"])
    board = ab.board()
    assert board.show(design)["status"] == "ready" and board.show(design)["tenant"] == "acme"
    assert [p["id"] for p in board.show(build)["parents"]] == [design]
    assert board.show(build)["status"] == "todo"
    # an assignee outside the roster falls back to the default assignee (none here)
    assert board.show(test)["assignee"] is None
    shown = board.show(root["id"])
    assert shown["status"] == "todo"
    assert {p["id"] for p in shown["parents"]} == {design, build, test}
    assert events(ab, root["id"], "decomposed")[0]["payload"]["children"] == [design, build, test]
    prompt = fake_llm.requests[0]["messages"][-1]["content"]
    assert "coder: writes and tests Python code" in prompt and "writer: writes documentation" in prompt


def test_fanout_false_specifies_the_task_instead(ab: Any, fake_llm: FakeOpenAI) -> None:
    t = ab.board().create("fix the typo in the README", triage=True)
    fake_llm.script(json.dumps({"fanout": False, "spec": {**SPEC, "title": "Fix the README typo"}}))
    out = cli("decompose", t["id"])
    assert out.returncode == 0, out.stderr
    task = ab.board().show(t["id"])
    assert task["title"] == "Fix the README typo" and task["status"] == "todo" and task["children"] == []
    assert events(ab, t["id"], "specified")


def test_invalid_json_leaves_the_task_in_triage_with_a_comment_saying_what_came_back(
        ab: Any, fake_llm: FakeOpenAI) -> None:
    t = ab.board().create("a vague idea", triage=True)
    before = len(ab.board().list(limit=1000))
    fake_llm.script("I would rather not split this, it is fine as it is.")
    out = cli("decompose", t["id"])
    assert out.returncode == 1
    assert "the LLM answered no JSON" in out.stderr
    task = ab.board().show(t["id"])
    assert task["status"] == "triage" and task["title"] == "a vague idea"
    assert len(ab.board().list(limit=1000)) == before
    assert "I would rather not split this" in task["comments"][-1]["body"]
    failed = events(ab, t["id"], "decompose_failed")[0]["payload"]
    assert failed["attempts"] == 1 and failed["retry_at"] > time.time()


def test_a_fanout_with_a_parent_cycle_writes_nothing(ab: Any, fake_llm: FakeOpenAI) -> None:
    t = ab.board().create("circular plan", triage=True)
    before = len(ab.board().list(limit=1000))
    fake_llm.script(fanout({"title": "a", "parents": [1]}, {"title": "b", "parents": [0]}))
    assert cli("decompose", t["id"]).returncode == 1
    assert ab.board().show(t["id"])["status"] == "triage"
    assert len(ab.board().list(limit=1000)) == before
    assert "cycle" in ab.board().show(t["id"])["comments"][-1]["body"]


def test_decompose_all_of_a_tenant(ab: Any, fake_llm: FakeOpenAI) -> None:
    mine = ab.board().create("idea for acme", triage=True, tenant="acme")
    other = ab.board().create("idea for globex", triage=True, tenant="globex")
    fake_llm.script(fanout({"title": "one"}, {"title": "two", "parents": [0]}))
    out = cli("decompose", "--all", "--tenant", "acme")
    assert out.returncode == 0, out.stderr
    assert ab.board().show(mine["id"])["status"] == "todo"
    assert ab.board().show(other["id"])["status"] == "triage"
    assert len(fake_llm.requests) == 1


# -- REST and MCP ---------------------------------------------------------------------------------


def test_specify_and_decompose_through_rest(ab: Any, fake_llm: FakeOpenAI) -> None:
    from api.conftest import start_api

    a, b = ab.board().create("idea a", triage=True), ab.board().create("idea b", triage=True)
    fake_llm.script(json.dumps(SPEC), fanout({"title": "x", "assignee": "coder"}, {"title": "y", "parents": [0]}))
    with start_api(ab) as api:
        c = api.as_admin
        spec = c.post(f"/api/tasks/{a['id']}/specify").json()
        assert spec["ok"] and spec["task"]["title"] == SPEC["title"]
        dec = c.post(f"/api/tasks/{b['id']}/decompose").json()
        assert dec["ok"] and [x["title"] for x in dec["children"]] == ["x", "y"]
        bad = ab.board().create("idea c", triage=True)
        fake_llm.script("no idea")
        bulk = c.post("/api/tasks/decompose", json={"ids": [bad["id"]]}).json()
        assert bulk["failed"] == 1 and "no JSON" in bulk["results"][0]["reason"]
        cfg = c.get("/api/config").json()["llm"]
        assert cfg["available"] is True and "fake-model" in cfg["reason"]
        view = c.get("/api/board").json()
        triage = next(col for col in view["columns"] if col["status"] == "triage")
        card = next(x for x in triage["tasks"] if x["id"] == bad["id"])
        assert card["decompose_backoff"]["attempts"] == 1


def test_an_orchestrator_decomposes_through_mcp(ab: Any, fake_llm: FakeOpenAI) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    ab.add_profile("lead", command="true", orchestrator=True)
    idea = ab.board().create("launch plan", triage=True)
    fake_llm.script(fanout({"title": "announce", "assignee": "writer"}, {"title": "deploy", "assignee": "coder"}))
    env = {"AGENTBOARD_HOME": str(ab.settings.home), "AGENTBOARD_BOARD": "default", "AGENTBOARD_PROFILE": "lead",
           **{k: os.environ[k] for k in ("AGENTBOARD_LLM_BASE_URL", "AGENTBOARD_LLM_MODEL", "AGENTBOARD_LLM_API_KEY")}}
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentboard", "mcp"], env=env)

    async def main() -> Any:
        async with Client(params, read_timeout_seconds=60) as client:
            return await client.call_tool("kanban_decompose", {"task_id": idea["id"]})

    result = anyio.run(main)
    data = result.structured_content or json.loads(result.content[0].text)
    assert data["ok"] and len(data["children"]) == 2
    assert ab.board().show(idea["id"])["status"] == "todo"


# -- unavailable ----------------------------------------------------------------------------------


def test_with_nothing_configured_every_surface_says_unavailable_and_asks_nothing(home: Path) -> None:
    from api.conftest import start_api

    with FakeOpenAI() as server, agentboard.connect(str(home)) as client:
        t = client.board().create("idea", triage=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_LLM") and k != "OPENAI_API_KEY"}
        for verb in ("specify", "decompose"):
            out = cli(verb, t["id"], env=env)
            assert out.returncode == 6 and out.stderr.startswith("error: unavailable: ")
        with start_api(client) as api:
            for verb in ("specify", "decompose"):
                r = api.as_admin.post(f"/api/tasks/{t['id']}/{verb}").json()
                assert r["ok"] is False and r["reason"].startswith("unavailable: ")
            cfg = api.as_admin.get("/api/config").json()["llm"]
            assert cfg["available"] is False and cfg["reason"]
        assert client.board().show(t["id"])["status"] == "triage"
        assert server.requests == []


# -- invented children ----------------------------------------------------------------------------


def test_children_a_run_did_not_create_are_refused_with_an_event(ab: Any) -> None:
    from agentboard.kernel import runs, tasks

    board = ab.board()
    other = board.create("someone else's task")
    t = board.create("orchestrate", assignee="coder")
    run = board.claim(t["id"])
    own = tasks.create(ab.db, "default", "a child it made", actor=f"run:{run['run_id']}")
    runs.complete(ab.db, "default", t["id"], summary="made children", run_id=run["run_id"],
                  metadata={"created_cards": [own["id"], "t_deadbeef", other["id"]], "note": "kept"})
    refused = events(ab, t["id"], "children_refused")[0]["payload"]
    assert set(refused["refused"]) == {"t_deadbeef", other["id"]}
    assert refused["refused"]["t_deadbeef"] == "no such task"
    assert refused["accepted"] == [own["id"]]
    stored = queries.runs(ab.db, "default", t["id"])[-1]["metadata"]
    assert stored == {"created_cards": [own["id"]], "note": "kept"}


# -- auto mode ------------------------------------------------------------------------------------


def _auto(ab: Any, per_pass: int) -> Dispatcher:
    ab.settings.auto_decompose = True
    ab.settings.auto_decompose_per_pass = per_pass
    return Dispatcher(ab.db, ab.settings)


def test_auto_mode_decomposes_exactly_n_triage_tasks_per_pass(ab: Any, fake_llm: FakeOpenAI) -> None:
    ideas = [ab.board().create(f"idea {i}", triage=True)["id"] for i in range(5)]
    fake_llm.default = json.dumps({"fanout": True, "tasks": [{"title": "part one"}, {"title": "part two"}]})
    d = _auto(ab, 2)
    try:
        d.run_pass()
        assert d.planner.auto.wait_idle(30)
        assert len(fake_llm.requests) == 2
        assert sum(ab.board().show(i)["status"] == "todo" for i in ideas) == 2
        d.run_pass()
        assert d.planner.auto.wait_idle(30)
        assert len(fake_llm.requests) == 4
    finally:
        d.stop()


def test_manual_mode_never_calls_the_llm(ab: Any, fake_llm: FakeOpenAI) -> None:
    ab.board().create("idea", triage=True)
    d = Dispatcher(ab.db, ab.settings)
    d.run_pass()
    assert d.planner.auto.wait_idle(5)
    assert fake_llm.requests == []


def test_a_failed_auto_attempt_backs_off_instead_of_retrying_every_pass(ab: Any, fake_llm: FakeOpenAI) -> None:
    t = ab.board().create("idea", triage=True)
    fake_llm.default = "not json at all"
    d = _auto(ab, 3)
    try:
        for _ in range(3):
            d.run_pass()
            assert d.planner.auto.wait_idle(30)
        assert len(fake_llm.requests) == 1
        assert len(events(ab, t["id"], "decompose_failed")) == 1
    finally:
        d.stop()


def test_a_hanging_llm_never_delays_a_spawn(ab: Any, fake_llm: FakeOpenAI) -> None:
    ideas = [ab.board().create(f"idea {i}", triage=True) for i in range(3)]
    fake_llm.default = {"hold": True, "text": "{}"}  # the LLM answers only once the test lets it
    ab.add_profile("sleeper", command="sleep 1")
    ready = ab.board().create("ready work", assignee="sleeper")
    d = _auto(ab, 3)
    try:
        report = d.run_pass()  # a pass that waited for the LLM would never get here
        assert ready["id"] in [s["task"] for s in report["spawned"]]
        wait_for(lambda: len(fake_llm.requests) == 3, what="the three decompositions to be asked")
        assert [ab.board().show(t["id"])["status"] for t in ideas] == ["triage"] * 3  # none answered yet
    finally:
        fake_llm.release()
        d.stop(timeout=30)
