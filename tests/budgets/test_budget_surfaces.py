"""The budget verbs, routes and their errors: what a person sees on the command line and over REST."""

from __future__ import annotations

import sqlite3

from api.conftest import start_api
from cli.conftest import assert_one_line_error, task_id
from testenv import copy_template

import agentboard
from agentboard.kernel import budgets


def _budget_rows(cli_home):
    with sqlite3.connect(cli_home / "agentboard.db") as conn:
        return conn.execute("SELECT scope, ref, max_cost, per FROM budgets ORDER BY id").fetchall()


def test_budget_set_show_and_clear_on_the_command_line(cli, cli_home):
    cli("profiles", "add", "w", "--command", "true")
    t = task_id(cli("create", "a", "--assignee", "w", "--json"))
    r = cli("budget", "set", "--board", "default", "--max-cost", "5", "--per", "month")
    assert r.code == 0, r.err
    assert r.out.startswith("board default per month (") and "cost $0.00 / $5.00" in r.out
    # a limit not given keeps its value
    assert cli("budget", "set", "--board", "default", "--max-runs", "3").code == 0
    shown = cli("budget", "show", "--board", "default", "--json").json()
    assert shown[0]["max_cost"] == 5.0 and shown[0]["max_runs"] == 3 and shown[0]["per"] == "month"
    assert cli("budget", "set", "--task", t, "--max-runtime", "2h").code == 0
    lines = cli("budget", "show", "--task", t).lines()
    assert any(line.startswith(f"task {t}: runs") is False and "0s / 2h 0m" in line for line in lines)
    assert any(line.startswith("board default per month") for line in lines)
    r = cli("budget", "clear", "--board", "default")
    assert r.code == 0 and "cleared" in r.out
    assert _budget_rows(cli_home) == [("task", t, None, "")]


def test_bad_budget_input_is_one_line_and_changes_nothing(cli, cli_home):
    cli("profiles", "add", "w", "--command", "true")
    t = task_id(cli("create", "a", "--assignee", "w", "--json"))
    cases = [
        (["budget", "set", "--max-cost", "5"], 2, "say whose budget"),
        (["budget", "set", "--board", "default", "--task", t, "--max-cost", "5"], 2, "give one scope"),
        (["budget", "set", "--board", "default"], 2, "give at least one limit"),
        (["budget", "set", "--task", t, "--max-cost", "5", "--per", "day"], 2, "has no window"),
        (["budget", "set", "--board", "default", "--max-runtime", "soon"], 2, "invalid duration"),
        (["budget", "set", "--board", "default", "--max-cost", "-1"], 2, "must be 0 or more"),
        (["budget", "set", "--profile", "ghost", "--max-cost", "1"], 3, "no profile 'ghost'"),
        (["budget", "set", "--task", "t_00000000", "--max-cost", "1"], 3, "no task t_00000000"),
        (["budget", "clear", "--board", "default"], 3, "no budget on board default"),
    ]
    for args, code, needle in cases:
        assert_one_line_error(cli(*args), code, needle)
    assert _budget_rows(cli_home) == []


def test_heartbeat_tells_a_worker_of_a_spent_budget_to_stop(cli):
    cli("profiles", "add", "w", "--command", "true")
    t = task_id(cli("create", "a", "--assignee", "w", "--json"))
    assert cli("claim", t).code == 0
    assert cli("budget", "set", "--task", t, "--max-runs", "0").code == 0
    r = cli("heartbeat", t)
    assert r.code == 0 and r.err.strip() == f"STOP: the task {t} budget is spent: runs 0 runs of 0 runs; stop now"
    body = cli("heartbeat", t, "--json").json()
    assert body["stop"] is True
    assert cli("budget", "clear", "--task", t).code == 0
    assert "stop" not in cli("heartbeat", t, "--json").json()


def test_budget_routes_set_show_and_clear_and_need_an_admin(home, sqlite_template):
    with agentboard.connect(str(copy_template(sqlite_template, home))) as ab, start_api(ab) as api:
        ab.add_profile("w", command="true")
        t = ab.board().create("a", assignee="w")
        admin = api.as_admin
        r = admin.put("/api/budgets/board/default", json={"max_cost": 3, "per": "day"})
        assert r.status_code == 200 and r.json()["lines"]["cost"]["text"] == "$0.00 / $3.00"
        budgets.record_llm_usage(ab.db, "default", t["id"], {"use": "specifier", "cost_usd": 2.5})
        rows = admin.get("/api/budgets", params={"board": "default"}).json()
        assert rows[0]["warning"] is True and rows[0]["spent"]["cost"] == 2.5
        mine = admin.get("/api/budgets", params={"scope": "task", "ref": t["id"]}).json()
        assert [b["scope"] for b in mine] == ["board"]
        member = api.client(api.token("m", role="member"))
        r = member.put("/api/budgets/board/default", json={"max_cost": 100})
        assert r.status_code == 403
        assert admin.put("/api/budgets/board/default", json={"max_cost": "lots"}).status_code == 422
        assert admin.put("/api/budgets/galaxy/x", json={"max_cost": 1}).status_code == 422
        assert admin.put("/api/budgets/board/nosuch", json={"max_cost": 1}).status_code == 404
        r = admin.delete("/api/budgets/board/default")
        assert r.status_code == 200 and r.json()["cleared"] is True
        assert admin.get("/api/budgets", params={"board": "default"}).json() == []


def test_diagnostics_promote_and_unguard_routes(home, sqlite_template):
    with agentboard.connect(str(copy_template(sqlite_template, home))) as ab, start_api(ab) as api:
        ab.add_profile("w", command="true")
        b = ab.board()
        parent = b.create("parent", assignee="w")
        child = b.create("child", assignee="w", parents=[parent["id"]])
        ghost = b.create("ghost's", assignee="ghost")
        admin = api.as_admin
        found = admin.get("/api/diagnostics", params={"board": "default"}).json()
        (f,) = [x for x in found if x["kind"] == "no_profile"]
        assert f["task_id"] == ghost["id"]
        # the finding's action is a real route that clears it
        r = admin.request(f["action"]["method"], f["action"]["path"], json=f["action"]["body"])
        assert r.status_code == 200
        assert not [x for x in admin.get("/api/diagnostics", params={"task": ghost["id"]}).json()
                    if x["kind"] == "no_profile"]
        r = admin.post(f"/api/tasks/{child['id']}/promote", json={})
        assert r.status_code == 409 and "--force" in r.json()["error"]["message"]
        r = admin.post(f"/api/tasks/{child['id']}/promote", json={"force": True})
        assert r.status_code == 200 and r.json()["status"] == "ready"
        ev = [e for e in b.events(0, limit=1000) if e["kind"] == "promoted" and e["task_id"] == child["id"]]
        assert ev[-1]["payload"]["override"] is True and ev[-1]["payload"]["pending"] == [parent["id"]]
        r = admin.post(f"/api/tasks/{parent['id']}/unguard")
        assert r.status_code == 200 and r.json()["last_outcome"] == "unguarded"
