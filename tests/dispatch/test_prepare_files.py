"""The files ``lifecycle.prepare`` writes before a spawn keep their content while it takes the
short cuts (one read, no wiki lookup without published pages, no git for non-git folders,
the JSON written by orjson, files in a new ``.board/`` created in place)."""

from __future__ import annotations

import json
import subprocess

from agentboard.kernel import wiki
from agentboard.protocol import boarddir, lifecycle
from agentboard.protocol.context import load_context


def _plain_task_json(ab, board, task_id, run_id):
    doc = boarddir.task_document(load_context(ab.db, board.slug, task_id), run_id,
                                 verify_enabled=bool(ab.settings.verify))
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"


def test_task_json_is_the_plain_serialization_of_the_task_document(ab, board, tmp_path):
    t = board.create("Ünïcode title", body="do it\n\n## Acceptance\n- it works\n\n## Non-goals\n- gold plating",
                     assignee="w", verify=["true"], review=True)
    ws = tmp_path / "ws"
    ws.mkdir()
    lifecycle.prepare(ab.db, ab.settings, board.slug, {"id": t["id"]}, 7, ws)
    written = (ws / ".board" / "task.json").read_text(encoding="utf-8")
    assert written == _plain_task_json(ab, board, t["id"], 7)
    doc = json.loads(written)
    assert doc["result_schema"]["title"].startswith("agentboard worker result")
    assert doc["acceptance_criteria"] == ["it works"] and doc["non_goals"] == ["gold plating"]
    prompt = (ws / ".board" / "prompt.md").read_text(encoding="utf-8")
    assert '"summary": "short description of what was done"' in prompt


def test_wiki_pages_are_looked_up_only_when_the_board_has_published_ones(ab, board, tmp_path):
    t = board.create("tune the parser", body="the parser is slow", assignee="w")
    ws1, ws2 = tmp_path / "a", tmp_path / "b"
    ws1.mkdir()
    ws2.mkdir()
    wiki.add(ab.db, board.slug, "draft", title="Parser notes", body="the parser draft", publish=False)
    lifecycle.prepare(ab.db, ab.settings, board.slug, {"id": t["id"]}, 1, ws1)
    index = (ws1 / ".board" / "wiki" / "INDEX.md").read_text()
    assert "No wiki pages available (no published page matches this task)" in index
    wiki.add(ab.db, board.slug, "parser", title="Parser guide", body="how the parser works", publish=True)
    lifecycle.prepare(ab.db, ab.settings, board.slug, {"id": t["id"]}, 2, ws2)
    assert "[Parser guide](parser.md)" in (ws2 / ".board" / "wiki" / "INDEX.md").read_text()
    assert (ws2 / ".board" / "wiki" / "parser.md").exists()


def test_git_excludes_only_inside_a_git_work_tree(ab, board, tmp_path):
    t = board.create("x", assignee="w")
    plain = tmp_path / "plain"
    plain.mkdir()
    lifecycle.prepare(ab.db, ab.settings, board.slug, {"id": t["id"]}, 1, plain)
    assert not (plain / ".git").exists()
    repo = tmp_path / "repo"
    nested = repo / "sub" / "dir"
    nested.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    lifecycle.prepare(ab.db, ab.settings, board.slug, {"id": t["id"]}, 2, nested)
    exclude = (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert ".board/" in exclude and ".mcp.json" in exclude


def test_a_workspace_that_becomes_a_repository_is_excluded_at_once_though_its_parent_was_looked_at(
        ab, board, tmp_path):
    t = board.create("x", assignee="w")
    first, second = tmp_path / "ws" / "first", tmp_path / "ws" / "second"
    first.mkdir(parents=True)
    second.mkdir()
    lifecycle.prepare(ab.db, ab.settings, board.slug, {"id": t["id"]}, 1, first)  # no git above ws/: remembered
    subprocess.run(["git", "init", "-q", str(second)], check=True)
    lifecycle.prepare(ab.db, ab.settings, board.slug, {"id": t["id"]}, 2, second)
    exclude = (second / ".git" / "info" / "exclude").read_text().splitlines()
    assert ".board/" in exclude and ".mcp.json" in exclude


def test_a_hand_off_with_a_number_json_allows_but_orjson_refuses_is_still_written(ab, board, tmp_path):
    parent = board.create("parent", assignee="w")
    child = board.create("child", assignee="w", parents=[parent["id"]])
    board.complete(parent["id"], summary="done", metadata={"big": 2**70, "name": "Ünïcode"})
    ws = tmp_path / "ws"
    ws.mkdir()
    lifecycle.prepare(ab.db, ab.settings, board.slug, {"id": child["id"]}, 1, ws)
    doc = json.loads((ws / ".board" / "task.json").read_text(encoding="utf-8"))
    assert doc["parents"][0]["metadata"] == {"big": 2**70, "name": "Ünïcode"}
    assert boarddir.json_text({"a": [1.5, None, "é"]}) == '{\n  "a": [\n    1.5,\n    null,\n    "é"\n  ]\n}\n'
