"""A board with one of everything the read routes show: tasks in several states, runs, comments,
an attachment, a goal, a budget, a wiki page, a template, a schedule, a subscription, a token."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from agentboard.kernel import profiles, wiki

from .conftest import Api


def fill(api: Api, home: Path) -> dict[str, Any]:
    """Fill ``api``'s default board; returns the ids a route's path needs."""
    b = api.ab.board()
    c = api.as_admin
    profiles.add(api.db, "worker", command="true")
    goal = b.goal("ship it", acceptance=["it ships"], verify=["true"])
    parent = b.create("parent", assignee="worker", body="the plan", skills=["python"])
    child = b.create("child", assignee="worker", parents=[parent["id"]], tenant="acme")
    done = b.create("finished", assignee="worker")
    b.claim(done["id"], host="h1", pid=4242)
    b.heartbeat(done["id"], note="half way")
    b.complete(done["id"], summary="all done", usage={"cost_usd": 0.25, "input_tokens": 10, "output_tokens": 5})
    reviewed = b.create("reviewed", assignee="worker")
    b.claim(reviewed["id"])
    b.request_review(reviewed["id"], summary="please look")
    running = b.create("running", assignee="worker")
    b.claim(running["id"], host="h1", pid=4343)
    blocked = b.create("blocked", assignee="worker", goal=goal["id"])
    b.block(blocked["id"], "needs a key")
    changed = b.create("changed", assignee="worker")
    b.claim(changed["id"])
    b.request_review(changed["id"], summary="first try")
    b.request_changes(changed["id"], "also the docs")
    repo = home.parent / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "a.txt").write_text("one\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    (repo / "a.txt").write_text("one\ntwo\n")
    (repo / "b.txt").write_text("new\n")
    in_git = b.create("in a repository", assignee="worker", workspace=f"dir:{repo}")
    idea = b.create("an idea", triage=True)
    race = b.create("a race", assignee="worker", race=["worker", "worker:other-model"])
    b.create("for someone without a profile", assignee="someone")
    b.comment(done["id"], "a note for @worker", author="alice")
    attachment = b.attach(done["id"], "notes.txt", data=b"hello")
    c.patch(f"/api/tasks/{child['id']}", json={"goal_id": goal["id"]}).raise_for_status()
    c.put("/api/budgets/board/default", json={"max_runs": 10, "max_cost": 5}).raise_for_status()
    wiki.add(api.db, "default", "notes", title="Notes", body="hello", publish=True)
    wiki.add(api.db, "default", "draft", title="A draft", body="soon")
    folder = home / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pair.toml").write_text('description = "two steps"\n[[task]]\nkey = "a"\ntitle = "First {what}"\n'
                                      'assignee = "coder"\n[[task]]\ntitle = "Then {what}"\nparents = ["a"]\n')
    sched = c.post("/api/schedules", json={"cron": "0 3 * * *", "clone": done["id"]})
    sched.raise_for_status()
    sub = c.post("/api/notify/subscriptions", json={"target": "json://127.0.0.1:9/x"})
    sub.raise_for_status()
    c.post("/api/tokens", json={"name": "reader", "role": "viewer"}).raise_for_status()
    c.post("/api/tokens", json={"name": "gone"}).raise_for_status()
    c.delete("/api/tokens/gone").raise_for_status()
    c.post("/api/supervisor/enable", json={"profile": "worker"}).raise_for_status()
    woke = b.create("stuck after the supervisor came", assignee="worker")
    b.block(woke["id"], "the tests fail")
    assert c.get("/api/supervisor/wakes").json(), "a block on a supervised board wakes its supervisor"
    c.post("/api/supervisor/proposals", json={"title": "a proposal", "goal": goal["id"]}).raise_for_status()
    c.post(f"/api/supervisor/tasks/{blocked['id']}/escalate", json={"reason": "a person decides"}).raise_for_status()
    c.put("/api/budgets/profile/worker", json={"max_cost": 2, "per": "day"}).raise_for_status()
    run_id = b.runs(done["id"])[0]["id"]
    return {"slug": "default", "task_id": done["id"], "goal_id": goal["id"], "run_id": run_id,
            "name": "pair", "page": "notes", "attachment_id": attachment["id"], "sub_id": sub.json()["id"],
            "schedule_id": sched.json()["id"], "scope": "board", "ref": "default",
            "parent": parent["id"], "child": child["id"], "review": reviewed["id"], "running": running["id"],
            "blocked": blocked["id"], "changed": changed["id"], "in_git": in_git["id"], "idea": idea["id"],
            "race": race["id"]}


def fill_path(path: str, ids: dict[str, Any]) -> str:
    """``path`` with each ``{name}`` replaced by ``ids[name]``."""
    return re.sub(r"\{(\w+)\}", lambda m: str(ids[m.group(1)]), path)
