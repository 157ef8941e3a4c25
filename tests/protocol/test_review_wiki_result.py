"""Review verdicts and the reviewer switch, the wiki verbs, and result.json validation."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from testenv import copy_template

from agentboard.dispatch import finish
from agentboard.domain.errors import InvalidInput
from agentboard.protocol import result, review


def _in_review(board: Any, title: str = "ship it", summary: str = "shipped") -> dict[str, Any]:
    t = board.create(title, assignee="worker-a", review=True)
    run = board.claim(t["id"])
    board.complete(t["id"], summary=summary, run_id=run["run_id"])
    return t


def test_reviewer_off_never_approves_and_notes_once(ab: Any, board: Any) -> None:
    t = _in_review(board)
    for _ in range(2):
        out = finish.review_entered(ab.db, ab.settings, "default", t["id"])
    assert out["action"] == "already_noted"
    events = [e for e in board.events(task_id=t["id"]) if e["kind"] == "review_unavailable"]
    assert len(events) == 1 and events[0]["payload"]["message"] == "peer review unavailable"
    assert "no LLM is configured" in events[0]["payload"]["reason"]
    detail = board.show(t["id"])
    assert detail["status"] == "review" and detail["reviews"] == []


def test_heuristic_reviewer_is_marked(ab: Any, board: Any) -> None:
    t = _in_review(board)
    settings = dataclasses.replace(ab.settings, reviewer_agent="heuristic")
    out = finish.review_entered(ab.db, settings, "default", t["id"])
    assert out == {"action": "heuristic", "verdict": "approved", "status": "done"}
    rec = board.show(t["id"])["reviews"][0]
    assert rec["reviewer"] == "heuristic" and rec["summary"].startswith("[heuristic]")


def test_verdict_file_is_validated_and_applied(ab: Any, board: Any, tmp_path: Path) -> None:
    t = _in_review(board)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"verdict": "maybe", "score": 140, "summary": "", "extra": 1,
                               "findings": [{"severity": "huge", "message": ""}]}))
    with pytest.raises(InvalidInput) as err:
        review.apply_verdict_file(ab.db, "default", t["id"], bad, apply=finish.review)
    for part in ("$.verdict", "$.score", "$.extra: unknown key", "$.findings[0].severity", "$.findings[0].message"):
        assert part in err.value.message
    assert board.show(t["id"])["status"] == "review" and board.show(t["id"])["reviews"] == []
    good = tmp_path / "review-verdict.json"
    good.write_text(json.dumps({"score": 55, "verdict": "changes_requested", "summary": "Handle empty input.",
                                "findings": [{"file": "src/x.py", "severity": "major", "message": "crashes on ''"}]}))
    review.apply_verdict_file(ab.db, "default", t["id"], good, apply=finish.review)
    detail = board.show(t["id"])
    assert detail["status"] == "ready"
    assert detail["reviews"][0]["score"] == 55 and detail["reviews"][0]["findings"][0]["file"] == "src/x.py"
    assert detail["runs"][-1]["review"]["verdict"] == "changes_requested"
    from agentboard.protocol.context import build_worker_context
    ctx = build_worker_context(ab.db, "default", t["id"])
    assert "Handle empty input." in ctx and "[major] (src/x.py) crashes on ''" in ctx


def _cli(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    import os
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    env["AGENTBOARD_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "agentboard", *args], capture_output=True, text=True, env=env,
                          input=stdin, timeout=60)


def test_wiki_cli(home: Path, tmp_path: Path, sqlite_template: Path) -> None:
    copy_template(sqlite_template, home)
    page = tmp_path / "deploy.md"
    page.write_text("Use the blue/green switch.\n")
    assert _cli(home, "wiki", "list").stdout.strip() == "No wiki pages."
    r = _cli(home, "wiki", "add", "deploy", "--title", "Deploying", "--file", str(page))
    assert r.returncode == 0 and r.stdout.strip() == "deploy: draft"
    dup = _cli(home, "wiki", "add", "deploy", "--title", "Again", "--file", str(page))
    assert dup.returncode == 4 and "already exists" in dup.stderr
    bad = _cli(home, "wiki", "add", "../etc", "--title", "x", "--file", str(page))
    assert bad.returncode == 2 and "invalid wiki slug" in bad.stderr
    listed = json.loads(_cli(home, "wiki", "list", "--json").stdout)
    assert [(p["slug"], p["status"]) for p in listed] == [("deploy", "draft")]
    assert _cli(home, "wiki", "publish", "deploy").stdout.strip() == "deploy: published"
    shown = _cli(home, "wiki", "show", "deploy")
    assert "# Deploying" in shown.stdout and "blue/green" in shown.stdout
    assert json.loads(_cli(home, "wiki", "show", "deploy", "--json").stdout)["status"] == "published"
    assert _cli(home, "wiki", "discard", "deploy").returncode == 0
    missing = _cli(home, "wiki", "show", "deploy")
    assert missing.returncode == 3 and "no wiki page 'deploy'" in missing.stderr


@pytest.mark.parametrize(
    ("doc", "error"),
    [
        ({"summary": "x"}, "$.success: required"),
        ({"success": True}, "$.summary: required"),
        ({"success": True, "summary": "  "}, "$.summary: must be a non-empty string, got an empty string"),
        ({"success": 1, "summary": "x"}, "$.success: must be true or false, got integer"),
        ({"success": True, "summary": "x", "files": []}, "$.files: unknown key"),
        ({"success": True, "summary": "x", "schema_version": 2}, "$.schema_version: must be 1, got 2"),
        ({"success": True, "summary": "x", "wikiProposals": [{"note": "n"}]}, "$.wikiProposals[0].contentMd: required"),
        ({"success": True, "summary": "x", "wikiProposals": [{"contentMd": ""}]},
         "$.wikiProposals[0].contentMd: must be a non-empty string"),
        ({"success": True, "summary": "x", "usage": {"input_tokens": -1}}, "$.usage.input_tokens: must be an integer >= 0"),
        ({"success": True, "summary": "x", "filesChanged": "a.py"}, "$.filesChanged: must be an array of strings"),
        ([], "$: must be a JSON object, got array"),
    ],
)
def test_result_validation_names_each_error(doc: Any, error: str) -> None:
    errs = result.validate(doc)
    assert any(e.startswith(error) for e in errs), errs


def test_result_example_and_schema_agree() -> None:
    assert result.validate(result.RESULT_EXAMPLE) == []
    assert set(result.RESULT_EXAMPLE) == set(result.RESULT_SCHEMA["properties"])
    assert result.parse_text("{oops").errors[0].startswith("$: not valid JSON")
