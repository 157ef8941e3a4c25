"""A worker controls its worktree, its ``.git`` link included: nothing it plants there may make
the server or the dispatcher run a program when they run git.

The hostile script agent below is started by the real dispatcher in a worktree task. It commits
honest work, leaves some uncommitted, then plants every way git has of starting a program —
``core.fsmonitor``, ``core.hooksPath`` and every hook, ``diff.external``, a textconv, filter
(clean, smudge and process) and merge drivers named by ``.gitattributes``, ``core.pager``,
``core.sshCommand``, a credential helper, ``gpg.program`` with signing and signature checks on,
``core.alternateRefsCommand``, and an ``include.path`` bringing more — each a small script that
leaves a marker file. It plants them in a git folder of its own that replaces its worktree's
``.git`` (as a folder, as a symbolic link, as a ``gitdir:`` link), or, keeping the link git
wrote, in its worktree's ``config.worktree`` (which git honours when the repository's owner has
turned ``extensions.worktreeConfig`` on). A ``.git`` folder is what a confined worker's task
repository has: it is read as data and through a view, never run; the links are refused.

Then every path of the server that runs git is taken: the task's context, ``GET
/api/tasks/{id}``, its diff, the review context, gc's dirty check, approval with integration and
the next run's preparation. Each works or refuses saying why, and no marker exists. Plain
``git status`` in the same worktree then creates the fsmonitor marker: the plants are live.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from gitflow.conftest import cli, events, git, make_repo, wait_for

HOOKS = ("applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
         "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge",
         "pre-push", "pre-receive", "update", "proc-receive", "post-receive", "post-update",
         "reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite", "post-index-change",
         "fsmonitor-watchman")

HOSTILE = r'''
import os, shutil, subprocess, sys

M = os.environ["MARKERS"]
T = os.environ["TOOLS"]  # the worker's own folder for its tools, outside the worktree
variant = os.environ["PLANT"]
wt = os.getcwd()

def report(summary):
    subprocess.run([sys.executable, "-m", "agentboard", "complete", "--summary", summary], check=True)

if os.path.exists(os.path.join(T, "planted")):
    # a later run: drop the uncommitted work without git (git here would run the plants)
    os.remove("new.txt")
    with open("notes.txt", "w") as fh:
        fh.write(open(os.path.join(T, "committed-notes")).read())
    os.remove(os.path.join(T, "planted"))
    report("cleaned up")
    sys.exit(0)

# honest work, committed on the task's branch, with attributes naming drivers
with open("notes.txt", "a") as fh:
    fh.write("changed by the agent\n")
with open(".gitattributes", "w") as fh:
    fh.write("* filter=evil diff=evil merge=evil\n*.md filter=evilp\n")
subprocess.run(["git", "add", "notes.txt", ".gitattributes"], check=True)
subprocess.run(["git", "commit", "-qm", "agent edit"], check=True)
admin = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], capture_output=True, text=True,
                       check=True).stdout.strip()
common = subprocess.run(["git", "rev-parse", "--git-common-dir"], capture_output=True, text=True,
                        check=True).stdout.strip()
common = os.path.abspath(common)
shutil.copy("notes.txt", os.path.join(T, "committed-notes"))
# work left uncommitted: reading it makes git hash the files (filters would run)
with open("notes.txt", "a") as fh:
    fh.write("not committed yet\n")
with open("new.txt", "w") as fh:
    fh.write("untracked\n")

# from here on the worker runs no git: every marker would be the server's doing
bin_dir = os.path.join(T, "bin")
hooks = os.path.join(T, "hooks")
os.makedirs(bin_dir)
os.makedirs(hooks)

def prog(folder, name, tail="exit 0"):
    path = os.path.join(folder, name)
    with open(path, "w") as fh:
        fh.write(f"#!/bin/sh\ntouch {M}/{os.path.basename(folder)}-{name}\n{tail}\n")
    os.chmod(path, 0o755)
    return path

for hook in os.environ["HOOKS"].split():
    prog(hooks, hook)
b = {name: prog(bin_dir, name, tail) for name, tail in [
    ("fsmonitor", "exit 1"), ("pager", "cat"), ("ssh", "exit 1"), ("credential", "exit 1"),
    ("alternate-refs", "exit 0"), ("diff-external", "exit 0"), ("textconv", 'cat "$1"'),
    ("diff-command", "exit 0"), ("filter-clean", "cat"), ("filter-smudge", "cat"), ("filter-process", "exit 1"),
    ("merge-driver", "exit 1"), ("gpg", "exit 1"), ("include-pager", "cat"), ("include-editor", "exit 0")]}
include = os.path.join(T, "include")
with open(include, "w") as fh:
    fh.write(f"[core]\n\tpager = {b['include-pager']}\n\teditor = {b['include-editor']}\n")
evil = f"""[include]
	path = {include}
