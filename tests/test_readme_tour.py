"""The README's CLI tour runs as written: each ```shell block, one command a line, in a fresh
home, with the placeholder ids replaced by the ids its own `create` lines printed, and the
placeholder project (/tmp/myproject) replaced by a real repository with a failing test, a
project virtualenv and the two script agents the tour describes."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"^```shell\n(.*?)^```", re.DOTALL | re.MULTILINE)
PLACEHOLDERS = ("t_1a2b3c4d", "t_5e6f7a8b", "t_9c0d1e2f")
PROJECT = "/tmp/myproject"
_ID = re.compile(r"^(t_[0-9a-f]{8})\s", re.MULTILINE)

FIX_SH = ("sed -i 's/a - b/a + b/' calc.py\ngit commit -qam 'fix add()'\n"
          "agentboard complete --summary 'add() adds'\n")
WRITE_SH = ("grep -q 'a + b' calc.py || { agentboard block 'the fix is not on my branch'; exit 0; }\n"
            "echo 'add(a, b) returns the sum of a and b.' > USAGE.md\ngit add USAGE.md\n"
            "git commit -qm 'document add()'\nagentboard complete --summary 'documented add()'\n")


def _project(path: Path) -> Path:
    """The tour's project as ``scripts/tour-project`` makes it (the README tells a reader to run
    it), its .venv made from this Python (which has pytest) rather than installing pytest."""
    out = subprocess.run([str(ROOT / "scripts" / "tour-project"), str(path)], capture_output=True, text=True,
                         env={**os.environ, "PYTHON": sys.executable}, timeout=300)
    assert out.returncode == 0, out.stderr
    assert (path / "agents" / "fix.sh").read_text() == FIX_SH and (path / "agents" / "write.sh").read_text() == WRITE_SH
    failing = subprocess.run([str(path / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                             cwd=path, capture_output=True, text=True, timeout=300)
    assert failing.returncode == 1 and "1 failed" in failing.stdout, failing.stdout  # the bug the tour fixes
    again = subprocess.run([str(ROOT / "scripts" / "tour-project"), str(path)], capture_output=True, text=True)
    assert again.returncode == 2 and "exists already" in again.stderr
    return path


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    blocks = _BLOCK.findall((ROOT / "README.md").read_text())
    assert len(blocks) >= 2, "the README has its two tour blocks"
    project = _project(tmp_path / "myproject")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    env["AGENTBOARD_HOME"] = str(tmp_path / "home")
    outputs: list[str] = []
    for block in blocks:
        created: list[str] = []
        for line in block.strip().splitlines():
            assert line.startswith("agentboard "), f"one agentboard command a line: {line!r}"
            for placeholder, real in zip(PLACEHOLDERS, created, strict=False):
                line = line.replace(placeholder, real)
            line = line.replace(PROJECT, str(project))
            argv = shlex.split(line)
            proc = subprocess.run([sys.executable, "-m", "agentboard", *argv[1:]], env=env, cwd=tmp_path,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
            if argv[1] == "create":
                m = _ID.search(proc.stdout)
                assert m, proc.stdout
                created.append(m.group(1))
            outputs.append(proc.stdout)
    tour = "\n".join(outputs)
    assert "+    return a + b" in tour  # `agentboard diff` of the fix
    assert "branch merged" in tour  # the approval merged it
    assert "a + b" in (project / "calc.py").read_text()
    assert "USAGE.md" in tour  # the documentation task's diff, made on the fix's branch
    # the documentation task has no review: on a board set to merge, it is merged when it is done
    assert re.search(r"^integration\s+merged$", tour, re.MULTILINE), tour
    log = subprocess.run(["git", "-C", str(project), "log", "--format=%s", "main"], capture_output=True,
                         text=True, check=True).stdout
    assert "document add()" in log, log
    assert (project / "USAGE.md").is_file()
