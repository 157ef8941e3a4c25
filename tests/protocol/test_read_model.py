"""One read model of a task with its surroundings: `show`, the worker context and `.board/`
files read the same data, so what one shows the others show too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentboard.dispatch import finish
from agentboard.protocol import lifecycle
from agentboard.protocol.context import build_worker_context, load_context


def test_a_goal_on_another_board_is_shown_neither_by_show_nor_in_the_context(
        ab: Any, board: Any, tmp_path: Path) -> None:
    ab.create_board("ops")
    foreign = ab.board("ops").goal("Rotate the ops credentials", acceptance=["no key older than 90 days"])
    t = board.create("tidy the README", assignee="worker-a")
    # a task row pointing at another board's goal (the verbs refuse to make one; older data has them)
    ab.db.write(lambda tx: tx.execute("UPDATE tasks SET goal_id = :g WHERE id = :t",
                                      {"g": foreign["id"], "t": t["id"]}))
    detail = board.show(t["id"])
    assert detail["goal_id"] == foreign["id"] and detail["goal"] is None
    context = build_worker_context(ab.db, "default", t["id"])
    assert "Rotate the ops credentials" not in context and "no key older than 90 days" not in context
    ws = tmp_path / "ws"
    ws.mkdir()
    lifecycle.prepare(ab.db, ab.settings, "default", {"id": t["id"]}, 1, ws)
    task_json = json.loads((ws / ".board" / "task.json").read_text(encoding="utf-8"))
    assert task_json["goal"] is None and task_json["acceptance_criteria"] == []


def test_a_goal_on_the_same_board_is_shown_with_its_description_everywhere(ab: Any, board: Any) -> None:
    goal = board.goal("Faster imports", body="Cold start is what users notice.", acceptance=["under 100 ms"])
    t = board.create("lazy-load numpy", assignee="worker-a", goal=goal["id"])
    detail = board.show(t["id"])
    assert detail["goal"]["title"] == "Faster imports" and detail["goal"]["acceptance"] == ["under 100 ms"]
    assert detail["goal"]["body"] == "Cold start is what users notice."
    context = build_worker_context(ab.db, "default", t["id"])
    assert "## Goal: Faster imports" in context and "Cold start is what users notice." in context


def test_review_findings_read_decoded_by_show_and_by_the_context(ab: Any, board: Any) -> None:
    t = board.create("parse dates", assignee="worker-a", review=True)
    run = board.claim(t["id"])
    board.complete(t["id"], summary="parser written", run_id=run["run_id"])
    finish.apply_verdict(ab.db, "default", t["id"], {
        "verdict": "changes_requested", "score": 40, "summary": "Handle time zones.",
        "findings": [{"file": "src/dates.py", "severity": "major", "message": "drops the UTC offset"}]})
    finding = {"file": "src/dates.py", "severity": "major", "message": "drops the UTC offset"}
    assert board.show(t["id"])["reviews"][0]["findings"] == [finding]
    assert load_context(ab.db, "default", t["id"])["reviews"][0]["findings"] == [finding]
    context = build_worker_context(ab.db, "default", t["id"])
    assert "[major] (src/dates.py) drops the UTC offset" in context


def test_show_and_the_context_read_the_same_parents_runs_and_comments(ab: Any, board: Any) -> None:
    parent = board.create("design the schema", assignee="worker-a")
    run = board.claim(parent["id"])
    board.complete(parent["id"], summary="schema in docs/schema.md", run_id=run["run_id"])
    t = board.create("write the migration", assignee="worker-a", parents=[parent["id"]])
    run = board.claim(t["id"])
    board.fail(t["id"], "crashed", run_id=run["run_id"], error="segfault in the driver", count_failure=False)
    for i in range(35):
        board.comment(t["id"], f"note {i}")
    detail = board.show(t["id"])
    assert [p["id"] for p in detail["parents"]] == [parent["id"]]
    assert detail["parents"][0]["handoff"]["summary"] == "schema in docs/schema.md"
    assert len(detail["comments"]) == 35 and detail["runs"][-1]["error"] == "segfault in the driver"
    context = build_worker_context(ab.db, "default", t["id"])
    assert "schema in docs/schema.md" in context and "segfault in the driver" in context
    assert "(5 older comments not shown)" in context and "note 34" in context and "note 4\n" not in context
