# ruff: noqa: F811 - the fixtures home and worker_user come from test_isolation
"""Verification runs the worker's code (its tests), so it runs confined like the worker.

A hostile worker writes a test file and reports success; the task's check (``python3 -m
unittest``) then runs that file. The file tries to write a marker outside the workspace, to read
the serve token and list the agentboard home, and prints a secret of the dispatcher's
environment. Under ``sandbox`` and ``user`` all of that fails; under ``none`` the record says
plainly that nothing was confined, and the environment is still the worker's.

Real processes throughout: the dispatcher, the worker, ``bwrap``, a real OS user (as root).
"""

from __future__ import annotations

import json
import os
import shlex
import textwrap
from pathlib import Path
from typing import Any

import pytest
from testenv import wait_for

import agentboard

from .test_isolation import agentboard_cli, home, require_bwrap, worker_user  # noqa: F401 - fixtures

SECRET = "dispatcher-secret-4f1c9e"

# the worker: writes a test file that attacks the host when verification runs it
WORKER = textwrap.dedent('''
    import json, os, sys
    attack = """
    import json, os, unittest

    MARKER, HOME, REPORT = {marker!r}, {home!r}, "verify-report.json"

    class Attack(unittest.TestCase):
        def test_attack(self):
            got = {{"ran": True, "uid": os.getuid()}}
            try:
                with open(MARKER, "w") as fh:
                    fh.write("escaped")
                got["marker"] = "written"
            except OSError as exc:
                got["marker"] = type(exc).__name__
            try:
                with open(os.path.join(HOME, "serve-token")) as fh:
                    got["token"] = fh.read()
            except OSError as exc:
                got["token"] = type(exc).__name__
            try:
                got["home"] = sorted(os.listdir(HOME))
            except OSError as exc:
                got["home"] = type(exc).__name__
            got["secret"] = os.environ.get("DISPATCHER_SECRET")
            got["env_home"] = os.environ.get("AGENTBOARD_HOME")
            got["run_token"] = os.environ.get("AGENTBOARD_TOKEN")
            print("ATTACK", {{k: v for k, v in got.items() if k != "uid"}}, flush=True)
            with open(REPORT, "w") as fh:
                json.dump(got, fh)
    """
    with open("test_attack.py", "w") as fh:
        fh.write(attack.format(marker=os.environ["PROBE_MARKER"], home=os.environ["PROBE_HOME"]))
    with open(".board/result.json", "w") as fh:
        json.dump({"success": True, "summary": "wrote my tests"}, fh)
''')



def verify_attack(home: Path, isolation: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], dict[str, Any],
                                                                                        Path]:
    """Run the hostile worker with ``isolation`` under the real dispatcher (whose environment holds
    ``DISPATCHER_SECRET``) and a board whose check runs its tests. Returns the finished task,
    what the attack found (its report in the workspace) and the marker it tried to write."""
    from agentboard.dispatch.dispatcher import Dispatcher

    monkeypatch.setenv("DISPATCHER_SECRET", SECRET)
    script = home.parent / "hostile_worker.py"
    script.write_text(WORKER)
    script.chmod(0o755)
    marker = home.parent / "written-by-verification"
    (home / "serve-token").parent.mkdir(parents=True, exist_ok=True)
    with agentboard.connect(str(home)) as ab:
        (home / "serve-token").write_text("abt_the-serve-token\n")
        ab.add_profile("hostile", command=f"/usr/bin/python3 {shlex.quote(str(script))}", isolation=isolation,
                       env={"PROBE_MARKER": str(marker), "PROBE_HOME": str(home)})
        task = ab.board().create("write tests", assignee="hostile", max_retries=1,
                                 verify=["python3 -m unittest -v test_attack"])
        d = Dispatcher(ab.db, ab.settings)
        d.start()
        try:
            shown = wait_for(lambda: (t := ab.board().show(task["id"]))["status"] not in ("ready", "running")
                             and t, what="the task to finish")
        finally:
            d.stop()
        assert shown["status"] == "done", shown.get("last_failure_error")
        ws = Path(shown["workspace_path"])
        report = json.loads((ws / "verify-report.json").read_text())
    return shown, report, marker


def verification_record(task: dict[str, Any]) -> dict[str, Any]:
    meta = task["runs"][-1].get("metadata") or {}
    if isinstance(meta, str):
        meta = json.loads(meta)
    return dict(meta["verification"])


def assert_contained(task: dict[str, Any], report: dict[str, Any], marker: Path) -> None:
    assert report["ran"] is True
    assert not marker.exists() and report["marker"] != "written"
    assert report["token"] != "abt_the-serve-token\n" and "the-serve-token" not in json.dumps(report)
    assert not isinstance(report["home"], list) or not {"serve-token", "agentboard.db"} & set(report["home"])
    assert report["secret"] is None and report["env_home"] is None and report["run_token"] is None
    record = verification_record(task)
    output = json.dumps(record)
    assert "ATTACK" in output  # the check ran the worker's test and its output was recorded
    assert SECRET not in output and "the-serve-token" not in output


