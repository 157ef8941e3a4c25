"""A small project repository (a buggy function, its failing test, its own virtualenv), boards
targeting it, script agents that edit, commit and report, and a started dispatcher."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from testenv import wait_for as wait_for


def git(cwd: Path | str, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout


def events(board: Any, task_id: str, kind: str | None = None) -> list[dict[str, Any]]:
    out = [e for e in board.events(0, limit=100000) if e["task_id"] == task_id]
    return [e for e in out if e["kind"] == kind] if kind else out


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "dev")
    for name, text in (files or {"README.md": "hello\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "init")
    return path


BUGGY = "def add(a, b):\n    return a - b\n"
TEST = ("import projmarker  # only the project's virtualenv has it\n"
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n")


#: the project's pytest settings; the suite's own pytest plugins, which the project venv sees
#: through its .pth, stay unloaded (importing them costs each verify run seconds)
PROJECT_PYTEST_INI = ("[pytest]\npythonpath = .\naddopts = -p no:schemathesis -p no:hypothesispytest -p no:anyio "
                      "-p no:xdist -p no:xdist.looponfail\n")


def make_project(path: Path) -> Path:
    """A repository with a failing test and a project virtualenv (``.venv``, ignored by git)
    whose Python can import pytest and the module ``projmarker`` — agentboard's Python cannot
    import ``projmarker``, so a verify command that ran it would fail."""
    repo = make_repo(path, {"calc.py": BUGGY, "test_calc.py": TEST, ".gitignore": ".venv/\n__pycache__/\n",
                            "pytest.ini": PROJECT_PYTEST_INI})
    venv = repo / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "projmarker.py").write_text("MARK = 'project venv'\n")
    (site / "agentboard-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return repo


# the fixer: fixes add(), commits, reports through the CLI (held until verification passes)
FIX = ("sed -i 's/a - b/a + b/' calc.py && git add calc.py && git commit -qm 'fix add' && "
       "agentboard complete --summary 'fixed add()'")
# the writer: documents add() only if it sees the fix on its branch
WRITE = ("if grep -q 'a + b' calc.py; then echo 'add(a, b) returns the sum' > USAGE.md && git add USAGE.md && "
         "git commit -qm 'document add' && agentboard complete --summary 'documented add()'; "
         "else agentboard block 'calc.py still subtracts: the fix is not on my branch'; fi")


def sh(script: str) -> str:
    return "sh -c " + shlex.quote(script)


def cli(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTBOARD_HOME": str(home)}
    for k in ("AGENTBOARD_TASK", "AGENTBOARD_RUN_ID", "AGENTBOARD_API_URL", "AGENTBOARD_TOKEN"):
        env.pop(k, None)
    return subprocess.run([sys.executable, "-m", "agentboard", *args], capture_output=True, text=True, env=env,
                          cwd=str(cwd) if cwd else None, timeout=120)


@pytest.fixture
def dispatcher(ab: Any) -> Iterator[Callable[..., Any]]:
    """Factory for started dispatchers on the test's home, each serving its workers the API."""
    from agentboard.api.serve import WorkerAPI, run_tokens
    from agentboard.dispatch.dispatcher import Dispatcher

    made: list[Any] = []
    apis: list[Any] = []

    def make(**overrides: Any) -> Any:
        s = ab.settings
        s.spawn_grace = overrides.pop("spawn_grace", 0.5)
        for k, v in overrides.items():
            setattr(s, k, v)
        api = WorkerAPI(s, ab.db).start()
        apis.append(api)
        d = Dispatcher(ab.db, s, api_url=api.url, token_factory=run_tokens(ab.db))
        made.append(d)
        d.start()
        return d

    yield make
    for d in made:
        d.stop()
    for api in apis:
        api.stop()
