"""Boards (isolation, slugs, archive/restore/delete), attachments, profiles, read models, bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kernelkit import snapshot

from agentboard.domain.errors import Conflict, InvalidInput, NotFound, TooLarge
from agentboard.kernel import attachments, boards, profiles, queries, runs, tasks

B = "default"


# -- boards ------------------------------------------------------------------------------------------


def test_boards_are_isolated(ab: Any) -> None:
    ab.create_board("other")
    mine = ab.board().create("mine", assignee="w")["id"]
    theirs = ab.board("other").create("theirs", assignee="w")["id"]
    other = ab.board("other")
    for verb in (lambda: other.show(mine), lambda: other.claim(mine), lambda: other.complete(mine, summary="x"),
                 lambda: other.archive(mine), lambda: other.comment(mine, "hi")):
        with pytest.raises(NotFound):
            verb()
    assert [t["id"] for t in other.list()] == [theirs]
    assert [e["task_id"] for e in other.events(0) if e["task_id"]] == [theirs]
    with pytest.raises(InvalidInput, match="across boards"):
        ab.board().link(mine, theirs)
    with pytest.raises(InvalidInput, match="across boards"):
        ab.board().create("child", parents=[theirs])
    assert ab.board().show(mine)["parents"] == []


def test_reading_a_board_that_does_not_exist_raises_not_found_instead_of_showing_no_tasks(ab: Any) -> None:
    ghost = ab.board("nope")
    for read in (ghost.list, ghost.view, ghost.stats, ghost.goals, ghost.budgets, ghost.diagnostics,
                 lambda: ghost.events(0)):
        with pytest.raises(NotFound, match="no board 'nope'"):
            read()
    ab.create_board("nope")  # once it exists, the same object reads it
    assert ghost.list() == [] and ghost.view()["columns"]


@pytest.mark.parametrize("bad", ["Bad Slug", "a/b", "..", "x.y", "", "-lead", "a" * 65, "../etc"])
def test_bad_board_slugs_are_refused(ab: Any, bad: str) -> None:
    with pytest.raises(InvalidInput, match="slug"):
        ab.create_board(bad)


def test_board_slug_is_lowered_and_immutable(ab: Any) -> None:
    b = ab.create_board("Research", name="Research team")
    assert b["slug"] == "research"
    with pytest.raises(Conflict):
        ab.create_board("research")
    renamed = boards.rename(ab.db, "research", "R&D")
    assert (renamed["slug"], renamed["name"]) == ("research", "R&D")
    with pytest.raises(InvalidInput, match="immutable"):
        boards.update(ab.db, "research", default_workdir="/tmp")


def test_board_archive_restore_delete_move_its_folder(ab: Any) -> None:
    home = ab.settings.home
    ab.create_board("proj")
    t = ab.board("proj").create("x", assignee="w")["id"]
    folder = boards.board_dir(home, "proj")
    (folder / "logs").mkdir(parents=True)
    (folder / "logs" / "run.log").write_text("hello")
    archived = boards.archive(ab.db, "proj", home=home)
    assert archived["archived"] and not folder.exists()
    moved = Path(archived["archived_path"])
    assert (moved / "logs" / "run.log").read_text() == "hello"
    assert moved.parent == home / "boards" / "_archived"
    assert "proj" not in [b["slug"] for b in ab.boards()]
    with pytest.raises(InvalidInput, match="archived"):
        ab.board("proj").create("more")
    boards.restore(ab.db, "proj", home=home)
    assert (folder / "logs" / "run.log").read_text() == "hello" and not moved.exists()
    assert ab.board("proj").show(t)["title"] == "x"
    runs.claim(ab.db, "proj", t)
    with pytest.raises(Conflict, match="running"):
        boards.delete(ab.db, "proj", home=home)
    runs.reclaim(ab.db, "proj", t)
    boards.delete(ab.db, "proj", home=home)
    assert not folder.exists()
    with pytest.raises(NotFound):
        boards.get(ab.db, "proj")
    left = ab.db.read(lambda tx: tx.all("SELECT kind, task_id FROM task_events WHERE board = 'proj'"))
    assert left == [{"kind": "board_deleted", "task_id": None}], "the log keeps only the deletion"
    assert ab.db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM tasks WHERE board = 'proj'")) == 0


# -- attachments ---------------------------------------------------------------------------------------


def test_attachment_is_stored_under_the_board_folder(ab: Any, tmp_path: Path) -> None:
    board = ab.board()
    t = board.create("x")["id"]
    src = tmp_path / "report.txt"
    src.write_text("numbers")
    a = board.attach(t, str(src))
    stored = Path(a["path"])
    assert stored.read_text() == "numbers"
    assert stored.is_relative_to(ab.settings.home / "boards" / B)
    assert [x["name"] for x in board.attachments(t)] == ["report.txt"]
    with pytest.raises(Conflict):
        board.attach(t, str(src))


def test_attachment_size_cap(ab: Any) -> None:
    t = ab.board().create("x")["id"]
    before = snapshot(ab.db, t)
    with pytest.raises(TooLarge):
        attachments.attach(ab.db, B, t, "big.bin", home=ab.settings.home, data=b"x" * 101, max_bytes=100)
    assert snapshot(ab.db, t) == before
    assert not (ab.settings.home / "boards" / B / "attachments" / t / "big.bin").exists()


@pytest.mark.parametrize("name", ["../escape.txt", "..", ".hidden", "a/../../x", "/etc/passwd", "sub/file.txt", "a\\..\\x"])
def test_attachment_names_that_escape_are_refused(ab: Any, name: str) -> None:
    t = ab.board().create("x")["id"]
    with pytest.raises(InvalidInput):
        attachments.attach(ab.db, B, t, "ignored", home=ab.settings.home, name=name, data=b"x")
    escaped = list((ab.settings.home / "boards").rglob("escape.txt")) + list(ab.settings.home.parent.glob("x"))
    assert escaped == []


# -- profiles --------------------------------------------------------------------------------------------


def test_profiles_crud(ab: Any) -> None:
    p = ab.add_profile("coder", command="claude -p", adapter="claude", description="writes code",
                       max_concurrency=2, env={"A": "1"}, skills=["py"])
    assert (p["name"], p["adapter"], p["env"], p["skills"], p["enabled"]) == ("coder", "claude", {"A": "1"}, ["py"], True)
    with pytest.raises(Conflict):
        ab.add_profile("coder", command="x")
    with pytest.raises(InvalidInput):
        ab.add_profile("bad", command="x", adapter="nope")
    with pytest.raises(InvalidInput):
        ab.add_profile("bad name", command="x")
    changed = profiles.update(ab.db, "coder", enabled=False, description="still writes code")
    assert changed["enabled"] is False and changed["description"] == "still writes code"
    assert [x["name"] for x in ab.profiles()] == ["coder"]
    t = ab.board().create("x", assignee="coder")["id"]
    ab.board().claim(t)
    with pytest.raises(Conflict, match="running"):
        profiles.remove(ab.db, "coder")
    ab.board().reclaim(t)
    profiles.remove(ab.db, "coder")
    with pytest.raises(NotFound):
        profiles.get(ab.db, "coder")


# -- read models -----------------------------------------------------------------------------------------


@pytest.fixture
def populated(ab: Any) -> dict[str, str]:
    board = ab.board()
    g = board.goal("goal one")["id"]
    ids = {
        "a1": board.create("alpha report", assignee="alice", tenant="acme", priority=5, goal=g)["id"],
        "a2": board.create("beta", assignee="alice", tenant="acme")["id"],
        "b1": board.create("gamma", assignee="bob", goal=g)["id"],
        "todo": board.create("delta unassigned")["id"],
        "arch": board.create("old", assignee="bob")["id"],
        "goal": g,
    }
    board.claim(ids["a2"])
    board.archive(ids["arch"])
    board.link(ids["a1"], ids["b1"])
    board.comment(ids["a1"], "first note")
    return ids


def test_list_filters(ab: Any, populated: dict[str, str]) -> None:
    board = ab.board()

    def ids(**kw: Any) -> list[str]:
        return [t["id"] for t in board.list(**kw)]

    assert ids(assignee="alice") == [populated["a1"], populated["a2"]]  # priority first
    assert ids(status="running") == [populated["a2"]]
    assert ids(status="ready,running", assignee="alice") == [populated["a1"], populated["a2"]]
    assert ids(tenant="acme") == [populated["a1"], populated["a2"]]
    assert ids(goal=populated["goal"]) == [populated["a1"], populated["b1"]]
    assert ids(search="DELTA") == [populated["todo"]]
    assert ids(assignee="none") == [populated["todo"]]
    assert populated["arch"] not in ids()
    assert populated["arch"] in ids(include_archived=True)
    assert len(ids(limit=2)) == 2 and ids(limit=2, offset=1)[0] == ids()[1]
    with pytest.raises(InvalidInput, match="unknown status"):
        board.list(status="finished")


def test_board_view_counts_and_per_column_limit(ab: Any, populated: dict[str, str]) -> None:
    board = ab.board()
    for i in range(5):
        board.create(f"filler {i}", assignee="carol")
    view = board.view(per_column=3)
    cols = {c["status"]: c for c in view["columns"]}
    assert "archived" not in cols
    assert cols["ready"]["count"] == 6 and len(cols["ready"]["tasks"]) == 3
    assert cols["running"]["count"] == 1 and cols["todo"]["count"] == 2
    assert view["total"] == 9
    a1 = next(c for c in cols["ready"]["tasks"] if c["id"] == populated["a1"])
    assert (a1["comment_count"], a1["child_count"]) == (1, 1)
    lanes = board.view(lanes=True)
    running = next(c for c in lanes["columns"] if c["status"] == "running")
    assert [lane["assignee"] for lane in running["lanes"]] == ["alice"]
    assert board.view(include_archived=True)["total"] == 10


def test_task_detail(ab: Any, populated: dict[str, str]) -> None:
    d = ab.board().show(populated["b1"])
    assert [p["id"] for p in d["parents"]] == [populated["a1"]]
    assert d["goal"]["title"] == "goal one"
    a1 = ab.board().show(populated["a1"])
    assert [c["id"] for c in a1["children"]] == [populated["b1"]]
    assert [c["body"] for c in a1["comments"]] == ["first note"]
    assert [e["kind"] for e in a1["events"]][:1] == ["created"]
    a2 = ab.board().show(populated["a2"])
    assert [r["status"] for r in a2["runs"]] == ["open"]
    assert queries.runs(ab.db, B, populated["a2"])[0]["id"] == a2["current_run_id"]


def test_stats_and_assignees(ab: Any, populated: dict[str, str]) -> None:
    s = queries.stats(ab.db, B)
    assert s["by_status"]["ready"] == 1 and s["by_status"]["running"] == 1 and s["by_status"]["archived"] == 1
    assert s["by_assignee"]["alice"] == {"ready": 1, "running": 1}
    assert s["by_goal"][populated["goal"]] == {"ready": 1, "todo": 1}
    ab.add_profile("carol", command="x")
    people = {a["name"]: a for a in queries.assignees(ab.db, B)}
    assert people["alice"]["total"] == 2 and people["alice"]["profile"] is False
    assert people["carol"]["profile"] is True and people["carol"]["total"] == 0


def test_events_after_cursor(ab: Any) -> None:
    board = ab.board()
    t = board.create("x", assignee="w")["id"]
    first = board.events(0)
    cursor = first[-1]["id"]
    board.claim(t)
    board.heartbeat(t, note="working")
    later = board.events(cursor)
    assert [e["kind"] for e in later] == ["claimed", "heartbeat"]
    assert later[1]["payload"] == {"note": "working"} and later[1]["run_id"] is not None
    assert board.events(later[-1]["id"]) == []
    assert [e["kind"] for e in board.events(0, kinds=["claimed"])] == ["claimed"]
    assert len(board.events(0, limit=1)) == 1


# -- bad input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"title": ""}, "title is empty"),
        ({"title": "   "}, "title is empty"),
        ({"title": "x" * 501}, "limit is 500"),
        ({"body": "x" * (256 * 1024 + 1)}, "body is"),
        ({"workspace": "dir:relative/path"}, "relative"),
        ({"workspace": "dir:/tmp/../etc"}, r"'\.\.'"),
        ({"workspace": "ftp:/x"}, "invalid workspace"),
        ({"priority": "high"}, "invalid priority"),
        ({"max_runtime": "soon"}, "invalid duration"),
        ({"max_retries": 0}, "give 1 to 1000"),
        ({"assignee": "bad name!"}, "invalid profile name"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(ab: Any, kwargs: dict[str, Any], match: str) -> None:
    args = {"title": "ok", "assignee": "w", **kwargs}
    before = snapshot(ab.db)
    with pytest.raises(InvalidInput, match=match):
        tasks.create(ab.db, B, args.pop("title"), **args)
    assert snapshot(ab.db) == before


def test_title_of_exactly_500_characters_is_fine(board: Any) -> None:
    assert len(board.create("x" * 500)["title"]) == 500


def test_bad_input_on_other_verbs(board: Any) -> None:
    t = board.create("x", assignee="w")["id"]
    before = snapshot(board.db, t)
    for call in (lambda: board.block(t, "  "), lambda: board.block(t, "r", kind="weird"),
                 lambda: board.comment(t, ""), lambda: board.edit(t, title=""), lambda: board.edit(t),
                 lambda: board.edit(t, owner="x"), lambda: board.complete(t, metadata=[1]),
                 lambda: board.fail(t, "exploded"), lambda: board.review(t, "maybe")):
        with pytest.raises(InvalidInput):
            call()
    assert snapshot(board.db, t) == before
    with pytest.raises(NotFound, match="task ids look like"):
        board.show("nonsense")
