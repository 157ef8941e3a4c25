"""The .board/ contract end to end with real fake-agent processes: repair, degrade, verify, review."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

from agentboard.kernel import wiki
from agentboard.protocol import lifecycle

from .helpers import attempt


def kinds(board: Any, task_id: str) -> list[str]:
    return [e["kind"] for e in board.events(task_id=task_id)]


def test_prepare_writes_the_board_folder(ab: Any, board: Any, tmp_path: Path) -> None:
    t = board.create("write the report", body="## Acceptance\n- report.md exists\n## Non-goals\n- slides",
                     assignee="worker-a", verify=["test -f report.md"])
    run = board.claim(t["id"])
    ws = tmp_path / "ws"
    prompt = lifecycle.prepare(ab.db, ab.settings, "default", board.show(t["id"]), run["run_id"], ws)
    bd = ws / ".board"
    doc = json.loads((bd / "task.json").read_text())
    assert doc["id"] == t["id"] and doc["run_id"] == run["run_id"]
    assert doc["acceptance_criteria"] == ["report.md exists"] and doc["non_goals"] == ["slides"]
    assert doc["verification"]["commands"] == ["test -f report.md"]
    assert doc["result_schema"]["required"] == ["success", "summary"]
    assert doc["result_schema"]["additionalProperties"] is False
    from agentboard.protocol.context import build_worker_context
    assert (bd / "context.md").read_text() == build_worker_context(ab.db, "default", t["id"])
    assert "No wiki pages available" in (bd / "wiki" / "INDEX.md").read_text()
    assert (bd / "history.md").exists()
    text = prompt.read_text()
    assert text.startswith(f"# Task {t['id']}") and ".board/result.json" in text and "kanban_complete" in text
    mcp = json.loads((ws / ".mcp.json").read_text())["mcpServers"]["agentboard"]
    assert mcp["args"][-1] == "mcp"
    assert mcp["env"]["AGENTBOARD_TASK"] == t["id"] and mcp["env"]["AGENTBOARD_RUN_ID"] == str(run["run_id"])
    assert mcp["env"]["AGENTBOARD_PROFILE"] == "worker-a"


def test_malformed_result_is_repaired_on_the_second_attempt(ab: Any, board: Any, tmp_path: Path) -> None:
    t = board.create("fix it", assignee="worker-a")
    ws = tmp_path / "ws"
    decisions, run_id = attempt(ab, t["id"], ws, "malformed_then_fix")
    assert [d.action for d in decisions] == ["repair", "handled"]
    assert decisions[0].deadline_seconds == ab.settings.repair_deadline
    history = (ws / ".board" / "history.md").read_text()
    assert "## Repair Attempt 1" in history
    assert "$.success: must be true or false, got string" in history
    assert "$.extra: unknown key" in history
    assert "$.summary: must be a non-empty string" in history
    detail = board.show(t["id"])
    assert detail["status"] == "done"
    assert detail["runs"][-1]["summary"] == "did the work (result repaired)"
    assert len(detail["runs"]) == 1  # the repair happened inside the same run
    k = kinds(board, t["id"])
    assert "result_invalid" in k and "result_repaired" in k


def test_result_that_never_validates_degrades_to_review(ab: Any, board: Any, tmp_path: Path) -> None:
    t = board.create("parse numbers", assignee="worker-a")
    ws = tmp_path / "ws"
    decisions, run_id = attempt(ab, t["id"], ws, "never_fix")
    assert [d.action for d in decisions] == ["repair", "repair", "handled"]
    history = (ws / ".board" / "history.md").read_text()
    assert "## Repair Attempt 1" in history and "## Repair Attempt 2" in history
    assert "## Repair Attempt 3" not in history
    detail = board.show(t["id"])
    assert detail["status"] == "review"
    assert detail["runs"][-1]["summary"] == "Rewrote the tokenizer so numbers parse; tests are green."
    assert (ws / ".board" / "result.json").read_text() == "{not json"  # the raw file is kept
    events = board.events(task_id=t["id"])
    degraded = [e for e in events if e["kind"] == "result_degraded"]
    assert degraded and "not valid JSON" in degraded[0]["payload"]["errors"][0]
    unavailable = [e for e in events if e["kind"] == "review_unavailable"]
    assert len(unavailable) == 1 and unavailable[0]["payload"]["message"] == "peer review unavailable"
    assert "approved" not in [e["kind"] for e in events] and detail["reviews"] == []


def test_repair_switched_off_degrades_at_once(ab: Any, board: Any, tmp_path: Path) -> None:
    t = board.create("parse numbers", assignee="worker-a")
    settings = dataclasses.replace(ab.settings, board_repair=False)
    decisions, _ = attempt(ab, t["id"], tmp_path / "ws", "never_fix", settings=settings)
    assert [d.action for d in decisions] == ["handled"]
    assert board.show(t["id"])["status"] == "review"
    assert "Repair Attempt" not in (tmp_path / "ws" / ".board" / "history.md").read_text()


def test_success_without_evidence_is_sent_back_then_succeeds(ab: Any, board: Any, tmp_path: Path) -> None:
    t = board.create("produce out.txt", assignee="worker-a", verify=["test -f out.txt", "grep -q made out.txt"])
    ws = tmp_path / "ws"
    decisions, run1 = attempt(ab, t["id"], ws, "no_evidence")
    assert decisions[-1].action == "handled"
    detail = board.show(t["id"])
    assert detail["status"] == "ready" and detail["consecutive_failures"] == 1
    assert detail["runs"][-1]["outcome"] == "verify_failed"
    assert "test -f out.txt" in detail["runs"][-1]["error"]
    history = (ws / ".board" / "history.md").read_text()
    assert "## Verification failed" in history and "`test -f out.txt` exited with 1" in history
    decisions, run2 = attempt(ab, t["id"], ws, "no_evidence", FAKE_AGENT_PRODUCE="1")
    detail = board.show(t["id"])
    assert detail["status"] == "done"
    # the next worker saw the failure in history.md, and the run records the verification
    assert "`test -f out.txt` exited with 1" in (ws / ".board" / "history.md").read_text()
    verification = detail["runs"][-1]["metadata"]["verification"]
    assert verification["passed"] is True and [c["command"] for c in verification["commands"]] == [
        "test -f out.txt", "grep -q made out.txt"]
    assert "verified" in kinds(board, t["id"])


def test_verification_failures_trip_the_breaker(ab: Any, board: Any, tmp_path: Path) -> None:
    t = board.create("produce out.txt", assignee="worker-a", verify=["test -f out.txt"], max_retries=2)
    for _ in range(2):
        attempt(ab, t["id"], tmp_path / "ws", "no_evidence")
    detail = board.show(t["id"])
    assert detail["status"] == "blocked" and detail["block_kind"] == "gave_up"


def test_cli_report_waits_for_verification(ab: Any, board: Any, tmp_path: Path) -> None:
    t = board.create("produce out.txt", assignee="worker-a", verify=["test -f out.txt"])
    ws = tmp_path / "ws"
    attempt(ab, t["id"], ws, "cli_complete")
    detail = board.show(t["id"])
    assert detail["status"] == "ready" and detail["runs"][-1]["outcome"] == "verify_failed"
    attempt(ab, t["id"], ws, "cli_complete", FAKE_AGENT_PRODUCE="1")
    detail = board.show(t["id"])
    assert detail["status"] == "done" and detail["runs"][-1]["summary"] == "reported through the CLI"


def test_a_hand_off_to_review_waits_for_the_checks_like_a_completion(ab: Any, board: Any, tmp_path: Path) -> None:
    """A worker's request for review through its MCP tools on a task with checks: review (and an
    approval after it, even the heuristic reviewer's) never sees work its checks did not pass."""
    t = board.create("produce out.txt", assignee="worker-a", verify=["test -f out.txt"])
    ws = tmp_path / "ws"
    attempt(ab, t["id"], ws, "mcp_request_review")
    detail = board.show(t["id"])
    assert detail["status"] == "ready" and detail["runs"][-1]["outcome"] == "verify_failed", detail["runs"][-1]
    attempt(ab, t["id"], ws, "mcp_request_review", FAKE_AGENT_PRODUCE="1")
    detail = board.show(t["id"])
    run = detail["runs"][-1]
    assert detail["status"] == "review" and run["outcome"] == "review_requested"
    assert run["summary"] == "ready for a look" and run["metadata"]["verification"]["passed"] is True


