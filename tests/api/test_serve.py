"""`agentboard serve` and `agentboard tokens` as a user runs them: real processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from testenv import copy_template, wait_for
from websockets.sync.client import connect

import agentboard

pytestmark = pytest.mark.xdist_group("serve")


@pytest.fixture
def home(home: Path, sqlite_template: Path) -> Path:
    """A fresh home that starts from a copy of the suite's migrated database, as a home that
    has run a first command (each process here would otherwise migrate a new one)."""
    return copy_template(sqlite_template, home)


class Serve:
    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        full_env = {**os.environ, "AGENTBOARD_HOME": str(home), **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentboard", "serve", "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
        self.lines: list[str] = []
        self.login = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline() if self.proc.stdout else ""
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"(http://\S+)/login\?token=(\S+)", line)
            if m:
                self.url, self.token, self.login = m.group(1), m.group(2), m.group(0)
                return
        self.stop()
        raise AssertionError(f"serve printed no login URL: {self.lines} {self.proc.stderr.read() if self.proc.stderr else ''}")

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.stderr.read() if self.proc.stderr else ""


def test_serve_prints_a_login_url_that_logs_the_browser_in_and_reuses_its_token(home: Path) -> None:
    s = Serve(home, "--no-dispatch")
    try:
        browser = httpx.Client(base_url=s.url, follow_redirects=True)
        page = browser.get(s.login.replace(s.url, ""))
        assert page.status_code == 200 and "<html" in page.text.lower()
        assert browser.get("/api/config").json()["me"]["role"] == "admin"
        assert httpx.get(s.url + "/api/board").status_code == 401
        token_file = home / "serve-token"
        assert token_file.read_text().strip() == s.token
        assert oct(token_file.stat().st_mode & 0o777) == "0o600"
    finally:
        s.stop()
    again = Serve(home, "--no-dispatch")
    try:
        assert again.token == s.token
    finally:
        again.stop()


def test_a_second_serve_of_the_same_home_says_where_the_first_one_is(home: Path) -> None:
    s = Serve(home, "--no-dispatch")
    env = {**os.environ, "AGENTBOARD_HOME": str(home)}
    port = s.url.rsplit(":", 1)[1]
    try:
        r = subprocess.run([sys.executable, "-m", "agentboard", "serve", "--port", port, "--no-dispatch"],
                           capture_output=True, text=True, env=env, timeout=60)
    finally:
        s.stop()
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "already running for this home" in lines[0]
    assert s.login in lines[0]  # the link that logs in, as the first one printed it
    # a port some other program holds: the error says so and how to pick another
    import socket
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "agentboard", "serve", "--port", str(taken), "--no-dispatch"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0 and "another program has that port" in r.stderr and "--port" in r.stderr


def test_serve_pushes_events_committed_by_another_process(home: Path) -> None:
    s = Serve(home, "--no-dispatch")
    other = agentboard.connect(str(home))
    try:
        url = s.url.replace("http://", "ws://") + f"/api/events?board=default&token={s.token}"
        with connect(url) as ws:
            json.loads(ws.recv(timeout=10))
            task = other.board().create("made by the test process")
            seen: list[dict[str, Any]] = []
            while not any(e["task_id"] == task["id"] for e in seen):
                seen.extend(json.loads(ws.recv(timeout=10))["events"])
    finally:
        other.close()
        s.stop()


def test_a_non_loopback_address_needs_host_explicitly_and_warns(home: Path) -> None:
    env = {**os.environ, "AGENTBOARD_HOME": str(home), "AGENTBOARD_API_HOST": "0.0.0.0"}
    r = subprocess.run([sys.executable, "-m", "agentboard", "serve", "--port", "0", "--no-dispatch"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and "--host 0.0.0.0" in r.stderr
    s = Serve(home, "--host", "0.0.0.0", "--no-dispatch")
    err = s.stop()
    assert "warning" in err.lower() and "0.0.0.0" in err


PROBE = textwrap.dedent('''
    import json, os, pathlib, httpx
    api = os.environ["AGENTBOARD_API_URL"]
    h = {"Authorization": "Bearer " + os.environ["AGENTBOARD_TOKEN"]}
    task = os.environ["AGENTBOARD_TASK"]
    out = {
        "own": httpx.get(f"{api}/api/tasks/{task}", headers=h).status_code,
        "other_board": httpx.get(f"{api}/api/board", params={"board": "other"}, headers=h).status_code,
        "comment": httpx.post(f"{api}/api/tasks/{task}/comments", json={"body": "hello from the worker"},
                              headers=h).status_code,
        "patch_done": httpx.patch(f"{api}/api/tasks/{task}", json={"status": "done"}, headers=h).status_code,
        "done": httpx.post(f"{api}/api/tasks/{task}/complete", json={"summary": "probed"}, headers=h).status_code,
    }
    out["after"] = httpx.get(f"{api}/api/board", headers=h).status_code
    pathlib.Path(os.environ["PROBE_OUT"]).write_text(json.dumps(out))
''')


def test_the_embedded_dispatcher_gives_workers_a_run_token_for_their_board(home: Path, tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    out = tmp_path / "probe.json"
    ab = agentboard.connect(str(home))
    ab.create_board("other")
    ab.add_profile("probe", command=f"{sys.executable} {probe}")
    s = Serve(home, env={"PROBE_OUT": str(out)})
    try:
        task = ab.board().create("check my token", assignee="probe")
        httpx.post(s.url + "/api/dispatch", headers={"Authorization": f"Bearer {s.token}"}, timeout=60)
        wait_for(out.exists, timeout=60, what="the probe's report")
        result = json.loads(out.read_text())
        # a worker changes its task only through the worker verbs; its token dies with its run
        assert result == {"own": 200, "other_board": 403, "comment": 201, "patch_done": 403, "done": 200,
                          "after": 401}
        shown = ab.board().show(task["id"])
        assert shown["status"] == "done"
        assert any(c["body"] == "hello from the worker" for c in shown["comments"])
    finally:
        s.stop()
        ab.close()


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTBOARD_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "agentboard", *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_tokens_cli_create_list_revoke(home: Path) -> None:
    made = _cli(home, "tokens", "create", "ci-bot", "--role", "viewer", "--board", "default", "--json")
    assert made.returncode == 0, made.stderr
    info = json.loads(made.stdout)
    assert info["role"] == "viewer" and info["boards"] == ["default"] and info["token"].startswith("abt_")
    plain = _cli(home, "tokens", "create", "human")
    assert plain.returncode == 0 and plain.stdout.strip().startswith("abt_")
    listed = _cli(home, "tokens", "list", "--json")
    rows = json.loads(listed.stdout)
    assert {r["name"] for r in rows} == {"ci-bot", "human"}
    assert info["token"] not in listed.stdout and "token_hash" not in listed.stdout
    dup = _cli(home, "tokens", "create", "ci-bot")
    assert dup.returncode == 4 and "already exists" in dup.stderr
    bad = _cli(home, "tokens", "create", "x", "--role", "root")
    assert bad.returncode == 2
    assert _cli(home, "tokens", "revoke", "ci-bot").returncode == 0
    assert [r["name"] for r in json.loads(_cli(home, "tokens", "list", "--json").stdout)] == ["human"]
    gone = _cli(home, "tokens", "revoke", "ci-bot")
    assert gone.returncode == 3
    ab = agentboard.connect(str(home))
    try:
        from agentboard.domain.errors import Unauthorized
        from agentboard.kernel import tokens

        with pytest.raises(Unauthorized):
            tokens.verify(ab.db, info["token"])
    finally:
        ab.close()
