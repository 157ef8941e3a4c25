"""What the old installation-wide write lock used to guarantee, now guaranteed by row locks on
PostgreSQL: concurrent links never close a cycle, and a child created while its parent
completes is never left waiting."""

from __future__ import annotations

import threading
from typing import Any

from agentboard.domain.errors import Conflict
from agentboard.kernel import links, queries, runs, tasks
from agentboard.store import open_database


def _race(*fns: Any) -> list[Any]:
    start = threading.Barrier(len(fns))
    out: list[Any] = [None] * len(fns)

    def run(i: int) -> None:
        start.wait()
        try:
            out[i] = fns[i]()
        except Exception as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_opposite_links_made_at_the_same_moment_never_form_a_cycle(pg_url: str) -> None:
    db = open_database(pg_url)
    for _ in range(10):
        a, b, c = (tasks.create(db, "default", n, assignee="w")["id"] for n in "abc")
        links.link(db, "default", a, b)
        # b → c and c → a at once: together with a → b they would close a → b → c → a
        out = _race(lambda b=b, c=c: links.link(db, "default", b, c),
                    lambda c=c, a=a: links.link(db, "default", c, a))
        assert sorted(type(o).__name__ for o in out) == ["Conflict", "dict"], out
        assert any(isinstance(o, Conflict) and "cycle" in str(o) for o in out)
    db.close()


def test_a_child_created_while_its_parent_completes_becomes_ready(pg_url: str) -> None:
    db = open_database(pg_url)
    for i in range(10):
        parent = tasks.create(db, "default", f"parent {i}", assignee="w")["id"]
        run_id = runs.claim(db, "default", parent)["run_id"]
        _race(lambda p=parent, r=run_id: runs.complete(db, "default", p, run_id=r, summary="ok"),
              lambda p=parent: tasks.create(db, "default", "child", assignee="w", parents=[p]))
        child = queries.task_detail(db, "default", parent)["children"][0]
        assert child["status"] == "ready", child
    db.close()


def test_the_two_parents_of_a_child_completing_at_once_make_it_ready(pg_url: str) -> None:
    db = open_database(pg_url)
    for i in range(10):
        p1, p2 = (tasks.create(db, "default", f"parent {i}{n}", assignee="w")["id"] for n in "ab")
        child = tasks.create(db, "default", f"child {i}", assignee="w", parents=[p1, p2])["id"]
        r1, r2 = (runs.claim(db, "default", p)["run_id"] for p in (p1, p2))
        _race(lambda p1=p1, r1=r1: runs.complete(db, "default", p1, run_id=r1, summary="ok"),
              lambda p2=p2, r2=r2: runs.complete(db, "default", p2, run_id=r2, summary="ok"))
        assert queries.task_detail(db, "default", child)["status"] == "ready"
    db.close()


def test_the_last_two_tasks_of_a_goal_completing_at_once_send_the_goal_to_verification_once(pg_url: str) -> None:
    import agentboard

    ab = agentboard.connect(pg_url)
    board = ab.board()
    for i in range(6):
        goal = board.goal(f"goal {i}")
        a, b = (board.create(f"{n}{i}", assignee="w", goal=goal["id"])["id"] for n in "ab")
        ra, rb = (runs.claim(ab.db, "default", t)["run_id"] for t in (a, b))
        _race(lambda a=a, ra=ra: runs.complete(ab.db, "default", a, run_id=ra, summary="ok"),
              lambda b=b, rb=rb: runs.complete(ab.db, "default", b, run_id=rb, summary="ok"))
        assert {g["id"]: g["status"] for g in board.goals()}[goal["id"]] == "verifying"
        verifying = [e for e in board.events(kinds=["goal_verifying"]) if e["payload"].get("goal_id") == goal["id"]]
        assert len(verifying) == 1, "the goal is settled once, not by both completions"
    ab.close()
