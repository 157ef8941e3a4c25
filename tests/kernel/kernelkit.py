"""Helpers for the kernel tests: reach any status through real verbs, snapshot rows, check invariants."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentboard.domain import states
from agentboard.kernel import runs, tasks
from agentboard.store.engine import Database

ASSIGNEE = "worker"


def reach(db: Database, board: str, status: str, *, title: str = "subject", **create: Any) -> str:
    """Create a task and drive it into ``status`` with the verbs a user would use."""
    create.setdefault("assignee", None if status == states.TODO else ASSIGNEE)
    if status == states.REVIEW:
        create["review"] = True
    task = tasks.create(db, board, title, triage=status == states.TRIAGE, **create)
    tid = task["id"]
    if status in (states.TRIAGE, states.TODO, states.READY):
        pass
    elif status == states.RUNNING:
        runs.claim(db, board, tid)
    elif status == states.REVIEW:
        run = runs.claim(db, board, tid)
        runs.complete(db, board, tid, summary="first pass", run_id=run["run_id"])
    elif status == states.BLOCKED:
        tasks.block(db, board, tid, "waiting for a person")
    elif status == states.DONE:
        run = runs.claim(db, board, tid)
        runs.complete(db, board, tid, summary="finished", run_id=run["run_id"])
    elif status == states.ARCHIVED:
        tasks.archive(db, board, tid)
    else:  # pragma: no cover
        raise AssertionError(status)
    got = status_of(db, tid)
    assert got == status, f"reach({status}) ended in {got}"
    return tid


def status_of(db: Database, task_id: str) -> str:
    return str(db.read(lambda tx: tx.scalar("SELECT status FROM tasks WHERE id = :id", {"id": task_id})))


def snapshot(db: Database, task_id: str | None = None) -> dict[str, Any]:
    """Everything a refused verb must leave untouched."""
    def _r(tx: Any) -> dict[str, Any]:
        out: dict[str, Any] = {
            "events": tx.scalar("SELECT COUNT(*) FROM task_events"),
            "max_event": tx.scalar("SELECT COALESCE(MAX(id), 0) FROM task_events"),
            "tasks": tx.scalar("SELECT COUNT(*) FROM tasks"),
            "runs": tx.all("SELECT * FROM task_runs ORDER BY id"),
            "links": tx.scalar("SELECT COUNT(*) FROM task_links"),
            "comments": tx.scalar("SELECT COUNT(*) FROM task_comments"),
            "goals": tx.all("SELECT * FROM goals ORDER BY id"),
        }
        if task_id is not None:
            out["task"] = tx.one("SELECT * FROM tasks WHERE id = :id", {"id": task_id})
        return out
    return db.read(_r)


def check_invariants(db: Database) -> None:
    """The kernel's invariants (docs/kernel.md) over the whole database; raise AssertionError on the first broken one."""
    def _r(tx: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        return (
            tx.all("SELECT id, board, status, assignee, current_run_id FROM tasks"),
            tx.all("SELECT id, task_id, status, outcome, ended_at FROM task_runs"),
            tx.all("SELECT parent_id, child_id, board FROM task_links"),
        )
    task_rows, run_rows, link_rows = db.read(_r)
    by_id = {t["id"]: t for t in task_rows}
    open_runs: dict[str, list[int]] = {}
    for r in run_rows:
        if r["status"] == "open":
            open_runs.setdefault(r["task_id"], []).append(r["id"])
            assert r["outcome"] is None, f"open run {r['id']} already has outcome {r['outcome']}"
        else:
            assert r["status"] == "closed", f"run {r['id']} has status {r['status']}"
            assert r["outcome"] in states.RUN_OUTCOMES, f"closed run {r['id']} has outcome {r['outcome']!r}"
            assert r["ended_at"] is not None, f"closed run {r['id']} has no end time"
    for t in task_rows:
        opened = open_runs.get(t["id"], [])
        running = t["status"] == states.RUNNING
        assert running == (len(opened) == 1), f"task {t['id']} is {t['status']} with open runs {opened}"
        assert len(opened) <= 1, f"task {t['id']} has open runs {opened}"
        assert (t["current_run_id"] is not None) == running, (
            f"task {t['id']} is {t['status']} with current_run_id {t['current_run_id']}"
        )
        if running:
            assert t["current_run_id"] == opened[0], f"task {t['id']} points at run {t['current_run_id']}, open is {opened}"
    parents: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    for link in link_rows:
        p, c = link["parent_id"], link["child_id"]
        assert p in by_id and c in by_id, f"link {p} -> {c} names a missing task"
        assert by_id[p]["board"] == by_id[c]["board"] == link["board"], f"link {p} -> {c} crosses boards"
        parents.setdefault(c, []).append(p)
        children.setdefault(p, []).append(c)
    for t in task_rows:
        if t["status"] == states.READY:
            pending = [p for p in parents.get(t["id"], []) if by_id[p]["status"] not in states.SATISFIED]
            assert not pending, f"ready task {t['id']} has parents not done: {pending}"
            assert t["assignee"], f"ready task {t['id']} has no assignee"
    assert_acyclic(children)


def assert_acyclic(children: dict[str, list[str]]) -> None:
    white, grey, black = 0, 1, 2
    color: dict[str, int] = {}
    for root in children:
        if color.get(root, white) != white:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        color[root] = grey
        while stack:
            node, i = stack.pop()
            kids = children.get(node, [])
            if i < len(kids):
                stack.append((node, i + 1))
                kid = kids[i]
                c = color.get(kid, white)
                assert c != grey, f"dependency cycle through {kid}"
                if c == white:
                    color[kid] = grey
                    stack.append((kid, 0))
            else:
                color[node] = black


def raises_refusal(fn: Callable[[], Any]) -> Exception | None:
    """Call ``fn``; return the Conflict it raised (None if it succeeded)."""
    from agentboard.domain.errors import Conflict

    try:
        fn()
    except Conflict as exc:
        return exc
    return None
