"""`<home>/api.json` names the API a one-shot pass hands its workers: a `serve` started beside a
running dispatcher neither replaces that record nor removes it when it stops, so the next pass
still borrows the dispatcher's API; a second dispatcher says which boards the first holds.
Real processes on a real SQLite home."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest
from testenv import copy_template, wait_for

AB = [sys.executable, "-m", "agentboard"]


@pytest.fixture
def cli_home(home: Path, sqlite_template: Path) -> Path:
    """A fresh SQLite home (a copy of the suite's migrated template); AGENTBOARD_HOME points at it."""
    copy_template(sqlite_template, home)
    (home / "boards").mkdir(exist_ok=True)
    return home


def _start(*args: str, stderr: IO[str] | int = subprocess.DEVNULL) -> subprocess.Popen[str]:
    return subprocess.Popen([*AB, *args], env=dict(os.environ), stdout=subprocess.PIPE, stderr=stderr, text=True,
                            start_new_session=True)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _record(home: Path) -> dict[str, object] | None:
    try:
        return dict(json.loads((home / "api.json").read_text()))
    except (OSError, ValueError):
        return None


def _answers(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/api/me", timeout=5, trust_env=False).status_code == 401
    except httpx.HTTPError:
        return False


def test_a_serve_beside_a_dispatcher_leaves_its_api_record_and_the_next_pass_borrows_that_api(
        cli_home: Path) -> None:
    dispatcher = _start("dispatcher")
    try:
        mine = wait_for(lambda: (r := _record(cli_home)) and r.get("pid") == dispatcher.pid and r,
                        what="the dispatcher's record")
        serve = _start("serve", "--port", "0", "--no-dispatch")
        try:
            assert serve.stdout is not None
            url = serve.stdout.readline().split()[1]
            wait_for(lambda: _answers(url), what="the serve to answer")
            assert _record(cli_home) == mine  # not replaced by the serve's
        finally:
            _stop(serve)
        assert _record(cli_home) == mine  # nor removed when the serve stops
        out = subprocess.run([*AB, "dispatch", "--wait"], env=dict(os.environ), capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert "serving the API" not in out.stderr and "no `serve` or `dispatcher` runs" not in out.stderr
    finally:
        _stop(dispatcher)
    assert _record(cli_home) is None  # the dispatcher removes its own record when it stops


def test_a_second_dispatcher_says_the_first_holds_its_boards_and_logs_no_refused_request(
        cli_home: Path, tmp_path: Path) -> None:
    first = _start("dispatcher")
    try:
        wait_for(lambda: (r := _record(cli_home)) and r.get("pid") == first.pid, what="the first dispatcher")
        wait_for(lambda: (cli_home / "boards" / "default" / "dispatcher.lock").exists(), what="its board lock")
        log = tmp_path / "second.log"
        with log.open("w") as fh:
            second = _start("dispatcher", stderr=fh)
            try:
                wait_for(lambda: "Ctrl-C to stop" in log.read_text(), what="the second dispatcher's start")
                wait_for(lambda: "another dispatcher is running" in log.read_text() or second.poll() is not None,
                         timeout=10, what="its warning")
            finally:
                _stop(second)
        said = log.read_text()
    finally:
        _stop(first)
    assert (f"warning: another dispatcher is running on this home for board(s) default (pid {first.pid}); "
            "this one skips them until it stops") in said, said
    assert "401" not in said and "Unauthorized" not in said, said


def test_a_pass_beside_a_dispatcher_whose_api_is_not_recorded_leaves_that_dispatchers_workers_to_it(
        cli_home: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    serve = _start("serve", "--port", "0", "--no-dispatch")
    dispatcher: subprocess.Popen[str] | None = None
    try:
        assert serve.stdout is not None
        url = serve.stdout.readline().split()[1]
        wait_for(lambda: _answers(url) and (r := _record(cli_home)) and r.get("pid") == serve.pid,
                 what="the serve's record")
        log = tmp_path / "dispatcher.log"
        with log.open("w") as fh:
            dispatcher = _start("dispatcher", stderr=fh)
        own = wait_for(lambda: re.search(r"its own API at (\S+);", log.read_text()), what="the dispatcher's API")
        wait_for(lambda: _answers(own.group(1)), what="the dispatcher's API to answer")
        assert _record(cli_home)["pid"] == serve.pid  # type: ignore[index]  # the dispatcher's is not recorded
        _stop(serve)  # the serve removes its record: the home now names no API, though a dispatcher runs
        assert _record(cli_home) is None
        subprocess.run([*AB, "profiles", "add", "slow", "--command", f"sh -c 'while [ ! -e {go} ]; do sleep 0.05; "
                        "done; agentboard complete --summary ok'"], env=dict(os.environ), check=True,
                       capture_output=True)
        tid = json.loads(subprocess.run([*AB, "create", "slow", "--assignee", "slow", "--json"], env=dict(os.environ),
                                        check=True, capture_output=True, text=True).stdout)["id"]
        wait_for(lambda: json.loads(subprocess.run([*AB, "show", tid, "--json"], env=dict(os.environ),
                                                   capture_output=True, text=True).stdout)["worker_pid"],
                 what="the dispatcher to start the worker")
        # a pass now skips the dispatcher's board, and neither serves nor waits for its worker
        out = subprocess.run([*AB, "dispatch", "--wait"], env=dict(os.environ), capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        assert "skipped board(s) default: another dispatcher is running" in out.stdout
        assert "serving the API" not in out.stderr and "no `serve` or `dispatcher` runs" not in out.stderr
        go.touch()
        wait_for(lambda: json.loads(subprocess.run([*AB, "show", tid, "--json"], env=dict(os.environ),
                                                   capture_output=True, text=True).stdout)["status"] == "done",
                 what="the dispatcher to record its worker's report")
    finally:
        go.touch()
        _stop(serve)
        if dispatcher is not None:
            _stop(dispatcher)
