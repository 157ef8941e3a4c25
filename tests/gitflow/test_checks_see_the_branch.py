"""The checks pass only on what the branch carries: a worker cannot make them pass with files
git ignores (a compiled module planted in ``__pycache__``, a folder hidden by a ``.gitignore`` of
its own) that integration would leave behind."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .conftest import events, make_repo, wait_for

CHECK = f"{sys.executable} -c 'import calc; assert calc.add(2, 3) == 5, calc.add(2, 3)'"

# compiles a correct add() as calc.py, then puts the buggy source back with the same size and
# time: Python would load the planted bytecode, and git ignores __pycache__
FORGE = r"""
import os, py_compile
good, bad = "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"
open("calc.py", "w").write(good)
st = os.stat("calc.py")
py_compile.compile("calc.py", doraise=True)
open("calc.py", "w").write(bad)
os.utime("calc.py", ns=(st.st_atime_ns, st.st_mtime_ns))
open(".board/result.json", "w").write('{"success": true, "summary": "fixed add"}')
"""

HIDE = ("mkdir -p calc && printf '*\\n' > calc/.gitignore && "
        "printf 'def add(a, b):\\n    return a + b\\n' > calc/__init__.py && "
        "printf '{\"success\": true, \"summary\": \"fixed add\"}' > .board/result.json")


def _run(ab: Any, tmp_path: Path, dispatcher: Any, command: str) -> dict[str, Any]:
    repo = make_repo(tmp_path / "repo", {"calc.py": "def add(a, b):\n    return a - b\n",
                                          ".gitignore": "__pycache__/\n"})
    ab.create_board("flow", workdir=str(repo))
    ab.add_profile("agent", command=command)
    board = ab.board("flow")
    tid = board.create("fix add", assignee="agent", verify=[CHECK])["id"]
    dispatcher()
    wait_for(lambda: events(board, tid, "verify_failed") or board.show(tid)["status"] in ("done", "review"),
             what="the checks to settle")
    return {"task": board.show(tid), "failed": events(board, tid, "verify_failed")}


def test_a_compiled_module_planted_in_pycache_does_not_pass_the_checks(
        ab: Any, tmp_path: Path, dispatcher: Any) -> None:
    script = tmp_path / "forge.py"
    script.write_text(FORGE)
    got = _run(ab, tmp_path, dispatcher, f"{sys.executable} {script}")
    assert got["failed"], got["task"]["status"]
    assert got["task"]["status"] not in ("done", "review")


def test_a_folder_hidden_by_a_gitignore_of_the_workers_own_does_not_pass_the_checks(
        ab: Any, tmp_path: Path, dispatcher: Any) -> None:
    got = _run(ab, tmp_path, dispatcher, HIDE)
    assert got["failed"], got["task"]["status"]
    error = got["failed"][0]["payload"].get("error") or ""
    assert "calc/.gitignore" in error and "calc/__init__.py" in error, got["failed"][0]["payload"]
    assert got["task"]["status"] not in ("done", "review")


def test_build_output_ignored_by_the_projects_own_rules_does_not_stop_the_checks(
        ab: Any, tmp_path: Path, dispatcher: Any) -> None:
    fix = ("printf 'def add(a, b):\\n    return a + b\\n' > calc.py && mkdir -p __pycache__ && touch __pycache__/x.pyc "
           "&& printf '{\"success\": true, \"summary\": \"fixed add\"}' > .board/result.json")
    got = _run(ab, tmp_path, dispatcher, fix)
    assert not got["failed"] and got["task"]["status"] == "done"