[core]
	fsmonitor = {b['fsmonitor']}
	hooksPath = {hooks}
	sshCommand = {b['ssh']}
	askPass = {b['credential']}
	alternateRefsCommand = {b['alternate-refs']}
[credential]
	helper = !{b['credential']}
[diff]
	external = {b['diff-external']}
[diff "evil"]
	textconv = {b['textconv']}
	command = {b['diff-command']}
[filter "evil"]
	clean = {b['filter-clean']}
	smudge = {b['filter-smudge']}
[filter "evilp"]
	process = {b['filter-process']}
[merge "evil"]
	driver = {b['merge-driver']}
[gpg]
	program = {b['gpg']}
[commit]
	gpgSign = true
[merge]
	verifySignatures = true
[log]
	showSignature = true
"""

if variant == "config.worktree":
    with open(os.path.join(admin, "config.worktree"), "w") as fh:
        fh.write(evil)
else:
    mine = os.path.join(T, "git")
    for sub in ("objects/info", "refs/heads", "info"):
        os.makedirs(os.path.join(mine, sub))
    with open(os.path.join(mine, "HEAD"), "w") as fh:
        fh.write(open(os.path.join(admin, "HEAD")).read())
    shutil.copy(os.path.join(admin, "index"), os.path.join(mine, "index"))
    with open(os.path.join(mine, "objects", "info", "alternates"), "w") as fh:
        fh.write(os.path.join(common, "objects") + "\n")
    shutil.copytree(os.path.join(common, "refs"), os.path.join(mine, "refs"), dirs_exist_ok=True)
    if os.path.exists(os.path.join(common, "packed-refs")):
        shutil.copy(os.path.join(common, "packed-refs"), os.path.join(mine, "packed-refs"))
    with open(os.path.join(mine, "config"), "w") as fh:
        fh.write("[core]\n\trepositoryformatversion = 0\n\tbare = false\n" + evil)
    with open(os.path.join(mine, "info", "attributes"), "w") as fh:
        fh.write("* filter=evil diff=evil merge=evil\n")
    shutil.copytree(hooks, os.path.join(mine, "hooks"))
    os.remove(".git")
    if variant == "folder":
        os.rename(mine, ".git")
    elif variant == "symlink":
        os.symlink(mine, ".git")
    else:
        with open(".git", "w") as fh:
            fh.write(f"gitdir: {mine}\n")
open(os.path.join(T, "planted"), "w").close()
report("edited the notes")
'''

VARIANTS = ["folder", "symlink", "gitdir-link", "config.worktree"]


@pytest.fixture
def dispatcher(ab: Any) -> Iterator[Callable[..., Any]]:
    """A started dispatcher on the test's home, serving its workers the API."""
    from agentboard.api.serve import WorkerAPI, run_tokens
    from agentboard.dispatch.dispatcher import Dispatcher

    made: list[tuple[Any, Any]] = []

    def make() -> Any:
        s = ab.settings
        s.spawn_grace = 0.5
        api = WorkerAPI(s, ab.db).start()
        d = Dispatcher(ab.db, s, api_url=api.url, token_factory=run_tokens(ab.db))
        made.append((d, api))
        d.start()
        return d

    yield make
    for d, api in made:
        d.stop()
        api.stop()


