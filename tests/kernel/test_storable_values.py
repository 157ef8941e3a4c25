"""Values the database cannot store are bad input for every caller of the store, on both backends:
a number out of range (sqlite3's OverflowError, PostgreSQL's NumericValueOutOfRange) and a NUL
character (PostgreSQL). The kernel's own checks refuse them first, naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from agentboard.domain.errors import InvalidInput
from agentboard.kernel import budgets, comments, goals, queries, runs, tasks


def test_a_number_the_database_cannot_store_is_invalid_input_from_write_and_read(ab: Any, board: Any) -> None:
    t = board.create("t")
    before = queries.last_event_id(ab.db)
    with pytest.raises(InvalidInput, match="out of range|refused a value"):
        ab.db.write(lambda tx: tx.execute("UPDATE tasks SET priority = :p WHERE id = :id",
                                          {"p": 2**70, "id": t["id"]}))
    with pytest.raises(InvalidInput, match="out of range|refused a value"):
        ab.db.read(lambda tx: tx.all("SELECT CAST(:p AS BIGINT) AS v", {"p": 2**70}))
    with pytest.raises(InvalidInput):  # a kernel path without a range check of its own
        tasks.edit(ab.db, "default", t["id"], max_runtime_seconds=10**25)
    assert board.show(t["id"])["priority"] == 0
    assert queries.last_event_id(ab.db) == before


def test_a_nul_character_is_refused_by_the_kernel_naming_the_field(ab: Any, board: Any) -> None:
    t = board.create("t", assignee="w")
    before = queries.last_event_id(ab.db)
    for call, needle in [
        (lambda: tasks.create(ab.db, "default", "x", body="a\x00b"), "body contains a NUL"),
        (lambda: comments.comment(ab.db, "default", t["id"], "a\x00b"), "comment contains a NUL"),
        (lambda: tasks.block(ab.db, "default", t["id"], "a\x00b"), "reason contains a NUL"),
        (lambda: goals.create(ab.db, "default", "g", body="a\x00"), "body contains a NUL"),
    ]:
        with pytest.raises(InvalidInput, match=needle):
            call()
    assert queries.last_event_id(ab.db) == before


def test_a_nul_in_a_search_is_invalid_input_on_every_backend(ab: Any) -> None:
    try:  # SQLite finds nothing; PostgreSQL refuses the text: bad input, not a crash
        out = queries.list_tasks(ab.db, "default", search="a\x00")
    except InvalidInput as exc:
        assert "refused a value" in exc.message
    else:
        assert list(out) == []


def test_range_checks_name_the_field_before_the_database_sees_the_number(ab: Any, board: Any) -> None:
    t = board.create("t", assignee="w")
    before = queries.last_event_id(ab.db)
    checks: list[tuple[Any, str]] = [
        (lambda: tasks.create(ab.db, "default", "x", max_runtime="999999999999999d"), "max_runtime"),
        (lambda: goals.create(ab.db, "default", "g", priority=10**20), "priority"),
        (lambda: budgets.set_budget(ab.db, "task", t["id"], budgets.Limits.build(max_tokens=10**19)), "max_tokens"),
        (lambda: runs.claim(ab.db, "default", t["id"], ttl=10**12), "ttl"),
    ]
    for call, needle in checks:
        with pytest.raises(InvalidInput, match=needle):
            call()
    assert queries.last_event_id(ab.db) == before
    run = runs.claim(ab.db, "default", t["id"], ttl=60)
    with pytest.raises(InvalidInput, match="ttl"):
        runs.heartbeat(ab.db, "default", t["id"], run_id=run["run_id"], ttl=10**12)
    with pytest.raises(InvalidInput, match="usage.input_tokens"):
        board.complete(t["id"], summary="s", run_id=run["run_id"], usage={"input_tokens": 10**23})
    assert board.show(t["id"])["status"] == "running"
