"""A worker owns its workspace and plants links there; the dispatcher, which prepares the next
run's ``.board/`` and ``.mcp.json`` with more rights than the worker, must never write, delete or
read anything outside the workspace through them.

Each test runs a hostile script agent under the real dispatcher (``none``, and ``user`` and
``sandbox`` where the attack applies): it plants its links and exits, the dispatcher prepares its
retry, and the host is checked afterwards (victim folders intact, nothing written into them, no
secret merged, read or recorded).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from testenv import wait_for

import agentboard

from .test_isolation import agentboard_cli, home, require_bwrap, require_root, worker_user  # noqa: F401

PYTHON = "/usr/bin/python3"  # a worker user can run it (the test's interpreter may be under /root)

PLANT = textwrap.dedent('''
    import json, os, shutil, sys

    victims = json.loads(os.environ["VICTIMS"])

    def stage():
        try:
            return int(open("stage").read())
        except OSError:
            return 0

    def look(path):
        try:
            return {"link": os.path.islink(path), "text": open(path, errors="replace").read()}
        except OSError as exc:
            return {"link": os.path.islink(path), "error": type(exc).__name__}

    n = stage()
    open("stage", "w").write(str(n + 1))
    if n == 0:
        # a link at the wiki folder (the next prepare replaces it), at the archive folder (a
        # result of ours is moved into it) and at .mcp.json (merged into the next one)
        shutil.rmtree(".board/wiki", ignore_errors=True)
        os.symlink(victims["wiki"], ".board/wiki")
        shutil.rmtree(".board/archive", ignore_errors=True)
        os.symlink(victims["archive"], ".board/archive")
        open(".board/review-verdict.json", "w").write('{"verdict": "approved"}')
        os.remove(".mcp.json")
        os.symlink(victims["secret"], ".mcp.json")
        sys.exit(3)
    if n == 1:
        json.dump({"mcp": look(".mcp.json"), "wiki_link": os.path.islink(".board/wiki"),
                   "archive_link": os.path.islink(".board/archive"),
                   "archived": sorted(os.listdir(".board/archive"))}, open("findings-1.json", "w"))
        # the whole .board folder a link to someone else's folder
        shutil.rmtree(".board")
        os.symlink(victims["board"], ".board")
        sys.exit(3)
    json.dump({"mcp": look(".mcp.json"), "board_link": os.path.islink(".board"),
               "board": sorted(os.listdir(".board")), "context": look(".board/context.md")},
              open("findings-2.json", "w"))
    json.dump({"success": True, "summary": "survived"}, open(".board/result.json", "w"))
''')


def tree(root: Path) -> dict[str, str]:
    """Every entry beneath ``root`` with its kind and content digest (links not followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


class Victims:
    """Folders and files outside every workspace, owned by root: what a worker aims its links at."""

    def __init__(self, parent: Path) -> None:
        self.root = parent / "victims"
        self.board = self.root / "someone-elses-folder"
        self.wiki = self.root / "team-notes"
        self.archive = self.root / "reports"
        for d, files in ((self.board, {"keep.txt": "do not touch\n"}),
                         (self.wiki, {"page.md": "# a page someone wrote\n", "sub/deeper.md": "deeper\n"}),
                         (self.archive, {"q3.pdf": "%PDF quarterly\n"})):
            for name, text in files.items():
                (d / name).parent.mkdir(parents=True, exist_ok=True)
                (d / name).write_text(text)
        self.marker = "SECRET-" + secrets.token_hex(8)
        self.secret = self.root / "root-only.json"
        self.secret.write_text(json.dumps({"mcpServers": {"stolen": {"command": self.marker}}}))
        self.secret.chmod(0o600)
        # shaped like a valid result: read through a link, it would complete the task with it
        self.secret_result = self.root / "root-only-result.json"
        self.secret_result.write_text(json.dumps({"success": True, "summary": self.marker}))
        self.secret_result.chmod(0o600)
        self.root.chmod(0o755)
        self.before = tree(self.root)

    def env(self) -> str:
        return json.dumps({"board": str(self.board), "wiki": str(self.wiki), "archive": str(self.archive),
                           "secret": str(self.secret)})

    def assert_intact(self) -> None:
        assert tree(self.root) == self.before
        assert self.secret.stat().st_nlink == 1 and self.secret_result.stat().st_nlink == 1


def drive(ab: Any, done: Callable[[], bool], timeout: float = 120.0) -> None:
    """Run the real dispatcher until ``done()``."""
    from agentboard.dispatch.dispatcher import Dispatcher

    d = Dispatcher(ab.db, ab.settings)
    d.start()
    try:
        wait_for(done, timeout=timeout, what="the dispatcher to finish the task")
    finally:
        d.stop()


def finished(ab: Any, task_id: str) -> Callable[[], bool]:
    return lambda: ab.board().show(task_id)["status"] in ("done", "blocked", "review")


def _isolation(mode: str, at: Path, user: str | None) -> None:
    if mode == "user":
        require_root()
        assert user is not None
        r = agentboard_cli(at, "init", "--worker-user", user)
        assert r.returncode == 0, r.stderr
    elif mode == "sandbox":
        require_bwrap()


@pytest.mark.parametrize("mode", ["none", "user", "sandbox"])
def test_a_worker_cannot_steer_the_dispatcher_through_links_it_plants_in_its_workspace(
        mode: str, home: Path, request: pytest.FixtureRequest) -> None:  # noqa: F811
    user = request.getfixturevalue("worker_user") if mode == "user" else None
    _isolation(mode, home, user)
    victims = Victims(home.parent)
    script = home.parent / "plant.py"
    script.write_text(PLANT)
    script.chmod(0o755)
    with agentboard.connect(str(home)) as ab:
        ab.add_profile("hostile", command=f"{PYTHON} {script}", isolation=mode, env={"VICTIMS": victims.env()})
        task = ab.board().create("plant links", assignee="hostile", max_retries=5)
        drive(ab, finished(ab, task["id"]))
        # nothing outside the workspace was written, deleted or moved into
        victims.assert_intact()
        shown = ab.board().show(task["id"])
        assert shown["status"] == "done", (shown.get("last_failure_error"), shown["runs"])
        assert [r["outcome"] for r in shown["runs"]][:2] == ["crashed", "crashed"]  # then a retry each time
        ws = Path(shown["runs"][-1]["workspace_path"])
        first = json.loads((ws / "findings-1.json").read_text())
        second = json.loads((ws / "findings-2.json").read_text())
        # the retry's .mcp.json is the dispatcher's own file: the secret was never merged
        for seen in (first["mcp"], second["mcp"]):
            assert seen["link"] is False and "agentboard" in seen["text"]
            assert victims.marker not in seen["text"]
        assert victims.marker not in (ws / ".mcp.json").read_text()
        # the planted folders were replaced by real ones; the old verdict went into the real archive
        assert first["wiki_link"] is False and first["archive_link"] is False
        assert [n for n in first["archived"] if n.startswith("review-verdict-")]
        # .board itself: a real folder with this run's files again
        assert second["board_link"] is False and {"context.md", "task.json", "prompt.md"} <= set(second["board"])
        assert task["id"] in second["context"]["text"]
        assert not (ws / ".board").is_symlink()


INBOX = textwrap.dedent('''
    import json, os, sys, time

    victim = os.environ["VICTIM_FILE"]
    os.makedirs(".board", exist_ok=True)
    for name in ("inbox.md", "inbox.cursor"):
        try:
            os.remove(os.path.join(".board", name))
        except FileNotFoundError:
            pass
    if os.environ["HOW"] == "symlink":
        os.symlink(victim, ".board/inbox.md")
    else:
        os.link(victim, ".board/inbox.md")
    open("planted", "w").write("yes")
    deadline = time.time() + 90
    text = ""
    while time.time() < deadline:
        try:
            if not os.path.islink(".board/inbox.md") and os.stat(".board/inbox.md").st_nlink == 1:
                text = open(".board/inbox.md").read()
                if "a person writes" in text:
                    break
        except OSError:
            pass
        time.sleep(0.1)
    json.dump({"inbox": text}, open("findings.json", "w"))
    json.dump({"success": True, "summary": "read my messages"}, open(".board/result.json", "w"))
''')


@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_comments_reach_a_worker_without_the_dispatcher_writing_through_its_inbox_link(
        how: str, home: Path) -> None:  # noqa: F811
    require_root()  # the hard link is to a root-owned file, as a worker running as root can make
    victims = Victims(home.parent)
    victim_file = victims.board / "keep.txt"
    script = home.parent / "inbox.py"
    script.write_text(INBOX)
    with agentboard.connect(str(home)) as ab:
        ab.add_profile("hostile", command=f"{PYTHON} {script}",
                       env={"VICTIM_FILE": str(victim_file), "HOW": how})
        task = ab.board().create("read the inbox", assignee="hostile", max_retries=1)
        posted: list[bool] = []

        def progress() -> bool:
            shown = ab.board().show(task["id"])
            ws = shown.get("workspace_path") or (shown["runs"][-1]["workspace_path"] if shown["runs"] else None)
            if not posted and ws and (Path(ws) / "planted").exists():
                ab.board().comment(task["id"], "a person writes: use the staging database", author="alice")
                posted.append(True)
            return shown["status"] in ("done", "blocked", "review")

        drive(ab, progress)
        shown = ab.board().show(task["id"])
        ws = Path(shown["runs"][-1]["workspace_path"])
        assert shown["status"] == "done", shown.get("last_failure_error")
        found = json.loads((ws / "findings.json").read_text())
        assert "a person writes: use the staging database" in found["inbox"]
        assert "do not touch" not in found["inbox"]
        assert victim_file.read_text() == "do not touch\n"
        victims.assert_intact()


HARDLINK = textwrap.dedent('''
    import json, os, sys

    n = int(open("stage").read()) if os.path.exists("stage") else 0
    open("stage", "w").write(str(n + 1))
    if n == 0:
        os.link(os.environ["SECRET"], ".board/result.json")  # "my result" is a root-only file
        sys.exit(0)
    os.remove(".board/result.json")
    json.dump({"success": True, "summary": "repaired"}, open(".board/result.json", "w"))
''')


def test_a_hard_link_to_a_secret_placed_as_the_result_is_refused_and_never_recorded(
        home: Path) -> None:  # noqa: F811
    require_root()
    victims = Victims(home.parent)
    script = home.parent / "hardlink.py"
    script.write_text(HARDLINK)
    with agentboard.connect(str(home)) as ab:
        ab.add_profile("hostile", command=f"{PYTHON} {script}", env={"SECRET": str(victims.secret_result)})
        task = ab.board().create("report a result", assignee="hostile", max_retries=1)
        drive(ab, finished(ab, task["id"]))
        shown = ab.board().show(task["id"])
        everything = json.dumps([shown, ab.board().events(0, limit=10000)], default=str)
        assert victims.marker not in everything  # the secret never became the task's result
        assert shown["status"] == "done", shown.get("last_failure_error")
        assert shown["runs"][-1]["summary"] == "repaired"
        invalid = [e for e in ab.board().events(0, limit=10000)
                   if e["task_id"] == task["id"] and e["kind"] == "result_invalid"]
        assert invalid and "hard-linked" in " ".join(invalid[0]["payload"]["errors"])
        history = (Path(shown["runs"][-1]["workspace_path"]) / ".board" / "history.md").read_text()
        assert "hard-linked" in history and victims.marker not in history
        victims.assert_intact()


SHARED = textwrap.dedent('''
    import json, os, re, sys

    task = os.environ["AGENTBOARD_TASK"]
    prompt = open(sys.argv[1]).read()
    named = re.search(r"You are working on task (t_[0-9a-f]+)", prompt)
    with open(f"seen-{task}.jsonl", "a") as fh:
        fh.write(json.dumps({"file": os.path.basename(sys.argv[1]),
                             "names": named.group(1) if named else None}) + "\\n")
    if os.path.basename(sys.argv[1]) == "nudge-prompt.md":
        json.dump({"success": True, "summary": "done after the nudge"}, open(".board/result.json", "w"))
    # else: stop without reporting; the dispatcher nudges with the prompt on disk
''')


def test_two_tasks_sharing_a_dir_workspace_each_get_their_own_prompt_on_every_attempt(
        ab: Any, tmp_path: Path) -> None:
    ws = tmp_path / "shared"
    ws.mkdir()
    script = tmp_path / "shared.py"
    script.write_text(SHARED)
    ab.add_profile("forgetful", command=f"{PYTHON} {script} {{prompt_file}}")
    first = ab.board().create("first task", assignee="forgetful", workspace=f"dir:{ws}", max_retries=2)
    second = ab.board().create("second task", assignee="forgetful", workspace=f"dir:{ws}", max_retries=2)
    ids = (first["id"], second["id"])
    drive(ab, lambda: all(finished(ab, t)() for t in ids))

    for t in ids:
        shown = ab.board().show(t)
        assert shown["status"] == "done", shown.get("last_failure_error")
        seen = [json.loads(line) for line in (ws / f"seen-{t}.jsonl").read_text().splitlines()]
        assert [s["file"] for s in seen] == ["prompt.md", "nudge-prompt.md"]
        assert [s["names"] for s in seen] == [t, t]  # never the other task's prompt
    # the second waited for the folder, saying why
    waited = [e for e in ab.board().events(0, limit=10000) if e["kind"] == "workspace_busy"]
    assert waited and {e["task_id"] for e in waited} <= set(ids)
    assert "in use by task" in waited[0]["payload"]["reason"]
    runs = sorted((r for t in ids for r in ab.board().show(t)["runs"]), key=lambda r: r["started_at"])
    for earlier, later in zip(runs, runs[1:], strict=False):
        if earlier["task_id"] != later["task_id"]:
            assert later["started_at"] >= earlier["ended_at"]  # one run in the folder at a time


def test_a_task_waits_for_its_shared_folder_while_a_review_run_of_another_task_is_open_there(
        ab: Any, tmp_path: Path) -> None:
    from agentboard.dispatch.dispatcher import Dispatcher
    from agentboard.kernel import runs as kr

    ws = tmp_path / "shared"
    ws.mkdir()
    ran = tmp_path / "ran"
    ab.add_profile("w", command=f"touch {ran}")
    reviewed = ab.board().create("reviewed work", assignee="w", workspace=f"dir:{ws}", review=True)
    claim = ab.board().claim(reviewed["id"])
    ab.board().complete(reviewed["id"], summary="ready for review", run_id=claim["run_id"])
    assert ab.board().show(reviewed["id"])["status"] == "review"
    rid = kr.open_review_run(ab.db, "default", reviewed["id"], reviewer="profile:r", profile="w")
    assert rid is not None
    waiting = ab.board().create("next in the same folder", assignee="w", workspace=f"dir:{ws}")

    d = Dispatcher(ab.db, ab.settings)
    d.run_pass()
    assert ab.board().show(waiting["id"])["status"] == "ready" and not ran.exists()
    (busy,) = [e for e in ab.board().events(0, task_id=waiting["id"]) if e["kind"] == "workspace_busy"]
    assert f"in use by task {reviewed['id']} (run {rid})" in busy["payload"]["reason"]

    kr.close_review_run(ab.db, "default", reviewed["id"], rid, "crashed", error="the reviewer went away")
    # (running is not enough: its worker may not have run its command yet)
    drive(ab, lambda: ab.board().show(waiting["id"])["status"] in ("done", "blocked") or ran.exists())
    assert ran.exists()  # the folder is free: it started