def _markers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_worker_cannot_make_the_server_run_a_program_through_its_worktree_git(
        ab: Any, tmp_path: Path, dispatcher: Any, variant: str) -> None:
    import httpx

    from agentboard.api import create_app
    from agentboard.api.serve import BackgroundServer
    from agentboard.dispatch import diffs, gc, workspaces
    from agentboard.kernel import tokens
    from agentboard.protocol import review_context

    markers = tmp_path / "markers"
    markers.mkdir()
    tools = tmp_path / "tools"
    tools.mkdir()
    repo = make_repo(tmp_path / "repo", {"notes.txt": "line one\n", "README.md": "hello\n"})
    if variant == "config.worktree":  # the owner's own choice (sparse checkouts use it)
        git(repo, "config", "extensions.worktreeConfig", "true")
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE)
    ab.create_board("flow", workdir=str(repo), settings={"integrate": "merge"})
    ab.add_profile("hostile", command=f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}",
                   env={"MARKERS": str(markers), "TOOLS": str(tools), "PLANT": variant, "HOOKS": " ".join(HOOKS)})
    board = ab.board("flow")
    task = board.create("Edit the notes", assignee="hostile", review=True, max_retries=1)
    tid = task["id"]
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "review", what="the hostile worker to report")
    wt = repo / ".worktrees" / tid
    assert (tools / "planted").exists()
    # a .git folder is taken as a task repository (the worker's own: no git runs in it); a link
    # elsewhere is refused; a kept link has its administrative folder's files ignored
    unsafe = variant in ("symlink", "gitdir-link")
    refusal = ("not the link git worktree add wrote", "outside", "symbolic link")

    # the task's context, as a person's CLI and the worker's own `agentboard context` read it
    ctx = cli(ab.home, "context", tid)
    assert ctx.returncode == 0, ctx.stderr
    assert f"ab/{tid} on main: 1 ahead, 0 behind" in ctx.stdout

    admin = tokens.create(ab.db, "admin", role="admin")["token"]
    server = BackgroundServer(create_app(ab.settings, ab.db)).start()
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {admin}"}, timeout=60) as http:
            detail = http.get(f"/api/tasks/{tid}")
            assert detail.status_code == 200
            facts = detail.json()["git"]
            assert (facts["ahead"], facts["behind"], facts["files"]) == (1, 0, 2)
            if unsafe:
                assert any(r in (facts["note"] or "") for r in refusal), facts
            else:
                assert facts["uncommitted"] == 2 and facts["note"] is None
            diff = http.get(f"/api/tasks/{tid}/diff")
            assert diff.status_code == 200
            shown = diff.json()
            assert {f["path"] for f in shown["files"] if not f["uncommitted"]} == {"notes.txt", ".gitattributes"}
            pending = {f["path"] for f in shown["files"] if f["uncommitted"]}
            if unsafe:
                assert pending == set() and any(r in shown["how"] for r in refusal), shown["how"]
            else:
                assert pending == {"notes.txt", "new.txt"}
    finally:
        server.stop()

    # the review context a reviewer reads
    text = review_context.build(ab.db, "flow", tid, diffs.facts_of(board.show(tid)), 100_000)
    assert "+changed by the agent" in text
    assert ("+not committed yet" in text) is not unsafe

    # gc's dirty check keeps the worktree, saying why
    report = gc.collect(ab.db, ab.home, boards=["flow"], dry_run=True)
    assert report["worktrees_removed"] == []

    # approval: with the link git wrote, the uncommitted work review saw is committed on the
    # branch (no hook, filter or driver of the worker's runs) and merged
    before = git(repo, "rev-parse", "main").strip()
    if variant == "config.worktree":
        approved = board.approve(tid)
        assert approved["status"] == "done" and board.show(tid)["integration"] == "merged", approved.get("block_reason")
        assert (repo / "new.txt").is_file() and "not committed yet" in (repo / "notes.txt").read_text()
        assert _markers(markers) == [], "git ran a program the worker planted"
        return
    # otherwise it is refused (an unsafe link, or uncommitted work in a task repository, where
    # agentboard runs no git to commit it), nothing is merged
    refused = board.approve(tid)
    assert refused["status"] == "blocked" and refused["integration"] == "refused"
    if unsafe:
        assert any(r in refused["block_reason"] for r in refusal), refused["block_reason"]
    else:
        assert "uncommitted changes (notes.txt, new.txt)" in refused["block_reason"]
    assert git(repo, "rev-parse", "main").strip() == before

    # the next run's preparation: refused with the reason, or (link intact) the worker runs again
    board.unblock(tid)
    if unsafe:
        def spawn_refused() -> bool:
            return any(any(r in json.dumps(e["payload"]) for r in refusal) and e["kind"] != "integration_refused"
                       and e["kind"] != "blocked" or
                       (e["kind"] == "blocked" and "workspace" in json.dumps(e["payload"]))
                       for e in events(board, tid))
        wait_for(spawn_refused, what="the next run's preparation to refuse the worktree")
        ws = workspaces.plan(ab.home, {"default_workdir": str(repo)}, board.show(tid))
        with pytest.raises(workspaces.WorkspaceError, match="|".join(refusal)):
            workspaces.prepare(ws)
    else:
        wait_for(lambda: board.show(tid)["status"] == "review", what="the second run to report")
        done = board.approve(tid)
        assert done["status"] == "done" and board.show(tid)["integration"] == "merged"
        assert (repo / "notes.txt").read_text() == "line one\nchanged by the agent\n"
        gc.collect(ab.db, ab.home, boards=["flow"], dry_run=True)

    assert _markers(markers) == [], "git ran a program the worker planted"

    # the plants are live: git as the server used to run it starts the worker's fsmonitor
    subprocess.run(["git", "-C", str(wt), "status", "--porcelain"], capture_output=True)
    assert "bin-fsmonitor" in _markers(markers)


