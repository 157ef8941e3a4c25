"""Isolation of worker processes (a profile's ``isolation``): a ``user`` worker runs as another
OS user, a ``sandbox`` worker under bubblewrap. Each finishes a task through the API with its
run token and cannot read the home, the serve token or the database.

These tests start real processes: ``agentboard serve`` with its dispatcher, workers as a real OS
user (created here, as root, and removed afterwards) and under the real ``bwrap``. Without root
they are skipped; without bubblewrap the sandbox ones are skipped locally and fail under CI=true.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from testenv import point_home_at

import agentboard
from agentboard.dispatch import workspaces

# the worker: tries to read the home, the serve token, the database and config, and to write
# outside its workspace; posts what it got as a comment with its run token; reports it in
# .board/result.json
PROBE = textwrap.dedent('''
    import json, os, urllib.request

    def attempt(path):
        try:
            if os.path.isdir(path):
                return {"read": True, "listing": sorted(os.listdir(path))}
            with open(path, "rb") as fh:
                return {"read": True, "bytes": fh.read(200).decode("latin-1")}
        except OSError as exc:
            return {"read": False, "error": type(exc).__name__}

    out = {"uid": os.getuid(), "cwd": os.getcwd()}
    for name in ("PROBE_HOME", "PROBE_TOKEN", "PROBE_DB", "PROBE_CONFIG"):
        out[name] = attempt(os.environ[name])
    try:
        with open(os.environ["PROBE_WRITE"], "w") as fh:
            fh.write("escaped")
        out["write_outside"] = True
    except OSError as exc:
        out["write_outside"] = False
    body = json.dumps({"probe": out}).encode()
    req = urllib.request.Request(
        os.environ["AGENTBOARD_API_URL"] + "/api/tasks/" + os.environ["AGENTBOARD_TASK"] + "/comments",
        data=json.dumps({"body": "probe " + body.decode()}).encode(), method="POST",
        headers={"Authorization": "Bearer " + os.environ["AGENTBOARD_TOKEN"], "Content-Type": "application/json"})
    status = urllib.request.urlopen(req, timeout=30).status
    with open(".board/result.json", "w") as fh:
        json.dump({"success": True, "summary": "probed: comment " + str(status)}, fh)
''')

SECRET_NAMES = ("serve-token", "agentboard.db", "config.toml")


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("running a worker as another OS user needs root")


def require_bwrap() -> None:
    if shutil.which("bwrap") is not None:
        return
    reason = "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason + " (CI=true: the sandbox tests must run)")
    pytest.skip(reason)


def agentboard_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTBOARD_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "agentboard", *args], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.fixture
def worker_user() -> Iterator[str]:
    """A name for a worker user that does not exist yet; the user (and its group) is removed after."""
    require_root()
    name = "abiso-" + secrets.token_hex(4)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True)
        subprocess.run(["groupdel", name], capture_output=True)


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh home in a folder every user may enter (not pytest's 0700 temporary folders, nor
    /tmp, which a sandbox replaces), so only the home's own protection keeps a worker out.
    Removed after, with the home's scratch workspaces for isolated workers."""
    parent = Path(tempfile.mkdtemp(prefix="agentboard-isolation-", dir="/var/tmp"))
    parent.chmod(0o755)
    h = parent / "home"
    point_home_at(h, monkeypatch)
    try:
        yield h
    finally:
        shutil.rmtree(parent, ignore_errors=True)
        shutil.rmtree(workspaces.isolated_root(h), ignore_errors=True)


@pytest.fixture
def probe(home: Path) -> Path:
    """The probe script, next to the home, readable by every user."""
    script = home.parent / "probe.py"
    script.write_text(PROBE)
    script.chmod(0o755)
    return script