def test_a_sandboxed_workers_tests_run_in_its_sandbox_at_verification(home: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    require_bwrap()
    task, report, marker = verify_attack(home, "sandbox", monkeypatch)
    assert_contained(task, report, marker)
    assert report["home"] == ["boards"]  # an empty folder but for the way to the workspace
    assert verification_record(task)["confinement"].startswith("sandbox:")


def test_a_user_isolated_workers_tests_run_as_the_worker_user_at_verification(
        home: Path, worker_user: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    r = agentboard_cli(home, "init", "--worker-user", worker_user)
    assert r.returncode == 0, r.stderr
    task, report, marker = verify_attack(home, "user", monkeypatch)
    assert_contained(task, report, marker)
    assert report["uid"] == pwd.getpwnam(worker_user).pw_uid
    assert report["home"] == "PermissionError"
    assert verification_record(task)["confinement"].startswith(f"user: as the worker user {worker_user}")


def test_verification_under_none_says_it_is_not_confined_and_gets_only_the_workers_environment(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task, report, _marker = verify_attack(home, "none", monkeypatch)
    assert report["ran"] is True
    assert report["secret"] is None and report["env_home"] is None and report["run_token"] is None
    assert report["uid"] == os.geteuid()
    record = verification_record(task)
    assert record["confinement"].startswith("none: not confined")
    assert SECRET not in json.dumps(record)


def test_verification_does_not_run_when_the_workers_confinement_is_gone(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandboxed worker whose sandbox cannot be had at verification time (bubblewrap gone from
    PATH): its tests are not run unconfined instead."""
    from agentboard.dispatch import spawning
    from agentboard.dispatch.dispatcher import Dispatcher

    require_bwrap()
    ran = home.parent / "verification-ran"
    with agentboard.connect(str(home)) as ab:
        ab.add_profile("boxed", command="sh -c " + shlex.quote(
            "echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json"), isolation="sandbox")
        task = ab.board().create("check me", assignee="boxed", max_retries=1, verify=[f"touch {ran}"])
        real = spawning.Spawner.verifying

        def without_bwrap(self: Any, *args: Any) -> Any:
            path = os.environ["PATH"]
            os.environ["PATH"] = "/nonexistent"  # bubblewrap is gone from this host
            try:
                return real(self, *args)
            finally:
                os.environ["PATH"] = path

        monkeypatch.setattr(spawning.Spawner, "verifying", without_bwrap)
        d = Dispatcher(ab.db, ab.settings)
        d.start()
        try:
            shown = wait_for(lambda: (t := ab.board().show(task["id"]))["status"] != "running"
                             and t["runs"] and t["runs"][-1].get("outcome") and t, what="the run to close")
        finally:
            d.stop()
    assert shown["status"] != "done"
    assert "verification failed" in (shown.get("last_failure_error") or "")
    assert "bubblewrap" in shown["last_failure_error"]
    assert not ran.exists()



# -- what a check leaves running ----------------------------------------------------------------------


@pytest.mark.parametrize("contained", [True, False], ids=["in the run's cgroup", "without cgroups"])
def test_a_check_that_leaves_a_daemon_holding_its_output_is_done_at_once(tmp_path: Path, contained: bool) -> None:
    """The worker's tests start a daemon in a session of its own that keeps the check's output
    open: the check is judged as soon as its shell is done, and, in the run's cgroup, the daemon
    ends with it (without cgroups only its process group can be ended)."""
    from agentboard.cgroups import WorkerCgroups
    from agentboard.dispatch import liveness
    from agentboard.protocol import verify

    folder = None
    cgroups = WorkerCgroups(tmp_path / "home", "verify-test")
    if contained:
        if cgroups.probe() is None:
            pytest.skip(f"no cgroups for workers on this host: {cgroups.why}")
        folder = cgroups.prepare(424242)
    pidfile = tmp_path / "daemon.pid"
    command = (f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' & sleep 30 & "
               f"while [ ! -s {pidfile} ]; do sleep 0.01; done; echo checked")
    try:
        result = verify.run_command(command, tmp_path, timeout=120, cgroup=folder)
        assert result.passed and result.output_tail.strip() == "checked"
        assert result.seconds < 60  # the old pipe waited for the daemon: 300 s, then forever
        daemon = int(pidfile.read_text())
        if contained:
            assert not liveness.pid_alive(daemon), "the daemon outlived the check"
            assert folder is not None and not folder.exists()
    finally:
        try:
            os.kill(int(pidfile.read_text()), 9)
        except (OSError, ValueError):
            pass
        cgroups.close()
