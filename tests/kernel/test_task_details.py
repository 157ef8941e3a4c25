"""A task's details (what ``show``, the drawer and a worker's ``.board/`` files are built from),
read for one task or for a batch of tasks at once: each task gets exactly its own surroundings."""

from __future__ import annotations

from typing import Any

import pytest

from agentboard.domain.errors import NotFound
from agentboard.kernel import queries, worker_protocol

B = "default"


def _done(board: Any, task_id: str, summary: str) -> int:
    run = int(board.claim(task_id)["run_id"])
    board.complete(task_id, run_id=run, summary=summary, result=f"{summary} result")
    return run


def _board_with_surroundings(board: Any) -> dict[str, Any]:
    goal = board.goal("launch", acceptance=["it ships"])["id"]
    a = board.create("design", assignee="w", goal=goal)["id"]
    b = board.create("prototype", assignee="w")["id"]
    first = int(board.claim(a)["run_id"])
    board.fail(a, "crashed", run_id=first, error="boom")
    handoff = _done(board, a, "designed")
    _done(board, b, "prototyped")
    c = board.create("build", assignee="w", parents=[a, b], goal=goal)["id"]
    d = board.create("document", assignee="w", parents=[c])["id"]
    lone = board.create("unrelated", assignee="w")["id"]
    board.comment(c, "use the small motor", author="ann", mentions=False)
    board.comment(c, "and the blue case", author="bob", mentions=False)
    board.comment(lone, "nobody cares", author="ann", mentions=False)
    board.attach(c, "spec.txt", data=b"12 volts")
    return {"goal": goal, "a": a, "b": b, "c": c, "d": d, "lone": lone, "handoff": handoff, "first": first}


def test_a_batch_read_gives_each_task_its_own_surroundings_and_matches_one_by_one(board: Any) -> None:
    ids = _board_with_surroundings(board)
    c, lone = ids["c"], ids["lone"]
    batch = board.db.read(lambda tx: queries.task_details_in(tx, B, [c, ids["a"], lone, ids["d"]], events=3))

    got = batch[c]
    parents = {p["id"]: p for p in got["parents"]}
    assert sorted(parents) == sorted([ids["a"], ids["b"]])  # linked at once: by id
    assert parents[ids["a"]]["handoff"]["id"] == ids["handoff"]  # the completed run, not the failed one
    assert parents[ids["a"]]["handoff"]["summary"] == "designed"
    assert parents[ids["b"]]["handoff"]["summary"] == "prototyped"
    assert [k["id"] for k in got["children"]] == [ids["d"]]
    assert [m["body"] for m in got["comments"]] == ["use the small motor", "and the blue case"]
    assert [f["name"] for f in got["attachments"]] == ["spec.txt"]
    assert got["goal"]["id"] == ids["goal"] and got["goal"]["acceptance"] == ["it ships"]
    assert len(got["events"]) == 3 and [e["id"] for e in got["events"]] == sorted(e["id"] for e in got["events"])
    assert all(e["task_id"] == c for e in got["events"])

    a = batch[ids["a"]]
    assert [r["id"] for r in a["runs"]] == [ids["first"], ids["handoff"]] and a["parents"] == []
    assert [k["id"] for k in a["children"]] == [c] and a["comments"] == []
    assert [m["body"] for m in batch[lone]["comments"]] == ["nobody cares"]
    assert batch[lone]["children"] == batch[lone]["parents"] == batch[lone]["attachments"] == []
    assert "goal" not in batch[lone]

    for task_id, detail in batch.items():  # the same as reading each alone
        assert detail == queries.task_detail(board.db, B, task_id, events=3)


def test_a_task_missing_from_the_batch_maps_to_its_error_and_the_rest_are_read(board: Any) -> None:
    t = board.create("here", assignee="w")["id"]
    batch = board.db.read(lambda tx: queries.task_details_in(tx, B, ["t_00000000", t], events=0))
    assert isinstance(batch["t_00000000"], NotFound) and batch[t]["title"] == "here"
    with pytest.raises(NotFound):
        queries.task_detail(board.db, B, "t_00000000")


def test_what_a_batch_of_workers_is_given_names_each_ones_own_history(board: Any) -> None:
    x = board.create("x", assignee="w")["id"]
    y = board.create("y", assignee="w")["id"]
    run = int(board.claim(x)["run_id"])
    board.fail(x, "verify_failed", run_id=run, error="tests failed")
    loaded = worker_protocol.prepare_inputs_many(board.db, B, [x, y], wiki_on=False)
    assert [e["kind"] for e in loaded[x].history] == ["verify_failed"]
    assert loaded[y].history == [] and loaded[x].detail["id"] == x and loaded[y].detail["id"] == y