def test_verify_switched_off_is_recorded(ab: Any, board: Any, tmp_path: Path) -> None:
    t = board.create("produce out.txt", assignee="worker-a", verify=["test -f out.txt"])
    settings = dataclasses.replace(ab.settings, verify=False)
    attempt(ab, t["id"], tmp_path / "ws", "no_evidence", settings=settings)
    detail = board.show(t["id"])
    assert detail["status"] == "done"
    assert detail["runs"][-1]["metadata"]["verification"]["skipped"] is True


def test_success_false_blocks_with_the_summary(ab: Any, board: Any, tmp_path: Path) -> None:
    t = board.create("migrate", assignee="worker-a")
    attempt(ab, t["id"], tmp_path / "ws", "needs_input")
    detail = board.show(t["id"])
    assert detail["status"] == "blocked" and detail["block_kind"] == "needs_input"
    assert detail["block_reason"] == "Which database should I migrate: staging or prod?"


def test_followups_become_comments_and_proposals_drafts(ab: Any, board: Any, tmp_path: Path) -> None:
    t = board.create("document the deploy", assignee="worker-a")
    decisions, _ = attempt(ab, t["id"], tmp_path / "ws", "extras")
    assert [(d.action, d.completed) for d in decisions] == [(lifecycle.ExitAction.HANDLED, True)]
    detail = board.show(t["id"])
    assert detail["status"] == "done"
    assert any("add rate limiting" in c["body"] for c in detail["comments"])
    drafts = wiki.list_pages(ab.db, "default", status="draft")
    assert [d["title"] for d in drafts] == ["Deploy checklist"] and drafts[0]["source_task_id"] == t["id"]
    assert wiki.list_pages(ab.db, "default", status="published") == []