def test_task_branches_follow_git_rules_and_refuse_a_leading_plus_or_dash(ab: Any, tmp_path: Path) -> None:
    from agentboard.domain.errors import InvalidInput

    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo))
    board = ab.board("flow")
    before = len(board.list(include_archived=True))
    for bad in ("+main", "-f", "a..b", "feature/.hidden", "x.lock", "has space", "a\u202eb", "HEAD", "refs/heads/x"):
        with pytest.raises(InvalidInput, match="invalid branch"):
            board.create("Edit", workspace="worktree", branch=bad)
        out = cli(ab.home, "create", "Edit", "--board", "flow", "--workspace", "worktree", "--branch", bad)
        assert out.returncode == 2 and "invalid branch" in out.stderr, (bad, out.stderr)
    assert len(board.list(include_archived=True)) == before
    ok = board.create("Edit", workspace="worktree", branch="feature/login-form")
    assert ok["branch_name"] == "feature/login-form"
    with pytest.raises(InvalidInput, match="cannot start with '\\+'"):
        board.edit(ok["id"], branch_name="+main")
    assert board.show(ok["id"])["branch_name"] == "feature/login-form"


def test_a_pull_request_push_names_the_branch_ref_on_both_sides(ab: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """``integrate = pr`` pushes ``refs/heads/X:refs/heads/X``: never a refspec git could read
    as a forced push or another ref."""
    from agentboard.dispatch import integrate

    repo = make_repo(tmp_path / "repo", {"notes.txt": "one\n"})
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "branch", "ab/t_00000001")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text("#!/bin/sh\n[ \"$1\" = auth ] && exit 0\necho https://example.test/pull/1\n")
    (bin_dir / "gh").chmod(0o755)
    real_git = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True).stdout.strip()
    record = tmp_path / "git-args"
    (bin_dir / "git").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {record}\nexec {real_git} \"$@\"\n")
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    task = {"id": "t_00000001", "branch_name": "ab/t_00000001", "title": "Edit", "workspace_path": ""}
    out = integrate.integrate(repo, task, "pr", "main")
    assert out.outcome == "pr_opened"
    pushes = [ln for ln in record.read_text().splitlines() if " push " in f" {ln} "]
    assert pushes and pushes[0].endswith("push -u origin refs/heads/ab/t_00000001:refs/heads/ab/t_00000001")
    assert all("core.hooksPath=/dev/null" in ln for ln in record.read_text().splitlines()), record.read_text()
    assert git(origin, "rev-parse", "ab/t_00000001").strip() == git(repo, "rev-parse", "ab/t_00000001").strip()


def test_a_worktree_whose_administrative_folder_names_another_repository_is_refused(tmp_path: Path) -> None:
    """A worker that may write its worktree's administrative folder (to commit) points its
    ``commondir`` at a repository of its own: git through that link would read its config."""
    from agentboard import gitsafe
    from agentboard.dispatch import branches

    repo = make_repo(tmp_path / "repo", {"notes.txt": "one\n"})
    wt = repo / ".worktrees" / "t_00000001"
    git(repo, "worktree", "add", "-q", "-b", "ab/t_00000001", str(wt))
    (wt / "notes.txt").write_text("two\n")
    assert gitsafe.worktree_status(repo, wt, "ab/t_00000001") == [" M notes.txt"]
    mine = make_repo(tmp_path / "mine")
    (repo / ".git" / "worktrees" / "t_00000001" / "commondir").write_text(f"{mine / '.git'}\n")
    with pytest.raises(gitsafe.UnsafeWorktree, match="commondir does not name"):
        gitsafe.worktree_status(repo, wt, "ab/t_00000001")
    facts = branches.facts({"workspace_kind": "worktree", "workspace_path": str(wt), "branch_name": "ab/t_00000001",
                            "base_branch": "main"})
    assert facts.exists and "commondir does not name" in (facts.note or "")
    assert "commondir does not name" in facts.line()


