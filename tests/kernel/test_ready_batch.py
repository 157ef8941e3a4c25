"""The ready queue read a page at a time: pages follow each other in the queue's order
(priority, then age, then id) with nothing read twice or left out, and a page can leave out the
tasks of assignees a pass cannot start."""

from __future__ import annotations

from typing import Any

from agentboard.kernel import dispatching as kd
from agentboard.kernel import tasks


def _pages(db: Any, size: int, skip: list[str] | None = None) -> list[str]:
    out: list[str] = []
    after = None
    while True:
        page = kd.ready_batch(db, "default", size, after=after, skip=skip)
        out += [r["id"] for r in page]
        if len(page) < size:
            return out
        after = page[-1]


def test_pages_of_the_ready_queue_follow_its_order_with_nothing_twice_or_missed(ab: Any) -> None:
    db = ab.db
    made = [tasks.create(db, "default", f"t{i}", assignee="w", priority=i % 3)["id"] for i in range(23)]
    # ties on priority and age, as a bulk insert makes them: the id decides
    db.write(lambda tx: tx.execute("UPDATE tasks SET created_at = 1000.0 WHERE title IN ('t3', 't6', 't9', 't12')"))
    whole = [r["id"] for r in kd.ready_batch(db, "default", 100)]
    assert sorted(whole) == sorted(made)
    for size in (1, 4, 7, 23):
        assert _pages(db, size) == whole


def test_a_page_leaves_out_the_assignees_it_is_told_to_skip_but_not_the_unassigned(ab: Any) -> None:
    db = ab.db
    full = [tasks.create(db, "default", f"full {i}", assignee="full")["id"] for i in range(5)]
    other = tasks.create(db, "default", "other", assignee="other")["id"]
    nobody = tasks.create(db, "default", "nobody")["id"]  # the board's fallback assignee takes it
    db.write(lambda tx: tx.execute("UPDATE tasks SET status = 'ready' WHERE id = :id", {"id": nobody}))
    assert set(_pages(db, 2)) == {*full, other, nobody}
    assert set(_pages(db, 2, skip=["full"])) == {other, nobody}
