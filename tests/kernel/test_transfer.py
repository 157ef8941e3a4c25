"""Export → import round trips: every kind of row, both backends and across them, compared row by row."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from kernelkit import check_invariants, reach

import agentboard
from agentboard.config import Settings
from agentboard.domain import states
from agentboard.domain.errors import Conflict, InvalidInput
from agentboard.kernel import (
    attachments,
    boards,
    comments,
    goals,
    links,
    profiles,
    queries,
    runs,
    tasks,
    tokens,
    transfer,
    wiki,
)
from agentboard.store import Database, open_database
from agentboard.store import transfer as rows


def populate(db: Database, home: Path) -> dict[str, Any]:
    """A board with every kind of row: tasks in every status, links, comments, runs, reviews,
    events, a goal, wiki pages, a profile, a token, an attachment, a second board."""
    profiles.add(db, "worker", command="echo hi", description="a worker", skills=["py"])
    boards.create(db, "second", name="Second", description="another board", settings={"max_parallel": 2})
    goal = goals.create(db, "default", "ship it", body="the goal", acceptance=["tests pass"])
    ids = {s: reach(db, "default", s, title=f"a {s} task") for s in states.STATUSES}
    parent = tasks.create(db, "default", "parent", body="first", assignee="worker", goal=goal["id"])
    child = tasks.create(db, "default", "child — ünïcode ✓", body="multi\nline", parents=[parent["id"]],
                         assignee="worker", verify=["true"], review=True)
    comments.comment(db, "default", child["id"], "a comment with 'quotes' and \"doubles\"", author="alice")
    run = runs.claim(db, "default", parent["id"])
    runs.heartbeat(db, "default", parent["id"], run_id=run["run_id"], note="halfway")
    runs.complete(db, "default", parent["id"], summary="did it", run_id=run["run_id"],
                  metadata={"files": ["a.py"]})
    reviewed = reach(db, "default", states.REVIEW, title="to review")
    runs.review(db, "default", reviewed, "changes_requested", "fix the tests", reviewer="bob",
                score=3, findings=[{"file": "a.py", "note": "x"}])
    links.link(db, "default", ids[states.TODO], ids[states.TRIAGE])
    attachments.attach(db, "default", child["id"], "notes.txt", home=home, data=b"\x00binary\xffdata")
    wiki.add(db, "default", "howto", title="How to", body="# How to\n\nrun the tests", publish=True)
    wiki.add(db, "second", "draft", title="Draft", body="a draft page")
    tokens.create(db, "ci", role="member", boards=["default"])
    tasks.create(db, "second", "on the second board", body="b")
    return {"ids": ids, "child": child["id"], "parent": parent["id"]}


def all_rows(db: Database) -> dict[str, list[dict[str, Any]]]:
    def _r(tx: Any) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for t in rows.tables():
            skip = rows.LOCAL_COLUMNS.get(t.name, frozenset())
            out[t.name] = [{k: v for k, v in r.items() if k not in skip} for r in rows.iter_rows(tx, t)]
        return out
    return db.read(_r)


def export_file(db: Database, path: Path, **kw: Any) -> dict[str, dict[str, Any]]:
    with open(path, "w", encoding="utf-8") as fh:
        return transfer.export(db, fh.write, **kw)


def fresh(url: str, home: Path) -> Database:
    home.mkdir(parents=True, exist_ok=True)
    return open_database(url, settings=dataclasses.replace(Settings(home=home), database_url=url))


def test_a_sqlite_export_imported_into_a_new_home_has_every_row_and_its_attachment(
        home: Path, tmp_path: Path) -> None:
    src = agentboard.connect(str(home)).db
    made = populate(src, home)
    dump = tmp_path / "dump.jsonl"
    summary = export_file(src, dump)
    assert summary["tasks"]["rows"] == 12 and summary["attachments"]["rows"] == 1
    other = tmp_path / "other"
    dst = fresh(f"sqlite:///{other / 'agentboard.db'}", other)
    report = transfer.import_dump(dst, dump, home=other)
    assert report.files_written == 1
    assert all_rows(dst) == all_rows(src)
    check_invariants(dst)
    att = attachments.list_attachments(dst, "default", made["child"])[0]
    assert Path(att["path"]).read_bytes() == b"\x00binary\xffdata"
    assert str(other) in att["path"]
    # cursors and event order survive: the events after a cursor are the same on both
    assert queries.events_after(src, "default", 5) == queries.events_after(dst, "default", 5)
    # the full-text index follows the imported pages
    assert [p["slug"] for p in wiki.relevant(dst, "default", "run the tests")] == ["howto"]
    # new rows after the import continue the ids
    c = comments.comment(dst, "default", made["child"], "after the import")
    assert int(c["id"]) > max(r["id"] for r in all_rows(src)["task_comments"])
    dst.close()


def test_importing_the_same_export_twice_changes_nothing(home: Path, tmp_path: Path) -> None:
    src = agentboard.connect(str(home)).db
    populate(src, home)
    dump = tmp_path / "dump.jsonl"
    export_file(src, dump)
    other = tmp_path / "other"
    dst = fresh(f"sqlite:///{other / 'agentboard.db'}", other)
    transfer.import_dump(dst, dump, home=other)
    before = all_rows(dst)
    report = transfer.import_dump(dst, dump, home=other)
    assert report.files_written == 0
    assert all_rows(dst) == before
    assert not transfer.verify(dst, report.expected).mismatched
    dst.close()


#: what an export of a version before races and the insights did not have
OLDER = {"drop": ("run_rollups", "run_rollups_pending", "attempts"),
         "columns": {"tasks": ("race_until", "race_of"), "task_runs": ("race_attempt",)}}


def as_older_export(dump: Path, older: Path) -> None:
    """``dump`` as an export of an older schema writes it: without the tables and columns added
    since, its header and trailer over what it holds."""
    lines = [json.loads(x) for x in dump.read_text(encoding="utf-8").splitlines()]
    header, body = lines[0], lines[1:-1]
    header["schema"] = "0016"
    header["tables"] = {t: [c for c in cols if c not in OLDER["columns"].get(t, ())]
                        for t, cols in header["tables"].items() if t not in OLDER["drop"]}
    digests = {t: rows.Digest(t) for t in header["tables"]}
    out = [header]
    for item in body:
        if item["table"] in OLDER["drop"]:
            continue
        item["row"] = {k: v for k, v in item["row"].items() if k in header["tables"][item["table"]]}
        digests[item["table"]].add(item["row"])
        out.append(item)
    out.append({"end": True, "tables": {t: d.as_dict() for t, d in digests.items()}})
    older.write_text("".join(json.dumps(x) + "\n" for x in out), encoding="utf-8")


def test_an_older_versions_export_imports_whole_with_its_insights_made_from_its_runs(
        home: Path, tmp_path: Path) -> None:
    from agentboard.kernel import insights

    src = agentboard.connect(str(home)).db
    populate(src, home)
    dump, older = tmp_path / "dump.jsonl", tmp_path / "older.jsonl"
    export_file(src, dump)
    as_older_export(dump, older)
    other = tmp_path / "other"
    dst = fresh(f"sqlite:///{other / 'agentboard.db'}", other)
    report = transfer.import_dump(dst, older, home=other)
    assert report.rollups_rebuilt
    check = transfer.verify(dst, report.expected, columns=report.columns)
    assert not check.mismatched, check.as_dict()  # its own columns, as it counted them
    q = insights.Query.build("profile")
    got, want = insights.read(dst, "default", q)["groups"], insights.read(src, "default", q)["groups"]
    assert got and got == want
    dst.close()


def test_import_refuses_a_database_that_holds_other_tasks(home: Path, tmp_path: Path) -> None:
    src = agentboard.connect(str(home)).db
    populate(src, home)
    dump = tmp_path / "dump.jsonl"
    export_file(src, dump)
    other = tmp_path / "other"
    dst = fresh(f"sqlite:///{other / 'agentboard.db'}", other)
    mine = tasks.create(dst, "default", "already here")
    before = all_rows(dst)
    with pytest.raises(Conflict, match="already holds 1 task"):
        transfer.import_dump(dst, dump, home=other)
    assert all_rows(dst) == before and before["tasks"][0]["id"] == mine["id"]
    dst.close()


def test_import_refuses_a_cut_short_or_newer_dump_and_writes_nothing(home: Path, tmp_path: Path) -> None:
    src = agentboard.connect(str(home)).db
    populate(src, home)
    dump = tmp_path / "dump.jsonl"
    export_file(src, dump)
    lines = dump.read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:-1]) + "\n")
    newer = tmp_path / "newer.jsonl"
    header = json.loads(lines[0])
    header["tables"]["tasks"].append("from_the_future")
    newer.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    other = tmp_path / "other"
    dst = fresh(f"sqlite:///{other / 'agentboard.db'}", other)
    before = all_rows(dst)
    with pytest.raises(InvalidInput, match="cut short"):
        transfer.import_dump(dst, cut, home=other)
    with pytest.raises(InvalidInput, match="from_the_future"):
        transfer.import_dump(dst, newer, home=other)
    assert all_rows(dst) == before
    dst.close()


def test_a_board_export_holds_only_that_board(home: Path, tmp_path: Path) -> None:
    src = agentboard.connect(str(home)).db
    populate(src, home)
    dump = tmp_path / "second.jsonl"
    summary = export_file(src, dump, board="second")
    assert summary["tasks"]["rows"] == 1 and summary["boards"]["rows"] == 1
    assert "tokens" not in summary and summary["profiles"]["rows"] == 1
    boards_seen = {json.loads(line)["row"].get("board", "second")
                   for line in dump.read_text().splitlines()[1:-1]
                   if json.loads(line)["table"] != "profiles"}
    assert boards_seen == {"second"}


def test_since_exports_only_what_changed_after_the_time(home: Path, tmp_path: Path) -> None:
    import time

    src = agentboard.connect(str(home)).db
    populate(src, home)
    cut = time.time()
    late = tasks.create(src, "default", "late task")
    summary = export_file(src, tmp_path / "late.jsonl", since=cut)
    assert summary["tasks"]["rows"] == 1
    assert late["id"] in (tmp_path / "late.jsonl").read_text()


@pytest.mark.postgres
def test_sqlite_to_postgresql_to_sqlite_keeps_every_row(home: Path, tmp_path: Path, pg_database: str) -> None:
    src = agentboard.connect(str(home)).db
    populate(src, home)
    original = all_rows(src)
    pg = fresh(pg_database, home)
    report, check = transfer.migrate(src, pg, spool_dir=tmp_path)
    assert not check.mismatched, check.as_dict()
    assert all_rows(pg) == original
    check_invariants(pg)
    # ids continue after the import on PostgreSQL (sequences were moved past the imported ids)
    on_default = next(t["id"] for t in original["tasks"] if t["board"] == "default")
    c = comments.comment(pg, "default", on_default, "new on postgres")
    assert int(c["id"]) == max(r["id"] for r in original["task_comments"]) + 1
    back_home = tmp_path / "back"
    back = fresh(f"sqlite:///{back_home / 'agentboard.db'}", back_home)
    dump = tmp_path / "pg.jsonl"
    export_file(pg, dump)
    transfer.import_dump(back, dump, home=back_home)
    again = all_rows(back)
    new_comment = again["task_comments"].pop()
    assert new_comment["body"] == "new on postgres"
    new_event = again["task_events"].pop()
    assert new_event["kind"] == "commented"
    assert again == original
    check_invariants(back)
    pg.close()
    back.close()


@pytest.mark.postgres
def test_postgresql_export_imported_twice_into_postgresql_is_the_same(tmp_path: Path, pg_database: str) -> None:
    from testenv import database_url, scratch_database

    home = tmp_path / "pghome"
    src = fresh(pg_database, home)
    populate(src, home)
    dump = tmp_path / "dump.jsonl"
    expected = export_file(src, dump)
    with scratch_database() as name:
        dst = fresh(database_url(name), tmp_path / "pghome2")
        transfer.import_dump(dst, dump)
        transfer.import_dump(dst, dump)
        assert not transfer.verify(dst, expected).mismatched
        assert all_rows(dst) == all_rows(src)
        check_invariants(dst)
        dst.close()
    src.close()