def test_a_planted_repository_in_a_dir_workspace_runs_none_of_its_programs(tmp_path: Path) -> None:
    """A ``dir:`` workspace is the worker's folder: a ``.git`` it makes there is its own. The
    review diff and the doctor's dirty check read it with every program-starting setting and
    every driver its configuration names turned off."""
    from agentboard.kernel.diagnostics import _git_dirty
    from agentboard.protocol import review_context

    markers = tmp_path / "markers"
    markers.mkdir()
    ws = make_repo(tmp_path / "ws", {"notes.txt": "one\n", ".gitattributes": "* filter=evil diff=evil merge=evil\n"})
    prog = tmp_path / "prog"
    prog.write_text(f"#!/bin/sh\ntouch {markers}/$(basename \"$0\")-ran\ncat\n")
    prog.chmod(0o755)
    for name in ("fsmonitor", "clean", "textconv", "pager", "external", "post-index-change"):
        (tmp_path / name).symlink_to(prog)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "post-index-change").symlink_to(prog)
    for key, value in (("core.fsmonitor", tmp_path / "fsmonitor"), ("core.hooksPath", hooks),
                       ("filter.evil.clean", tmp_path / "clean"), ("diff.evil.textconv", tmp_path / "textconv"),
                       ("core.pager", tmp_path / "pager"), ("diff.external", tmp_path / "external")):
        git(ws, "config", key, str(value))
    (ws / "notes.txt").write_text("two\n")
    (ws / "new.txt").write_text("new\n")

    diff = review_context.work_diff(review_context.WorkspaceFacts("dir", ws))
    assert "-one\n+two" in diff.text and "+new" in diff.text
    assert "notes.txt" in (_git_dirty(str(ws)) or "")
    assert sorted(p.name for p in markers.iterdir()) == []
    subprocess.run(["git", "-C", str(ws), "diff"], capture_output=True)  # git as it used to run
    assert sorted(p.name for p in markers.iterdir()) != []


def test_an_untracked_file_behind_a_folder_swapped_for_a_link_is_never_read(tmp_path: Path) -> None:
    """Between git listing ``notes/a.txt`` as untracked and agentboard reading it for the diff,
    the worker swaps ``notes`` for a link to a folder it may not read: the read must fail, not
    follow the link (the server would show the file's text in the diff)."""
    from agentboard import gitsafe

    secret = tmp_path / "outside" / "a.txt"
    secret.parent.mkdir()
    secret.write_text("root's secret\n")
    wt = tmp_path / "wt"
    (wt / "notes").mkdir(parents=True)
    (wt / "notes" / "a.txt").write_text("worker's note\n")
    assert "+worker's note" in gitsafe.new_file_diff(wt, "notes/a.txt")
    (wt / "notes").rename(wt / "moved")
    (wt / "notes").symlink_to(secret.parent)
    assert gitsafe.new_file_diff(wt, "notes/a.txt") == ""
    assert "root's secret" not in gitsafe.new_file_diff(wt, "notes/../outside/a.txt")


def test_git_variables_in_the_servers_environment_redirect_no_call(tmp_path: Path, monkeypatch: Any) -> None:
    """``GIT_DIR``, ``GIT_CONFIG_*`` or ``GIT_EXTERNAL_DIFF`` inherited by the server (from a
    shell, a hook, a worker-written env file) neither redirect nor configure its git calls."""
    from agentboard import gitsafe

    markers = tmp_path / "markers"
    markers.mkdir()
    prog = tmp_path / "prog"
    prog.write_text(f"#!/bin/sh\ntouch {markers}/ran\nexit 0\n")
    prog.chmod(0o755)
    repo = make_repo(tmp_path / "repo", {"notes.txt": "one\n"})
    wt = repo / ".worktrees" / "t_00000002"
    git(repo, "worktree", "add", "-q", "-b", "ab/t_00000002", str(wt))
    (wt / "notes.txt").write_text("two\n")
    other = make_repo(tmp_path / "other", {"else.txt": "x\n"})
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='{prog}'")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.hooksPath")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(tmp_path))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", str(prog))
    (tmp_path / "post-index-change").symlink_to(prog)
    assert gitsafe.worktree_status(repo, wt, "ab/t_00000002") == [" M notes.txt"]
    assert "+two" in gitsafe.worktree_diff(repo, wt, "ab/t_00000002")
    assert list(markers.iterdir()) == []
    subprocess.run(["git", "-C", str(wt), "diff"], capture_output=True)  # git as it used to run
    assert list(markers.iterdir()) != []