class Serve:
    """``agentboard serve`` with its dispatcher, on an ephemeral loopback port."""

    def __init__(self, home: Path) -> None:
        env = {**os.environ, "AGENTBOARD_HOME": str(home)}
        self.proc = subprocess.Popen([sys.executable, "-m", "agentboard", "serve", "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 60
        lines: list[str] = []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline() if self.proc.stdout else ""
            if not line:
                break
            lines.append(line)
            m = re.search(r"(http://\S+)/login\?token=(\S+)", line)
            if m:
                self.url, self.token = m.group(1), m.group(2)
                return
        self.stop()
        raise AssertionError(f"serve printed no login URL: {lines}")

    def dispatch(self) -> None:
        httpx.post(self.url + "/api/dispatch", headers={"Authorization": f"Bearer {self.token}"}, timeout=60)

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.stderr.read() if self.proc.stderr else ""


def run_probe(home: Path, probe: Path, isolation: str, workspace: str | None = None,
              unchecked_workspace: str | None = None) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """Add a profile running the probe with ``isolation``, start ``serve``, give it a task and
    wait until the task is finished. Returns the task, what the worker reported in its comment,
    and the file it tried to write outside its workspace."""
    outside = probe.parent / "written-by-the-worker"  # a folder of root, 0755
    env = {"PROBE_HOME": home, "PROBE_TOKEN": home / "serve-token", "PROBE_DB": home / "agentboard.db",
           "PROBE_CONFIG": home / "config.toml", "PROBE_WRITE": outside}
    r = agentboard_cli(home, "profiles", "add", "probe", "--command", f"/usr/bin/python3 {probe}",
                       "--isolation", isolation, *[a for k, v in env.items() for a in ("--env", f"{k}={v}")])
    assert r.returncode == 0, r.stderr
    if not (home / "config.toml").exists():
        (home / "config.toml").write_text("# nothing configured\n")
    server = Serve(home)
    try:
        with agentboard.connect(str(home)) as ab:
            board = ab.board()
            task = board.create("probe the host", assignee="probe", max_retries=1, workspace=workspace,
                                triage=unchecked_workspace is not None)
            if unchecked_workspace is not None:
                # a workspace no task may be created with any more (one holding the home): as if
                # stored before that rule, then released
                ab.db.write(lambda tx: tx.execute(
                    "UPDATE tasks SET workspace_kind = 'dir', workspace_path = :p WHERE id = :id",
                    {"p": unchecked_workspace, "id": task["id"]}))
                board.release(task["id"])
            server.dispatch()
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                shown = board.show(task["id"])
                if shown["status"] in ("done", "blocked"):
                    break
                time.sleep(0.2)
            comments = [c["body"] for c in shown["comments"] if c["body"].startswith("probe ")]
            log = (home / "boards" / "default" / "logs" / f"{task['id']}.log")
            log_text = log.read_text() if log.exists() else ""
            assert shown["status"] == "done", (shown.get("last_failure_error"), log_text)
            assert comments, log_text
            return shown, json.loads(comments[0][len("probe "):])["probe"], outside
    finally:
        server.stop()


def assert_nothing_leaked(home: Path, got: dict[str, Any], outside: Path) -> None:
    for name in ("PROBE_TOKEN", "PROBE_DB", "PROBE_CONFIG"):
        assert got[name]["read"] is False, (name, got[name])
    listing = got["PROBE_HOME"].get("listing", [])
    assert not set(listing) & set(SECRET_NAMES), got["PROBE_HOME"]
    token = (home / "serve-token").read_text().strip()
    assert token and token not in json.dumps(got)
    assert got["write_outside"] is False and not outside.exists()


def test_a_user_isolated_worker_finishes_its_task_but_cannot_read_the_home_the_serve_token_or_the_database(
        home: Path, worker_user: str, probe: Path) -> None:
    r = agentboard_cli(home, "init", "--worker-user", worker_user)
    assert r.returncode == 0, r.stderr
    task, got, outside = run_probe(home, probe, "user")
    assert got["uid"] == pwd.getpwnam(worker_user).pw_uid
    assert got["PROBE_HOME"]["read"] is False
    assert_nothing_leaked(home, got, outside)
    assert task["runs"][-1]["summary"] == "probed: comment 201"
    # its scratch workspace is outside the home, and belongs to the worker user
    assert Path(got["cwd"]).is_relative_to(workspaces.isolated_root(home))
    assert Path(got["cwd"]).stat().st_uid == pwd.getpwnam(worker_user).pw_uid


def test_a_sandboxed_worker_finishes_its_task_but_cannot_read_the_home_the_serve_token_or_the_database(
        home: Path, probe: Path) -> None:
    require_bwrap()
    task, got, outside = run_probe(home, probe, "sandbox")
    assert_nothing_leaked(home, got, outside)
    assert task["runs"][-1]["summary"] == "probed: comment 201"
    # its workspace (inside the home) is the one thing of the home it sees
    assert Path(got["cwd"]).is_relative_to(home)


def test_a_sandboxed_worker_whose_workspace_holds_the_home_still_cannot_see_the_home(
        home: Path, probe: Path) -> None:
    require_bwrap()
    _task, got, _outside = run_probe(home, probe, "sandbox", unchecked_workspace=str(home.parent))
    assert Path(got["cwd"]) == home.parent
    for name in ("PROBE_TOKEN", "PROBE_DB", "PROBE_CONFIG"):
        assert got[name]["read"] is False, (name, got[name])
    assert got["PROBE_HOME"] == {"read": True, "listing": []}


def test_a_sandboxed_worker_runs_as_the_worker_user_when_one_is_configured(
        home: Path, worker_user: str, probe: Path) -> None:
    require_bwrap()
    r = agentboard_cli(home, "init", "--worker-user", worker_user)
    assert r.returncode == 0, r.stderr
    _task, got, outside = run_probe(home, probe, "sandbox")
    assert got["uid"] == pwd.getpwnam(worker_user).pw_uid
    assert_nothing_leaked(home, got, outside)


def test_an_unknown_isolation_is_refused_by_the_cli_and_the_api(ab: Any, home: Path) -> None:
    from agentboard.api import create_app
    from agentboard.api.serve import BackgroundServer
    from agentboard.kernel import tokens

    r = agentboard_cli(home, "profiles", "add", "jail", "--command", "true", "--isolation", "chroot")
    assert r.returncode == 2 and "unknown isolation 'chroot'" in r.stderr
    assert [p["name"] for p in ab.profiles()] == []
    ab.add_profile("open", command="true")
    r = agentboard_cli(home, "profiles", "set", "open", "--isolation", "chroot")
    assert r.returncode == 2 and "none, user, sandbox" in r.stderr

    admin = tokens.create(ab.db, "admin", role="admin")["token"]
    server = BackgroundServer(create_app(ab.settings, ab.db)).start()
    try:
        h = {"Authorization": f"Bearer {admin}"}
        r2 = httpx.post(server.url + "/api/profiles", json={"name": "jail", "command": "true", "isolation": "vm"},
                        headers=h)
        assert r2.status_code == 400 and "unknown isolation" in r2.text
        r2 = httpx.patch(server.url + "/api/profiles/open", json={"isolation": "vm"}, headers=h)
        assert r2.status_code == 400
        r2 = httpx.patch(server.url + "/api/profiles/open", json={"isolation": "sandbox"}, headers=h)
        assert r2.status_code == 200 and r2.json()["isolation"] == "sandbox"
    finally:
        server.stop()
    assert {p["name"]: p["isolation"] for p in ab.profiles()} == {"open": "sandbox"}


def test_a_user_isolated_profile_without_a_worker_user_is_not_started_and_says_why(ab: Any, home: Path) -> None:
    from agentboard.dispatch.dispatcher import Dispatcher

    ran = home.parent / "ran"
    ab.add_profile("confined", command=f"touch {ran}", isolation="user")
    task = ab.board().create("must not run unisolated", assignee="confined", max_retries=1)
    ab.settings.worker_user = None
    d = Dispatcher(ab.db, ab.settings)
    d.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and ab.board().show(task["id"])["status"] != "blocked":
            time.sleep(0.1)
    finally:
        d.stop()
    shown = ab.board().show(task["id"])
    assert shown["status"] == "blocked"
    assert "isolation 'user' needs" in shown["last_failure_error"]
    assert [r["outcome"] for r in ab.board().runs(task["id"])] == ["spawn_failed"]
    assert not ran.exists()


def test_init_with_a_worker_user_creates_the_user_and_closes_the_home_to_it(home: Path, worker_user: str) -> None:
    home.mkdir(parents=True)
    home.chmod(0o755)
    r = agentboard_cli(home, "init", "--worker-user", worker_user, "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    try:
        assert info["worker_user"] == worker_user and info["worker_user_created"] is True
        user = pwd.getpwnam(worker_user)
        assert user.pw_uid != 0
        assert (home.stat().st_mode & 0o777) == 0o700 and home.stat().st_uid == os.geteuid()
        assert f'worker_user = "{worker_user}"' in (home / "config.toml").read_text()
        assert agentboard.connect(str(home)).settings.worker_user == worker_user
        # a second run finds the user and changes nothing
        again = json.loads(agentboard_cli(home, "init", "--worker-user", worker_user, "--json").stdout)
        assert again["worker_user_created"] is False
        # the worker user cannot list the home nor read its database
        r = subprocess.run(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--",
                            "cat", str(home / "agentboard.db")], capture_output=True)
        assert r.returncode != 0 and b"Permission denied" in r.stderr
    finally:
        shutil.rmtree(info["worker_workspaces"], ignore_errors=True)


def test_a_sandboxed_worker_outlives_the_thread_that_started_it(home: Path) -> None:
    """bwrap's --die-with-parent follows the thread that started it; request and pool threads
    end while their workers still run."""
    import threading

    from agentboard.dispatch.dispatcher import Dispatcher

    require_bwrap()
    done = "echo '{\"success\": true, \"summary\": \"slept\"}' > .board/result.json"
    with agentboard.connect(str(home)) as ab:
        ab.add_profile("slow", command="sh -c " + shlex.quote(f"sleep 2; {done}"), isolation="sandbox")
        task = ab.board().create("sleep in a sandbox", assignee="slow", max_retries=1)
        d = Dispatcher(ab.db, ab.settings)
        starter = threading.Thread(target=d.run_pass)
        starter.start()
        starter.join()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and ab.board().show(task["id"])["status"] == "running":
            time.sleep(0.2)
            d.run_pass()
        shown = ab.board().show(task["id"])
        assert shown["status"] == "done", shown["last_failure_error"]
        assert shown["runs"][-1]["summary"] == "slept"


# a worktree task's worker looks beside its own worktree: another task's worktree (its run token
# in its .mcp.json) must not be there to read; its own .mcp.json is its owner's alone
NEIGHBOUR = textwrap.dedent('''
    import json, os
    out = {"mode": oct(os.stat(".mcp.json").st_mode & 0o777)}
    try:
        out["beside"] = sorted(os.listdir(".."))
    except OSError as exc:
        out["beside"] = type(exc).__name__
    try:
        out["neighbour"] = open("../t_neighbour/.mcp.json").read()
    except OSError as exc:
        out["neighbour"] = type(exc).__name__
    with open(".board/result.json", "w") as fh:
        json.dump({"success": True, "summary": json.dumps(out)}, fh)
''')


def _passes_until_it_ran(ab: Any, board: Any, task_id: str) -> dict[str, Any]:
    """Dispatcher passes until the task is no longer running (90 s at most); the task then."""
    from agentboard.dispatch.dispatcher import Dispatcher

    d = Dispatcher(ab.db, ab.settings)
    try:
        d.run_pass()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and board.show(task_id)["status"] == "running":
            d.run_pass()
            time.sleep(0.2)
    finally:
        d.stop()
    return dict(board.show(task_id))


@pytest.mark.parametrize("isolation", ["sandbox", "none"])
def test_a_worktree_worker_never_sees_the_other_tasks_worktrees_tokens(
        home: Path, isolation: str) -> None:
    """The other worktrees of the target sit beside a worker's own: a sandbox shows it only its
    own, and every worker's ``.mcp.json`` (its run token) is readable by its owner alone."""
    if isolation == "sandbox":
        require_bwrap()
    repo = home.parent / "repo"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "dev@example.com"],
                 ["config", "user.name", "dev"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    (repo / "README.md").write_text("hello\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=repo, check=True)
    neighbour = repo / ".worktrees" / "t_neighbour"
    neighbour.mkdir(parents=True)
    (neighbour / ".mcp.json").write_text('{"token": "abt_the-neighbours-token"}')
    script = home.parent / "neighbour.py"
    script.write_text(NEIGHBOUR)
    script.chmod(0o755)
    with agentboard.connect(str(home)) as ab:
        ab.create_board("flow", workdir=str(repo))
        ab.add_profile("looker", command=f"/usr/bin/python3 {script}", isolation=isolation)
        board = ab.board("flow")
        task = board.create("look around", assignee="looker", workspace="worktree", max_retries=1)
        shown = _passes_until_it_ran(ab, board, task["id"])
    assert shown["status"] == "done", shown
    got = json.loads(shown["runs"][-1]["summary"])
    assert got["mode"] == "0o600"
    if isolation == "sandbox":
        assert got["beside"] == [task["id"]]
        assert got["neighbour"] == "FileNotFoundError"


def test_a_sandboxed_worker_user_never_sees_the_other_tasks_scratch_workspaces(
        home: Path, worker_user: str) -> None:
    """Workers running as the worker user keep their scratch workspaces outside the home, all
    owned by that one user: the sandbox hides them all but the worker's own (another's
    ``.mcp.json`` holds its run token)."""
    require_bwrap()
    r = agentboard_cli(home, "init", "--worker-user", worker_user)
    assert r.returncode == 0, r.stderr
    neighbour = workspaces.isolated_root(home) / "default" / "t_neighbour"
    neighbour.mkdir(parents=True)
    (neighbour / ".mcp.json").write_text('{"token": "abt_the-neighbours-token"}')
    user = pwd.getpwnam(worker_user)
    for path in (neighbour, neighbour / ".mcp.json"):
        os.chown(path, user.pw_uid, user.pw_gid)
    script = home.parent / "neighbour.py"
    script.write_text(NEIGHBOUR)
    script.chmod(0o755)
    with agentboard.connect(str(home)) as ab:
        ab.add_profile("looker", command=f"/usr/bin/python3 {script}", isolation="sandbox")
        board = ab.board()
        task = board.create("look around", assignee="looker", max_retries=1)
        shown = _passes_until_it_ran(ab, board, task["id"])
    assert shown["status"] == "done", shown
    got = json.loads(shown["runs"][-1]["summary"])
    assert got["beside"] == [task["id"]] and got["neighbour"] == "FileNotFoundError", got
