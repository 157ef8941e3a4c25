# ruff: noqa: F811 - the fixture home comes from test_isolation
"""A sandboxed worker can still work: what it needs is visible inside its sandbox wherever it
is installed, read-only; what the sandbox must hide stays hidden, and a profile whose program
the sandbox cannot see fails at spawn saying so.

The sandbox gives a worker a private, empty ``/tmp``. Here agentboard runs from a virtualenv
under ``/tmp`` and the profile's program is a script under ``/tmp``: the worker must still find
both, and the ``agentboard`` command it reports with.
"""

from __future__ import annotations

import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
from testenv import wait_for

import agentboard

from .test_isolation import home, require_bwrap  # noqa: F401 - the fixture home

WORKER = """#!/bin/sh
# a script agent under /tmp that reports through the agentboard command
set -e
agentboard heartbeat --note "inside the sandbox"
echo "work" > made-in-the-sandbox.txt
touch {outside} 2>/dev/null && echo "wrote outside" || echo "outside refused"
agentboard complete --summary "done from the sandbox: $(command -v agentboard)"
"""



@pytest.fixture
def tmp_venv() -> Iterator[Path]:
    """A virtualenv under /tmp whose interpreter runs this agentboard (its site-packages reach
    this checkout's through a .pth file, as an installed package would be found)."""
    root = Path(tempfile.mkdtemp(prefix="agentboard-venv-", dir="/tmp"))
    root.chmod(0o755)
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    py = env_dir / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = [p for p in site.getsitepackages() if Path(p).is_dir()]
    src = str(Path(agentboard.__file__).resolve().parent.parent)
    Path(purelib, "agentboard-under-test.pth").write_text("\n".join([src, *ours]) + "\n")
    try:
        yield env_dir
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_sandboxed_worker_finds_agentboard_installed_in_a_virtualenv_under_tmp_and_its_script_under_tmp(
        home: Path, tmp_venv: Path) -> None:
    require_bwrap()
    scripts = Path(tempfile.mkdtemp(prefix="agentboard-agent-", dir="/tmp"))
    scripts.chmod(0o755)
    outside = scripts / "escaped"
    worker = scripts / "agent.sh"
    worker.write_text(WORKER.format(outside=outside))
    worker.chmod(0o755)
    py = tmp_venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTBOARD_", "VIRTUAL_ENV", "TMPDIR"))}
    env.update(AGENTBOARD_HOME=str(home), PATH=f"{tmp_venv / 'bin'}:/usr/local/bin:/usr/bin:/bin")
    try:
        with agentboard.connect(str(home)) as ab:
            ab.add_profile("boxed", command=str(worker), isolation="sandbox")
            task = ab.board().create("work in a sandbox", assignee="boxed", max_retries=1)
        log = open(home.parent / "dispatcher.log", "ab")  # noqa: SIM115 - closed below
        proc = subprocess.Popen([str(py), "-m", "agentboard", "dispatcher"], env=env, stdout=log, stderr=log,
                                start_new_session=True)
        try:
            with agentboard.connect(str(home)) as ab:
                shown = wait_for(lambda: (t := ab.board().show(task["id"]))["status"] not in ("ready", "running")
                                 and t, what="the task to finish")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            log.close()
        worker_log = home / "boards" / "default" / "logs" / f"{task['id']}.log"
        said = worker_log.read_text() if worker_log.exists() else ""
        assert shown["status"] == "done", (shown.get("last_failure_error"), said)
        assert shown["runs"][-1]["summary"].startswith("done from the sandbox: /tmp/agentboard-bin-"), said
        assert (Path(shown["workspace_path"]) / "made-in-the-sandbox.txt").read_text() == "work\n"
        # what was made visible stays read-only: the script's folder under /tmp too
        assert "outside refused" in said and not outside.exists()
    finally:
        shutil.rmtree(scripts, ignore_errors=True)


def test_a_profile_whose_program_lies_in_the_home_fails_at_spawn_saying_the_sandbox_cannot_see_it(
        home: Path) -> None:
    from agentboard.dispatch.dispatcher import Dispatcher

    require_bwrap()
    with agentboard.connect(str(home)) as ab:
        program = home / "tools" / "agent.sh"
        program.parent.mkdir(parents=True)
        program.write_text("#!/bin/sh\necho '{\"success\": true, \"summary\": \"ran\"}' > .board/result.json\n")
        program.chmod(0o755)
        ab.add_profile("hidden", command=str(program), isolation="sandbox")
        task = ab.board().create("cannot start", assignee="hidden", max_retries=1)
        d = Dispatcher(ab.db, ab.settings)
        d.start()
        try:
            shown = wait_for(lambda: (t := ab.board().show(task["id"]))["status"] not in ("ready", "running")
                             and t, what="the spawn to fail")
        finally:
            d.stop()
    assert [r["outcome"] for r in shown["runs"]][:1] == ["spawn_failed"]
    error = shown["last_failure_error"] or ""
    assert f"the sandbox cannot see {program}" in error and "inside the agentboard home" in error


def test_what_a_sandbox_shows_of_tmp_is_the_installation_of_a_program_never_tmp_itself(tmp_venv: Path) -> None:
    from agentboard.dispatch import isolation

    scripts = Path(tempfile.mkdtemp(prefix="agentboard-agent-", dir="/tmp"))
    try:
        (scripts / "run.py").write_text("print('hi')\n")
        loose = Path(tempfile.mkstemp(prefix="agentboard-loose-", suffix=".py", dir="/tmp")[1])
        env = {"PATH": f"{tmp_venv / 'bin'}:/usr/bin:/bin"}
        shown = isolation.needed_paths([str(tmp_venv / "bin" / "python"), str(scripts / "run.py")], env)
        assert str(tmp_venv) in shown and str(scripts) in shown
        assert "/tmp" not in shown
        # a script right in /tmp: only that file
        assert str(loose) in isolation.needed_paths(["/usr/bin/python3", str(loose)], {"PATH": "/usr/bin"})
        # nothing outside /tmp is listed: the sandbox shows it read-only already
        assert not [p for p in shown if not p.startswith("/tmp/")]
        loose.unlink()
    finally:
        shutil.rmtree(scripts, ignore_errors=True)
    assert sys.executable
