"""The reviewer agent with a real dispatcher, real worker processes and real git repositories: a
reviewer profile reading the diff of a worktree, the LLM reviewer over real HTTP (the loopback
OpenAI-compatible server), a reviewer refused for its own work, and which reviewer a board gets
by default."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentboard.config import Settings
from agentboard.protocol import review, review_context

RESULT_OK = "sh -c " + shlex.quote("echo '{\"success\": true, \"summary\": \"did it\"}' > .board/result.json")

# a coder that writes greeting.txt on its branch: misspelt at first, correct once the review's
# feedback is in its context
CODER = r'''
import json, pathlib, subprocess, sys
ctx = pathlib.Path(".board/context.md").read_text()
feedback = "Changes requested:" in ctx and "wrold" in ctx
pathlib.Path("greeting.txt").write_text("hello world\n" if feedback else "hello wrold\n")
git = ["git", "-c", "user.email=a@b", "-c", "user.name=coder"]
subprocess.run(git + ["add", "greeting.txt"], check=True)
subprocess.run(git + ["commit", "-qm", "greeting"], check=True)
summary = "fixed the typo the reviewer found" if feedback else "wrote the greeting"
pathlib.Path(".board/result.json").write_text(json.dumps({"success": True, "summary": summary}))
'''

# a reviewer that reads the review context: it asks for changes while the diff adds "wrold"
REVIEWER = r'''
import json, os, pathlib, shutil
ctx = pathlib.Path(".board/review-context.md").read_text()
n = len(list(pathlib.Path(os.environ["SEEN"]).glob("context-*")))
shutil.copy(".board/review-context.md", pathlib.Path(os.environ["SEEN"]) / f"context-{n}.md")
(pathlib.Path(os.environ["SEEN"]) / f"cwd-{n}.txt").write_text(os.getcwd())
if "+hello wrold" in ctx:
    verdict = {"verdict": "changes_requested", "score": 40, "summary": "greeting.txt says wrold: spell it world",
               "findings": [{"file": "greeting.txt", "severity": "major", "message": "typo: wrold"}]}
else:
    verdict = {"verdict": "approved", "score": 95, "summary": "the greeting is right"}
pathlib.Path(".board/review-verdict.json").write_text(json.dumps(verdict))
'''


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "t")
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-qm", "init")
    return path


def script(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(p))}"


@pytest.fixture
def drive(ab: Any) -> Iterator[Callable[[Callable[[], bool]], None]]:
    """Run a real dispatcher (with the API it serves its workers) until ``done()``."""
    from agentboard.api.serve import WorkerAPI, run_tokens
    from agentboard.dispatch.dispatcher import Dispatcher

    ab.settings.spawn_grace = 0.5
    api = WorkerAPI(ab.settings, ab.db).start()
    d = Dispatcher(ab.db, ab.settings, api_url=api.url, token_factory=run_tokens(ab.db))

    def run(done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 90
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError("the dispatcher did not settle the task")
            d.run_pass()
            d.wait_idle(30)
            time.sleep(0.05)

    try:
        yield run
    finally:
        d.stop()
        api.stop()


def kinds(board: Any, task_id: str) -> list[str]:
    return [e["kind"] for e in board.events(task_id=task_id, limit=100000)]


def settled(board: Any, task_id: str) -> Callable[[], bool]:
    return lambda: board.show(task_id)["status"] in ("done", "blocked") or (
        board.show(task_id)["status"] == "review" and "review_unavailable" in kinds(board, task_id))


def test_a_reviewer_profile_reads_the_worktree_diff_asks_for_changes_then_approves_the_fix(
        ab: Any, drive: Any, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    seen = tmp_path / "seen"
    seen.mkdir()
    ab.create_board("code", workdir=str(repo), workdir_mode="linked-existing")
    board = ab.board("code")
    ab.add_profile("coder", command=script(tmp_path, "coder.py", CODER))
    ab.add_profile("reviewer", command=script(tmp_path, "reviewer.py", REVIEWER), env={"SEEN": str(seen)})
    t = board.create("write the greeting", assignee="coder", review=True,
                     body="Write greeting.txt.\n\n## Acceptance criteria\n\n- it says hello world\n\n## Notes\n\nnone")
    drive(settled(board, t["id"]))

    detail = board.show(t["id"])
    assert detail["status"] == "done"
    assert [(r["verdict"], r["reviewer"]) for r in detail["reviews"]] == [
        ("changes_requested", "profile:reviewer"), ("approved", "profile:reviewer")]
    assert detail["reviews"][0]["findings"][0]["message"] == "typo: wrold"
    # the second attempt of the coder saw the feedback in its context
    work = [r for r in detail["runs"] if not review_context.is_review_run(r)]
    assert [r["summary"] for r in work] == ["wrote the greeting", "fixed the typo the reviewer found"]
    # two review runs, by the reviewer profile, in the task's worktree
    reviews = [r for r in detail["runs"] if review_context.is_review_run(r)]
    assert [(r["profile"], r["outcome"]) for r in reviews] == [("reviewer", "reviewed"), ("reviewer", "reviewed")]
    worktree = repo / ".worktrees" / t["id"]
    assert (seen / "cwd-0.txt").read_text() == str(worktree)
    first = (seen / "context-0.md").read_text()
    assert f"`git diff main...ab/{t['id']}`" in first and "+hello wrold" in first
    assert "- it says hello world" in first.split("## Acceptance criteria")[1].split("##")[0]
    assert "wrote the greeting" in first and "(none: this is the first review)" in first
    second = (seen / "context-1.md").read_text()
    assert "+hello world" in second and "changes_requested by profile:reviewer, score 40" in second
    spawned = [e for e in board.events(task_id=t["id"], limit=1000) if e["kind"] == "spawned"]
    assert [bool(e["payload"].get("review_run")) for e in spawned] == [False, True, False, True]


def test_the_llm_reviewer_requests_changes_then_approves(fake_llm: Any, ab: Any, drive: Any) -> None:
    fake_llm.script(
        'Here is my verdict: {"verdict": "changes_requested", "score": 35, "summary": "Add a test for it."}',
        '```json\n{"verdict": "approved", "score": 88, "summary": "Tested now.", "findings": []}\n```')
    ab.add_profile("worker", command=RESULT_OK)
    board = ab.board()
    t = board.create("parse the dates", assignee="worker", review=True)
    drive(settled(board, t["id"]))

    detail = board.show(t["id"])
    assert detail["status"] == "done"
    assert [(r["verdict"], r["reviewer"], r["score"]) for r in detail["reviews"]] == [  # noqa: E501
        ("changes_requested", "llm (fake-model)", 35), ("approved", "llm (fake-model)", 88)]
    assert any(c["body"] == "Changes requested: Add a test for it." for c in detail["comments"])
    assert len(fake_llm.requests) == 2
    asked = json.dumps(fake_llm.requests[0])
    assert "parse the dates" in asked and "did it" in asked
    assert kinds(board, t["id"]).count("llm_used") == 2
    assert [r["outcome"] for r in detail["runs"]] == ["review_requested", "reviewed", "review_requested", "reviewed"]


def test_an_llm_answer_that_is_no_verdict_never_approves(fake_llm: Any, ab: Any, drive: Any) -> None:
    fake_llm.script("looks fine to me", '{"verdict": "maybe"}')
    ab.add_profile("worker", command=RESULT_OK)
    board = ab.board()
    t = board.create("parse the dates", assignee="worker", review=True)
    drive(settled(board, t["id"]))
    detail = board.show(t["id"])
    assert detail["status"] == "review" and detail["reviews"] == []
    unavailable = [e for e in board.events(task_id=t["id"], limit=1000) if e["kind"] == "review_unavailable"]
    assert len(unavailable) == 1 and "the reviewer failed 2 times" in unavailable[0]["payload"]["reason"]
    assert kinds(board, t["id"]).count("protocol_violation") == 2


def test_a_reviewer_profile_never_reviews_its_own_work(ab: Any, drive: Any) -> None:
    ab.add_profile("coder", command=RESULT_OK)
    ab.create_board("own", settings={"reviewer": "profile:coder"})
    board = ab.board("own")
    t = board.create("write it", assignee="coder", review=True)
    drive(settled(board, t["id"]))
    detail = board.show(t["id"])
    assert detail["status"] == "review" and detail["reviews"] == []
    assert [r["outcome"] for r in detail["runs"]] == ["review_requested"]  # no review run
    reason = [e for e in detail["events"] if e["kind"] == "review_unavailable"][0]["payload"]["reason"]
    assert "'coder' did this work itself" in reason and "never reviews its own work" in reason


def _settings(tmp_path: Path, **kw: Any) -> Settings:
    return Settings(home=tmp_path, **kw)


def test_the_default_reviewer_is_the_reviewer_profile_then_the_llm_then_nobody(tmp_path: Path) -> None:
    profile = {"reviewer": {"name": "reviewer", "enabled": True}}
    assert review.choose_reviewer(_settings(tmp_path), {}, profile) == review.Reviewer("profile", "reviewer")
    llm = _settings(tmp_path, llm_base_url="http://127.0.0.1:9/v1", llm_model="m")
    assert review.choose_reviewer(llm, {}, {}).mode == "llm"
    off = review.choose_reviewer(_settings(tmp_path), {}, {})
    assert off.mode == "off" and "no LLM is configured" in off.reason
    # a board's setting wins over the default; a missing profile or LLM is unavailable, with why
    assert review.choose_reviewer(llm, {"reviewer": "off"}, profile).mode == "off"
    assert review.choose_reviewer(_settings(tmp_path), {"reviewer": "heuristic"}, profile).mode == "heuristic"
    gone = review.choose_reviewer(_settings(tmp_path), {"reviewer": "profile:critic"}, profile)
    assert gone.mode == "off" and "'critic'" in gone.reason and "does not exist" in gone.reason
    nollm = review.choose_reviewer(_settings(tmp_path), {"reviewer": "llm"}, profile)
    assert nollm.mode == "off" and "LLM reviewer" in nollm.reason
    assert review.choose_reviewer(_settings(tmp_path, reviewer_agent="on"), {}, {}).mode == "off"


def test_a_board_refuses_an_unknown_reviewer_setting(ab: Any) -> None:
    from agentboard.domain.errors import InvalidInput
    from agentboard.domain.settings_schema import board_settings

    assert board_settings({"reviewer": "profile:critic"}) == {"reviewer": "profile:critic"}
    with pytest.raises(InvalidInput, match="reviewer"):
        board_settings({"reviewer": "somebody"})


def test_a_long_diff_is_cut_with_a_note_of_what_was_cut() -> None:
    text = "".join(f"diff --git a/f{i}.txt b/f{i}.txt\n" + "+line\n" * 50 for i in range(10))
    out = review_context.cut(review_context.Diff(text, "test"), 1000)
    assert len(out.text) <= 1000 and out.text.endswith("\n")
    assert "cut to the first" in out.note and "f9.txt" in out.note and "f0.txt" not in out.note


# a reviewer that answers through the kanban_review MCP tool of the server its .mcp.json names
MCP_REVIEWER = r'''
import json, pathlib, anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
entry = json.loads(pathlib.Path(".mcp.json").read_text())["mcpServers"]["agentboard"]
params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"])

async def main():
    async with Client(params, read_timeout_seconds=60) as client:
        bad = await client.call_tool("kanban_review", {"verdict": "maybe", "score": 5, "summary": ""})
        assert bad.is_error, bad
        ok = await client.call_tool("kanban_review", {"verdict": "rejected", "score": 10,
                                                      "summary": "the task asks for something else"})
        assert not ok.is_error, ok

anyio.run(main)
'''


def test_a_reviewer_profile_answers_through_the_kanban_review_tool(ab: Any, drive: Any, tmp_path: Path) -> None:
    ab.add_profile("worker", command=RESULT_OK)
    ab.add_profile("critic", command=script(tmp_path, "critic.py", MCP_REVIEWER))
    ab.create_board("mcp", settings={"reviewer": "profile:critic"})
    board = ab.board("mcp")
    t = board.create("write it", assignee="worker", review=True)
    drive(settled(board, t["id"]))
    detail = board.show(t["id"])
    assert detail["status"] == "blocked" and detail["block_kind"] == "rejected"
    assert [(r["verdict"], r["reviewer"]) for r in detail["reviews"]] == [("rejected", "profile:critic")]


def test_a_reviewer_profile_answers_with_the_review_verb(ab: Any, drive: Any, tmp_path: Path) -> None:
    ab.add_profile("worker", command=RESULT_OK)
    seen = tmp_path / "reviewed-once"
    cli_reviewer = "sh -c " + shlex.quote(
        f'if [ -e {seen} ]; then agentboard review "$AGENTBOARD_TASK" --approve --score 90; exit; fi; '
        f'touch {seen}; '
        'agentboard review "$AGENTBOARD_TASK" --request-changes "add a test" 2> no-score.txt; '
        'echo "no score: $?" >> answers.txt; '
        'agentboard review t_00000000 --approve --score 90 2> other-task.txt; '
        'echo "other task: $?" >> answers.txt; '
        'agentboard review "$AGENTBOARD_TASK" --request-changes "add a test for the empty case" --score 45')
    ab.add_profile("critic", command=cli_reviewer)
    ab.create_board("verb", settings={"reviewer": "profile:critic"})
    board = ab.board("verb")
    t = board.create("write it", assignee="worker", review=True)
    drive(settled(board, t["id"]))
    detail = board.show(t["id"])
    assert detail["status"] == "done"
    assert [(r["verdict"], r["reviewer"], r["score"]) for r in detail["reviews"]] == [
        ("changes_requested", "profile:critic", 45), ("approved", "profile:critic", 90)]
    assert detail["reviews"][0]["summary"] == "add a test for the empty case"
    workspace = Path(detail["runs"][0]["workspace_path"] or detail["workspace_path"])
    # a verdict without a score, and one for another task, were refused (exit 2 and 5)
    assert (workspace / "answers.txt").read_text().splitlines() == ["no score: 2", "other task: 5"]


def test_a_slow_reviewer_keeps_its_review_runs_claim(ab: Any, drive: Any) -> None:
    ab.settings.claim_ttl = 2  # another host would take a review run unrenewed for 2 s as abandoned
    ab.add_profile("worker", command=RESULT_OK)
    slow = "sh -c " + shlex.quote(
        "sleep 3; echo '{\"verdict\": \"approved\", \"score\": 90, \"summary\": \"fine\"}' > .board/review-verdict.json")
    ab.add_profile("slowpoke", command=slow)
    ab.create_board("slow", settings={"reviewer": "profile:slowpoke"})
    board = ab.board("slow")
    t = board.create("write it", assignee="worker", review=True)
    drive(settled(board, t["id"]))
    detail = board.show(t["id"])
    assert detail["status"] == "done"
    assert [(r["verdict"], r["reviewer"]) for r in detail["reviews"]] == [("approved", "profile:slowpoke")]
    renewed = [e for e in board.events(task_id=t["id"], limit=1000)
               if e["kind"] == "claim_extended" and e["payload"].get("review_run")]
    assert renewed, "the live reviewer's claim was never renewed"
