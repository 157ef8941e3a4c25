"""Round trips of the hot verbs on PostgreSQL, counted from libpq's protocol trace: a plain
create costs one (for a name that is no profile too, its warning included), a worker's claim and heartbeat two each, the claim of the next ready task one, a worker's
completion one (with the children it promotes: it is one server-side function), a task's detail
two, whatever the network's latency."""

from __future__ import annotations

import sys
from pathlib import Path

import agentboard
from agentboard.kernel import queries, runs, tasks

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _shared import RoundTrips  # noqa: E402


def test_create_claim_and_heartbeat_take_two_round_trips_and_a_completion_one(pg_url: str) -> None:
    ab = agentboard.connect(pg_url)
    db = ab.db
    ab.add_profile("w", command="true")
    parent = tasks.create(db, "default", "parent", assignee="w")
    counts: dict[str, int] = {}
    with RoundTrips(db) as rt:  # no such profile: the warning names the profile its name is a typo of
        typo = tasks.create(db, "default", "typo", assignee="ww")
    counts["create for a name that is no profile"] = rt.count
    assert typo["warnings"][0].startswith("no profile named 'ww' (did you mean 'w'?):")
    person = tasks.create(db, "default", "for a person", assignee="alice")
    assert person["warnings"][0].startswith("no profile named 'alice':")
    assert "did you mean" not in person["warnings"][0]
    with RoundTrips(db) as rt:
        child = tasks.create(db, "default", "child", assignee="w", parents=[parent["id"]])
    counts["create with a parent"] = rt.count
    with RoundTrips(db) as rt:
        leaf = tasks.create(db, "default", "leaf", assignee="w")
    counts["create"] = rt.count
    leaf_claim = runs.claim(db, "default", leaf["id"])
    with RoundTrips(db) as rt:
        leaf_done = runs.complete(db, "default", leaf["id"], run_id=leaf_claim["run_id"], summary="done")
    counts["complete without children"] = rt.count
    assert leaf_done["status"] == "done" and leaf_done["promoted"] == []
    with RoundTrips(db) as rt:
        nxt = runs.claim_next(db, "default", limit=1)
    counts["claim next"] = rt.count
    assert [c["id"] for c in nxt] == [parent["id"]] and nxt[0]["run_id"]
    runs.reclaim(db, "default", parent["id"])
    with RoundTrips(db) as rt:
        claim = runs.claim(db, "default", parent["id"])
    counts["claim"] = rt.count
    with RoundTrips(db) as rt:
        runs.heartbeat(db, "default", parent["id"], run_id=claim["run_id"], note="half way")
    counts["heartbeat"] = rt.count
    with RoundTrips(db) as rt:
        out = runs.complete(db, "default", parent["id"], run_id=claim["run_id"], summary="done")
    counts["complete"] = rt.count
    with RoundTrips(db) as rt:
        queries.events_after(db, "default", 0)
    counts["events_after"] = rt.count
    # the verbs did their whole work: the child was promoted by the completion
    assert out["status"] == "done" and out["promoted"] == [child["id"]]
    kinds = [e["kind"] for e in queries.events_after(db, "default", 0)]
    assert kinds[-4:] == ["claimed", "heartbeat", "completed", "promoted"]
    ab.close()
    assert counts["create"] == 1, counts
    assert counts["create for a name that is no profile"] == 1, counts
    assert counts["create with a parent"] <= 3, counts
    assert counts["complete without children"] == 1, counts
    assert counts["claim"] <= 2, counts
    assert counts["claim next"] == 1, counts
    assert counts["heartbeat"] <= 2, counts
    assert counts["complete"] == 1, counts
    assert counts["events_after"] <= 2, counts


def test_a_tasks_detail_and_a_dispatchers_claim_read_the_tasks_surroundings_in_one_round_trip(pg_url: str) -> None:
    from agentboard.kernel import comments, dispatching, goals

    ab = agentboard.connect(pg_url)
    db = ab.db
    goal = goals.create(db, "default", "ship it")
    parent = tasks.create(db, "default", "parent", assignee="w")
    done = runs.claim(db, "default", parent["id"])
    runs.complete(db, "default", parent["id"], run_id=done["run_id"], summary="handed over")
    kids = [tasks.create(db, "default", f"child {i}", assignee="w", parents=[parent["id"]], goal=goal["id"])
            for i in range(2)]
    comments.comment(db, "default", kids[0]["id"], "mind the tests", author="alice")
    counts: dict[str, int] = {}
    with RoundTrips(db) as rt:
        detail = queries.task_detail(db, "default", kids[0]["id"])
    counts["detail"] = rt.count
    with RoundTrips(db) as rt:
        got = dispatching.claim_to_start(db, "default", [k["id"] for k in kids], host="h", limit=2, tokens=True)
    counts["claim to start"] = rt.count
    ab.close()
    # every part of the detail is there: the done parent's handoff, the comment, the goal
    assert [p["handoff"]["summary"] for p in detail["parents"]] == ["handed over"]
    assert [c["body"] for c in detail["comments"]] == ["mind the tests"]
    assert detail["goal"]["title"] == "ship it"
    assert sorted(c["id"] for c in got.claimed) == sorted(k["id"] for k in kids)
    first = got.inputs[kids[0]["id"]]
    assert not isinstance(first, Exception)
    assert [c["body"] for c in first.detail["comments"]] == ["mind the tests"]
    assert first.detail["parents"][0]["handoff"]["summary"] == "handed over"
    # the statements that need only the ids travel together, the handoffs and the goal after
    # them (11 and 16 round trips when each statement took its own)
    assert counts["detail"] <= 2, counts
    assert counts["claim to start"] <= 8, counts
