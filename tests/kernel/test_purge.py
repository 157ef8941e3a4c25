"""Purge removes a task and its rows for real, refuses running work or unfinished children, and
leaves an audit event; attach-rm removes one attachment."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernelkit import check_invariants, reach, snapshot, status_of

import agentboard
from agentboard.domain import states
from agentboard.domain.errors import Conflict, NotFound
from agentboard.kernel import attachments, comments, purge, queries, tasks, wiki
from agentboard.store import transfer as rows


def rows_naming(db: object, task_id: str) -> dict[str, int]:
    """Every row of every table that mentions the task id in any column."""
    def _r(tx: object) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in rows.tables():
            n = sum(1 for r in rows.iter_rows(tx, t) if task_id in r.values())  # type: ignore[arg-type]
            if n:
                out[t.name] = n
        return out
    return db.read(_r)  # type: ignore[attr-defined, no-any-return]


def test_purge_removes_the_task_and_every_row_about_it_and_leaves_an_audit_event(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    tid = reach(db, "default", states.DONE, title="finished work")
    comments.comment(db, "default", tid, "a note")
    attachments.attach(db, "default", tid, "f.txt", data=b"hello", home=home)
    wiki.add(db, "default", "page", title="Page", body="from the task", source_task_id=tid)
    folder = attachments.attachments_dir(home, "default", tid)
    assert folder.is_dir()
    before = queries.last_event_id(db)
    out = purge.purge(db, "default", tid, actor="alice")
    assert out["removed"]["tasks"] == 1 and out["removed"]["task_events"] >= 3
    assert rows_naming(db, tid) == {}  # no row keeps the id in a column (the audit event has it in its payload)
    audit = queries.events_after(db, "default", before)
    assert [e["kind"] for e in audit] == ["purged"]
    assert audit[0]["task_id"] is None and audit[0]["payload"]["task"] == tid
    assert audit[0]["actor"] == "alice"
    assert not folder.exists()
    assert wiki.get(db, "default", "page")["source_task_id"] is None
    with pytest.raises(NotFound):
        tasks.edit(db, "default", tid, title="gone")
    # event ids keep increasing after the deletions
    other = tasks.create(db, "default", "next")
    assert queries.events_after(db, "default", audit[0]["id"])[0]["task_id"] == other["id"]
    check_invariants(db)


def test_purge_refuses_running_work_and_unfinished_children_and_changes_nothing(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    running = reach(db, "default", states.RUNNING, title="busy")
    parent = tasks.create(db, "default", "parent", assignee="worker")
    tasks.create(db, "default", "child", parents=[parent["id"]], assignee="worker")
    before = snapshot(db)
    with pytest.raises(Conflict, match="is running"):
        purge.purge(db, "default", running)
    with pytest.raises(Conflict, match="unfinished children"):
        purge.purge(db, "default", parent["id"])
    assert snapshot(db) == before
    assert status_of(db, running) == states.RUNNING


def test_forced_purge_of_a_parent_releases_the_child_it_held_back(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    parent = tasks.create(db, "default", "parent", assignee="worker")
    child = tasks.create(db, "default", "child", parents=[parent["id"]], assignee="worker")
    assert status_of(db, child["id"]) == states.TODO
    out = purge.purge(db, "default", parent["id"], force=True)
    assert out["promoted"] == [child["id"]]
    assert status_of(db, child["id"]) == states.READY
    check_invariants(db)


def test_forced_purge_of_a_running_task_reports_its_worker(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    running = reach(db, "default", states.RUNNING, title="busy")
    out = purge.purge(db, "default", running, force=True)
    assert out["status"] == states.RUNNING and out["removed"]["task_runs"] == 1
    check_invariants(db)


def test_attach_rm_removes_the_row_and_the_file(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    tid = tasks.create(db, "default", "with files")["id"]
    a = attachments.attach(db, "default", tid, "a.txt", data=b"a", home=home)
    attachments.attach(db, "default", tid, "b.txt", data=b"b", home=home)
    attachments.remove_attachment(db, "default", tid, "a.txt", home=home)
    assert not Path(a["path"]).exists()
    left = attachments.list_attachments(db, "default", tid)
    assert [x["name"] for x in left] == ["b.txt"]
    attachments.remove_attachment(db, "default", tid, left[0]["id"], home=home)
    assert attachments.list_attachments(db, "default", tid) == []
    with pytest.raises(NotFound, match="no attachment"):
        attachments.remove_attachment(db, "default", tid, "a.txt", home=home)
    kinds = [e["kind"] for e in queries.events_after(db, "default", 0, task_id=tid)]
    assert kinds.count("detached") == 2
