"""A worker's ``$PWD`` names its workspace: a program that takes its folder from ``$PWD`` rather
than from the process's working directory (opencode does) works in its workspace, never in the
folder the dispatcher was started from — with a cgroup's joining shell in between or without."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import all_in, wait_for

#: started directly (no shell syntax in its command line, so no shell corrects ``$PWD``): writes
#: its file where ``$PWD`` says, as an agent CLI that trusts it would, then reports
AGENT = """
import json, os
from pathlib import Path
Path(os.environ["PWD"], "hello.txt").write_text("hello")
Path(".board/result.json").write_text(json.dumps({"success": True, "summary": os.environ["PWD"]}))
"""


@pytest.mark.parametrize("cgroups", [False, True], ids=["no-cgroups", "cgroups"])
def test_a_worker_that_trusts_pwd_writes_into_its_workspace_not_the_dispatchers_folder(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cgroups: bool) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    elsewhere = tmp_path / "where-the-dispatcher-runs"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("PWD", str(elsewhere))
    ab.add_profile("pwd", command=f"{sys.executable} {script}")
    t = board.create("write hello.txt", assignee="pwd")
    dispatcher(worker_cgroups=cgroups)
    wait_for(lambda: all_in(board, [t["id"]], {"done"}), what="the task done")
    workspace = Path(board.show(t["id"])["workspace_path"])
    assert not (elsewhere / "hello.txt").exists(), "the worker wrote into the dispatcher's folder"
    assert (workspace / "hello.txt").read_text() == "hello"
    assert board.runs(t["id"])[0]["summary"] == str(workspace)
