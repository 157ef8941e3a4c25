"""Task verbs from the command line: init, create, list, show, context, edit, assign, link, comment."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import task_id


def test_init_says_where_things_are(cli, cli_home: Path) -> None:
    r = cli("init")
    assert r.code == 0, r.err
    assert str(cli_home) in r.out
    assert f"sqlite:///{cli_home / 'agentboard.db'}" in r.out
    assert "default" in r.out
    info = cli("init", "--json").json()
    assert info["home"] == str(cli_home)
    assert info["boards"] == ["default"]


def test_init_creates_a_fresh_home(cli, home: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "brand-new"
    r = cli("init", "--json", env={"AGENTBOARD_HOME": str(fresh)})
    assert r.code == 0, r.err
    info = json.loads(r.out)
    assert info["created"] is True
    assert (fresh / "agentboard.db").is_file()
    assert (fresh / "boards").is_dir()


def test_create_list_show(cli) -> None:
    cli("profiles", "add", "writer", "--command", "true")
    a = cli("create", "research the API", "--assignee", "writer", "--priority", "5", "--json").json()
    assert a["status"] == "ready" and a["priority"] == 5
    b = cli("create", "write it up", "--assignee", "writer", "--parent", a["id"], "--json").json()
    assert b["status"] == "todo"
    c = cli("create", "idea", "--triage", "--json").json()
    assert c["status"] == "triage"

    r = cli("list")
    assert r.code == 0
    assert [line.split()[0] for line in r.lines()[1:]] == [a["id"], b["id"], c["id"]]
    assert cli("list", "--status", "todo", "--json").json()[0]["id"] == b["id"]
    assert {t["id"] for t in cli("list", "--status", "ready,triage", "--json").json()} == {a["id"], c["id"]}
    assert [t["id"] for t in cli("list", "--assignee", "none", "--json").json()] == [c["id"]]
    assert [t["id"] for t in cli("list", "--search", "write", "--json").json()] == [b["id"]]
    assert [t["id"] for t in cli("list", "--mine", "--json", env={"AGENTBOARD_PROFILE": "writer"}).json()] == [a["id"], b["id"]]

    detail = cli("show", b["id"], "--json").json()
    assert detail["parents"][0]["id"] == a["id"]
    assert detail["events"][0]["kind"] == "created"
    human = cli("show", b["id"])
    assert "write it up" in human.out and a["id"] in human.out and "Parents" in human.out


def test_create_options_reach_the_task(cli, tmp_path: Path) -> None:
    body = tmp_path / "body.md"
    body.write_text("# Plan\n\nsteps")
    ws = tmp_path / "ws"  # not tmp_path itself: it holds the agentboard home, which is refused
    t = cli("create", "x", "--body-file", str(body), "--tenant", "acme", "--workspace", f"dir:{ws}",
            "--branch", "feat/x", "--max-runtime", "2h", "--max-retries", "3", "--skill", "py",
            "--skill", "sql", "--review", "--verify", "pytest -q", "--json").json()
    shown = cli("show", t["id"], "--json").json()
    assert shown["body"] == "# Plan\n\nsteps"
    assert (shown["tenant"], shown["workspace_kind"], shown["workspace_path"]) == ("acme", "dir", str(ws))
    assert (shown["branch_name"], shown["max_runtime_seconds"], shown["max_retries"]) == ("feat/x", 7200, 3)
    assert shown["skills"] == ["py", "sql"] and shown["verify"] == ["pytest -q"]
    assert shown["review_required"] is True


def test_body_file_dash_reads_stdin(cli) -> None:
    t = cli("create", "from stdin", "--body-file", "-", "--json", input="piped body\n").json()
    assert cli("show", t["id"], "--json").json()["body"] == "piped body\n"


def test_idempotency_key_returns_the_existing_task(cli, counts) -> None:
    first = cli("create", "nightly report", "--idempotency-key", "2024-01-01", "--json").json()
    before = counts()
    again = cli("create", "nightly report", "--idempotency-key", "2024-01-01", "--json").json()
    assert again["id"] == first["id"] and again["existing"] is True
    assert counts() == before


def test_edit_assign_and_unassign(cli) -> None:
    cli("profiles", "add", "coder", "--command", "true")
    tid = task_id(cli("create", "draft", "--json"))
    r = cli("edit", tid, "--title", "final", "--priority", "9", "--body", "new body", "--tenant", "t1")
    assert r.code == 0, r.err
    shown = cli("show", tid, "--json").json()
    assert (shown["title"], shown["priority"], shown["body"], shown["tenant"]) == ("final", 9, "new body", "t1")
    kinds = [e["kind"] for e in shown["events"]]
    assert "reprioritized" in kinds and "edited" in kinds

    r = cli("assign", tid, "coder")
    assert r.code == 0 and "coder" in r.out and "ready" in r.out
    r = cli("assign", tid, "none", "--json")
    assert r.json()["assignee"] is None and r.json()["status"] == "todo"


def test_edit_without_fields_is_refused(cli, counts) -> None:
    tid = task_id(cli("create", "x", "--json"))
    before = counts()
    r = cli("edit", tid)
    assert r.code == 2 and "nothing to change" in r.err
    assert counts() == before


def test_link_and_unlink_move_the_child(cli) -> None:
    cli("profiles", "add", "w", "--command", "true")
    p = task_id(cli("create", "parent", "--assignee", "w", "--json"))
    c = task_id(cli("create", "child", "--assignee", "w", "--json"))
    assert cli("link", p, c).code == 0
    assert cli("show", c, "--json").json()["status"] == "todo"
    assert cli("unlink", p, c).code == 0
    assert cli("show", c, "--json").json()["status"] == "ready"
    r = cli("unlink", p, c)
    assert r.code == 3 and "not a parent" in r.err


def test_comment_with_mention_creates_follow_up(cli) -> None:
    cli("profiles", "add", "reviewer", "--command", "true")
    tid = task_id(cli("create", "x", "--json"))
    r = cli("comment", tid, "please check this @reviewer and @nobody", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["skipped_mentions"] == ["nobody"]
    (child,) = out["spawned_subtasks"]
    assert cli("show", child, "--json").json()["assignee"] == "reviewer"
    r = cli("comment", tid, "plain @reviewer", "--no-mentions", "--json")
    assert r.json()["spawned_subtasks"] == []
    human = cli("comment", tid, "hi @ghost")
    assert "comment #" in human.out and "@ghost" in human.err
    assert [c["body"] for c in cli("show", tid, "--json").json()["comments"]][-1] == "hi @ghost"


def test_a_mention_in_a_workers_comment_lands_its_follow_up_in_triage(cli) -> None:
    cli("profiles", "add", "orch", "--command", "true", "--orchestrator")
    tid = task_id(cli("create", "x", "--json"))
    r = cli("comment", "@orch create 50 tasks", "--json", env={"AGENTBOARD_TASK": tid, "AGENTBOARD_RUN_ID": "7"})
    assert r.code == 0, r.err
    (child,) = r.json()["spawned_subtasks"]
    assert cli("show", child, "--json").json()["status"] == "triage"


def test_context_prints_the_worker_context(cli) -> None:
    tid = task_id(cli("create", "summarize logs", "--body", "look at /var/log", "--json"))
    cli("comment", tid, "remember the rotation")
    r = cli("context", tid)
    assert r.code == 0, r.err
    assert "summarize logs" in r.out and "look at /var/log" in r.out and "remember the rotation" in r.out
    doc = cli("context", tid, "--json").json()
    assert doc["task_id"] == tid and doc["board"] == "default"
    assert doc["markdown"] == r.out  # the same text a worker reads


def test_json_read_verbs_print_one_document(cli) -> None:
    tid = task_id(cli("create", "x", "--json"))
    for args in (["list"], ["show", tid], ["runs", tid], ["attachments", tid], ["stats"], ["assignees"],
                 ["boards", "list"], ["boards", "show"], ["profiles", "list"], ["goals", "list"], ["init"],
                 ["context", tid]):
        r = cli(*args, "--json")
        assert r.code == 0, (args, r.err)
        json.loads(r.out)  # the whole of stdout is one JSON document


def test_show_gives_a_multi_line_block_reason_as_its_first_line(cli) -> None:
    tid = cli("create", "stuck", "--json").json()["id"]
    cli("block", tid, "last output:\nstep 1 ok\nstep 2 failed")
    lines = cli("show", tid).out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("blocked"))
    assert lines[at].endswith("[manual] last output:")
    # the next field starts at the left edge
    assert lines[at + 1].split()[0] in ("workspace", "created")


def test_list_says_when_filters_match_nothing_or_the_limit_cuts_it_short(cli) -> None:
    assert cli("list").out.strip() == "no tasks on board 'default'"
    for title in ("one", "two", "three"):
        cli("create", title)
    r = cli("list", "--status", "running")
    assert r.code == 0 and r.out.strip() == "no tasks match these filters on board 'default'"
    r = cli("list", "--limit", "2")
    assert len(r.lines()) == 3  # header + 2 rows
    assert "--limit" in r.err
    assert cli("list", "--limit", "5").err == ""


def test_a_task_for_a_name_that_is_no_profile_gets_a_warning(cli) -> None:
    cli("profiles", "add", "writer", "--command", "true")
    r = cli("create", "draft it", "--assignee", "wrtier")
    assert r.code == 0 and r.out.startswith("t_")
    assert r.err.startswith("warning: no profile named 'wrtier'") and "profiles add wrtier" in r.err
    tid = r.out.split()[0]
    assert cli("assign", tid, "writer").err == ""
    assert "no profile named 'alice'" in cli("assign", tid, "alice").err
    assert cli("create", "for a profile", "--assignee", "writer").err == ""
    assert cli("create", "for nobody").err == ""


def test_task_verbs_find_a_task_on_a_board_that_is_not_the_current_one(cli, tmp_path: Path) -> None:
    cli("profiles", "add", "w", "--command", "true")
    cli("boards", "create", "other")
    a = task_id(cli("create", "away", "--assignee", "w", "--board", "other", "--json"))
    b = task_id(cli("create", "away too", "--assignee", "w", "--board", "other", "--json"))
    assert cli("boards", "show", "--json").json()["slug"] == "default"  # the current board

    def ok(*args: str) -> str:
        r = cli(*args)
        assert r.code == 0, (args, r.err)
        return r.out

    assert json.loads(ok("show", a, "--json"))["board"] == "other"
    assert "away" in ok("context", a)
    ok("comment", a, "seen from the default board")
    ok("edit", a, "--priority", "3")
    ok("assign", a, "w")
    ok("link", a, b)
    assert json.loads(ok("show", b, "--json"))["parents"][0]["id"] == a
    ok("unlink", a, b)
    assert "blocked" in ok("block", a, "waiting for review")
    assert "ready" in ok("unblock", a)
    ok("claim", a)
    ok("heartbeat", a, "--note", "busy")
    assert "ready" in ok("reclaim", a)
    (tmp_path / "notes.txt").write_text("hello")
    ok("attach", a, str(tmp_path / "notes.txt"))
    assert [x["name"] for x in json.loads(ok("attachments", a, "--json"))] == ["notes.txt"]
    out = ok("complete", a, b)
    assert f"{a}: done" in out and f"{b}: done" in out
    ok("reopen", a)
    ok("archive", a)
    ok("restore", a)
    assert [r["outcome"] for r in json.loads(ok("runs", a, "--json"))] == ["reclaimed", "completed"]
    assert "commented" in ok("tail", a, "--once")
    no_log = cli("log", a)  # found on its board: no worker ever wrote a log for it
    assert no_log.code == 3 and "no worker log" in no_log.err and "/other/" in no_log.err
    # nothing landed on the current board
    assert cli("list", "--json").json() == []
    detail = json.loads(ok("show", a, "--json"))
    assert (detail["priority"], detail["comments"][0]["body"]) == (3, "seen from the default board")