def test_followups_of_a_success_that_fails_verification_are_not_posted(
        ab: Any, board: Any, tmp_path: Path) -> None:
    t = board.create("document the deploy", assignee="worker-a", verify=["false"])
    decisions, _ = attempt(ab, t["id"], tmp_path / "ws", "extras")
    assert [(d.action, d.completed) for d in decisions] == [(lifecycle.ExitAction.HANDLED, False)]
    detail = board.show(t["id"])
    assert detail["status"] == "ready" and detail["runs"][-1]["outcome"] == "verify_failed"
    assert not any("add rate limiting" in c["body"] for c in detail["comments"])
    assert wiki.list_pages(ab.db, "default", status="draft") == []


def test_no_result_and_no_report_is_unhandled(ab: Any, board: Any, tmp_path: Path) -> None:
    t = board.create("quiet", assignee="worker-a")
    decisions, _ = attempt(ab, t["id"], tmp_path / "ws", "silent")
    assert [d.action for d in decisions] == ["unhandled"]
    assert board.show(t["id"])["status"] == "running"  # the dispatcher decides (protocol_violation)


def test_relevant_wiki_page_reaches_the_workspace(ab: Any, board: Any, tmp_path: Path) -> None:
    wiki.add(ab.db, "default", "postgres-migrations", title="PostgreSQL migrations",
             body="Run alembic upgrade against the staging database before production.", publish=True)
    wiki.add(ab.db, "default", "coffee", title="Coffee machine", body="Descale the espresso machine weekly.",
             publish=True)
    wiki.add(ab.db, "default", "draft-migrations", title="Draft: migrations", body="alembic staging notes",
             publish=False)
    t = board.create("add an alembic migration for the staging database", assignee="worker-a")
    run = board.claim(t["id"])
    ws = tmp_path / "ws"
    lifecycle.prepare(ab.db, ab.settings, "default", board.show(t["id"]), run["run_id"], ws)
    names = sorted(p.name for p in (ws / ".board" / "wiki").iterdir())
    assert names == ["INDEX.md", "postgres-migrations.md"]
    assert "Run alembic upgrade" in (ws / ".board" / "wiki" / "postgres-migrations.md").read_text()
    # switched off: no pages at all
    off = dataclasses.replace(ab.settings, wiki_context=False)
    lifecycle.prepare(ab.db, off, "default", board.show(t["id"]), run["run_id"], ws)
    assert sorted(p.name for p in (ws / ".board" / "wiki").iterdir()) == ["INDEX.md"]
    assert "No wiki pages available" in (ws / ".board" / "wiki" / "INDEX.md").read_text()


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_board_files_never_show_in_git_status_of_a_worktree(ab: Any, board: Any, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hi\n")
    _git(repo, "add", "README.md")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "init")
    ws = repo / ".worktrees" / "t1"
    _git(repo, "worktree", "add", "-q", "-b", "ab/t1", str(ws))
    t = board.create("edit the readme", assignee="worker-a")
    run = board.claim(t["id"])
    lifecycle.prepare(ab.db, ab.settings, "default", board.show(t["id"]), run["run_id"], ws)
    (ws / ".board" / "result.json").write_text("{}")
    assert (ws / ".board" / "task.json").exists() and (ws / ".mcp.json").exists()
    assert _git(ws, "status", "--porcelain", "--untracked-files=all") == ""
    (ws / "new.txt").write_text("x")
    assert _git(ws, "status", "--porcelain") == "?? new.txt\n"


def test_review_cycle_keeps_runs_and_feeds_feedback_forward(ab: Any, board: Any, tmp_path: Path) -> None:
    t = board.create("write the changelog", assignee="worker-a", review=True)
    ws = tmp_path / "ws"
    attempt(ab, t["id"], ws, "review_context")
    assert board.show(t["id"])["status"] == "review"
    assert kinds(board, t["id"]).count("review_unavailable") == 1
    board.review(t["id"], "changes_requested", "Mention the breaking API change.", reviewer="alice")
    assert board.show(t["id"])["status"] == "ready"
    attempt(ab, t["id"], ws, "review_context")
    seen = (ws / "seen-context.md").read_text()
    assert "Mention the breaking API change." in seen.split("----")[0]  # worker context
    assert "Mention the breaking API change." in seen.split("----")[1]  # history.md
    assert "## Changes requested by alice" in seen
    detail = board.show(t["id"])
    assert detail["status"] == "review" and kinds(board, t["id"]).count("review_unavailable") == 2
    board.review(t["id"], "approved", "Looks right.", reviewer="alice")
    detail = board.show(t["id"])
    assert detail["status"] == "done"
    assert [r["summary"] for r in detail["runs"]] == ["first try", "addressed the feedback"]
    assert [r["verdict"] for r in detail["reviews"]] == ["changes_requested", "approved"]
    assert detail["runs"][0]["review"]["verdict"] == "changes_requested"
    assert detail["runs"][1]["review"]["verdict"] == "approved"
