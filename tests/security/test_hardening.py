"""Hardening: attachments uploaded concurrently, secrets in the configuration, one schema for
board settings and profile fields, a bad board among good ones, a worker's background children,
a full disk, sockets of revoked tokens, cursor overflow, attachment names, cross-board answers
and the modes of a new home."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from api.conftest import Api, start_api
from testenv import fill, wait_for
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

import agentboard
from agentboard.cgroups import WorkerCgroups
from agentboard.dispatch import liveness
from agentboard.dispatch.dispatcher import Dispatcher
from agentboard.kernel import runs, tokens


def _cli(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "AGENTBOARD_HOME": str(home), **(env or {})}
    return subprocess.run([sys.executable, "-m", "agentboard", *args], capture_output=True, text=True,
                          env=full, timeout=120)


@pytest.fixture
def api_any(ab: Any) -> Iterator[Api]:
    with start_api(ab) as a:
        yield a


def _error(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"]["code"] == code, body
    return str(body["error"]["message"])


# -- attachments ----------------------------------------------------------------------------------


def _upload(api: Api, task_id: str, data: bytes, start: threading.Barrier, statuses: list[int]) -> None:
    with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {api.admin}"}, timeout=60) as h:
        start.wait()
        r = h.post(f"/api/tasks/{task_id}/attachments", params={"name": "report.bin"}, content=data,
                   headers={"Content-Type": "application/octet-stream"})
        statuses.append(r.status_code)


def test_concurrent_uploads_of_the_same_attachment_name_never_mix_their_bytes(api_any: Api) -> None:
    api = api_any
    c = api.as_admin
    for round_ in range(4):
        task = c.post("/api/tasks", json={"title": f"round {round_}"}).json()
        payloads = [bytes([65 + i]) * (256 * 1024 + i) for i in range(10)]
        statuses: list[int] = []
        start = threading.Barrier(len(payloads))
        threads = [threading.Thread(target=_upload, args=(api, task["id"], p, start, statuses))
                   for p in payloads]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(set(statuses)) in ([201], [201, 409]), statuses
        assert statuses.count(201) == 1
        listed = c.get(f"/api/tasks/{task['id']}/attachments").json()
        assert len(listed) == 1
        for att in listed:
            r = c.get(f"/api/tasks/{task['id']}/attachments/{att['id']}")
            assert r.status_code == 200, r.text
            assert hashlib.sha256(r.content).hexdigest() == att["sha256"]
            assert r.content in payloads
        folder = Path(listed[0]["path"]).parent
        assert [p.name for p in folder.iterdir()] == ["report.bin"]


def test_attachment_names_with_control_or_bidi_characters_are_refused(api_any: Api) -> None:
    c = api_any.as_admin
    task = c.post("/api/tasks", json={"title": "files"}).json()
    for name in ("invoice\u202etxt.exe", "a\x07b.txt", "zero\u200bwidth.txt", "line\u2028break.txt",
                 "tab\there.txt"):
        r = c.post(f"/api/tasks/{task['id']}/attachments", params={"name": name}, content=b"x")
        assert "control and bidirectional-override" in _error(r, 400, "invalid_input"), name
    assert c.get(f"/api/tasks/{task['id']}/attachments").json() == []
    assert c.post(f"/api/tasks/{task['id']}/attachments", params={"name": "résumé.txt"},
                  content=b"x").status_code == 201


# -- configuration --------------------------------------------------------------------------------


def test_the_configuration_shows_no_credential_to_any_token(api_any: Api) -> None:
    api = api_any
    s = api.ab.settings
    s.llm_base_url = "https://bot:hunter1@llm.example/v1?api_key=hunter2&x=1"
    s.llm_api_key = "hunter3"
    s.llm_model = "m"
    if s.database_url is None:  # shown only: the server's database is already open
        s.database_url = "postgresql://ab:hunter4@db.example/ab?sslmode=require&password=hunter5"
    else:
        s.database_url = s.database_url.replace("://", "://postgres:hunter4@", 1) + "?password=hunter5"
    t = api.ab.board().create("job", assignee="x")
    run_id = int(runs.claim(api.db, "default", t["id"])["run_id"])
    callers = {
        "admin": api.admin,
        "member": api.token("m"),
        "viewer": api.token("v", role="viewer"),
        "run": tokens.create_run_token(api.db, "default", t["id"], run_id),
    }
    for role, tok in callers.items():
        r = api.client(tok).get("/api/config")
        assert r.status_code == 200, (role, r.text)
        assert "hunter" not in r.text, (role, r.text)
        shown = r.json()["settings"]
        if role == "run":  # a worker is not told where the database is at all
            assert "database_url" not in shown
        else:
            assert ":***@" in shown["database_url"] and "password=***" in shown["database_url"]
        assert shown["llm_base_url"] == "https://bot:***@llm.example/v1?api_key=***&x=1"
        assert shown["llm_api_key"] == "***"


@pytest.mark.postgres
def test_init_shows_no_credential_of_the_database_url(home: Path, pg_database: str) -> None:
    # trust authentication: the password is never checked, only shown
    url = pg_database.replace("postgresql://postgres@", "postgresql://postgres:hunter4@", 1)
    out = _cli(home, "init", "--json", env={"AGENTBOARD_DATABASE_URL": url + "?password=hunter5"})
    assert out.returncode == 0, out.stderr
    assert "hunter" not in out.stdout + out.stderr
    assert "postgres:***@" in json.loads(out.stdout)["database"]


# -- one schema for settings and profile fields ------------------------------------------------------


def test_a_board_admin_cannot_store_settings_the_dispatcher_cannot_read(api_any: Api) -> None:
    api = api_any
    api.ab.create_board("alpha")
    lead = api.client(api.token("lead", role="admin", boards=("alpha",)))
    for settings in ({"max_parallel": "abc"}, {"max_parallel": 0}, {"max_parallel": True},
                     {"failure_limit": -1}, {"default_assignee": "two words"}, {"workdir": "/etc"},
                     {"auto_decompose": "yes"}):
        msg = _error(lead.patch("/api/boards/alpha", json={"settings": settings}), 400, "invalid_input")
        assert next(iter(settings)) in msg, msg
    assert lead.get("/api/boards/alpha").json()["settings"] == {}
    ok = lead.patch("/api/boards/alpha", json={"settings": {"max_parallel": 2, "auto_decompose": True,
                                                            "note": "kept"}})
    assert ok.json()["settings"] == {"max_parallel": 2, "auto_decompose": True, "note": "kept"}
    admin = api.as_admin
    _error(admin.post("/api/boards", json={"slug": "bad", "settings": {"max_parallel": "x"}}), 400, "invalid_input")
    msg = _error(admin.post("/api/boards", json={"slug": "etc", "workdir": "/etc"}), 400, "invalid_input")
    assert "system" in msg
    assert [b["slug"] for b in admin.get("/api/boards").json()] == ["alpha", "default"]


def test_a_profile_env_name_the_shell_cannot_export_is_refused_everywhere(api_any: Api, home: Path) -> None:
    api = api_any
    admin = api.as_admin
    for body in ({"name": "p", "command": "run", "env": {"A=B": "1"}},
                 {"name": "p", "command": "run", "env": {"1ABC": "1"}},
                 {"name": "p", "command": "   "},
                 {"name": "p", "command": "run", "adapter": "bash"}):
        _error(admin.post("/api/profiles", json=body), 400, "invalid_input")
    assert admin.post("/api/profiles", json={"name": "p", "command": "run", "env": {"OK_1": "x"}}).status_code == 201
    _error(admin.patch("/api/profiles/p", json={"env": {"A B": "1"}}), 400, "invalid_input")
    assert admin.get("/api/profiles").json()[0]["env"] == {"OK_1": "x"}
    if api.db.dialect == "sqlite":
        for args in (["profiles", "add", "q", "--command", "run", "--env", "1ABC=x"],
                     ["profiles", "add", "q", "--command", " "],
                     ["profiles", "add", "q", "--command", "run", "--max-concurrency", "0"],
                     ["profiles", "set", "p", "--env", "BAD-NAME=1"]):
            out = _cli(home, *args)
            assert out.returncode == 2, (args, out.stdout, out.stderr)
            assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("error: ")
        assert [p["name"] for p in admin.get("/api/profiles").json()] == ["p"]


def test_config_toml_values_are_checked_like_board_settings(home: Path) -> None:
    agentboard.connect(str(home)).close()
    for line in ("max_parallel = 0", 'default_assignee = "two words"', "failure_limit = -3"):
        (home / "config.toml").write_text(line + "\n")
        out = _cli(home, "list")
        assert out.returncode == 2, (line, out.stdout, out.stderr)
        assert out.stderr.startswith("error: invalid setting ") and len(out.stderr.strip().splitlines()) == 1


def test_a_board_whose_stored_settings_are_bad_does_not_stop_the_other_boards(ab: Any, tmp_path: Path) -> None:
    ab.create_board("alpha")
    ab.add_profile("ok", command="sh -c " + shlex.quote(
        "echo '{\"success\": true, \"summary\": \"done\"}' > .board/result.json"))
    # as an older version may have stored it
    ab.db.write(lambda tx: tx.execute("UPDATE boards SET settings = :s WHERE slug = 'alpha'",
                                      {"s": json.dumps({"max_parallel": "abc"})}))
    ab.board("alpha").create("stuck behind bad settings", assignee="ok")
    t = ab.board().create("on a good board", assignee="ok")
    d = Dispatcher(ab.db, ab.settings)
    try:
        report = d.run_pass()
        assert report["skipped_boards"] == ["alpha"]
        assert any("alpha" in s["reason"] and "max_parallel" in s["reason"] for s in report["skipped"])
        assert [s["task"] for s in report["spawned"]] == [t["id"]]
        wait_for(lambda: d.run_pass() is not None and ab.board().show(t["id"])["status"] == "done",
                 timeout=60, what="the task done")
    finally:
        d.stop()


# -- process groups -------------------------------------------------------------------------------


def _leave_behind(ab: Any, script: str, pidfile: Path, launch: str = "shell") -> tuple[str, int]:
    """Run a task whose agent (``script``) leaves a process behind that writes its pid to
    ``pidfile``, until the run is over: the task's id and that process's pid. ``launch``: the
    profile's command is the shell itself (``shell``) or a program that starts it (``program``)."""
    command = "sh -c " + shlex.quote(script)
    if launch == "program":
        starter = f"import subprocess, sys; sys.exit(subprocess.call(['sh', '-c', {script!r}]))"
        command = f"{shlex.quote(sys.executable)} -c {shlex.quote(starter)}"
    ab.add_profile("leaver", command=command)
    t = ab.board().create("leave a process behind", assignee="leaver")
    d = Dispatcher(ab.db, ab.settings)
    try:
        d.run_pass()
        wait_for(lambda: d.run_pass() is not None and ab.board().show(t["id"])["status"] != "running",
                 timeout=60, what="the run over")
    finally:
        d.stop()
    assert ab.board().show(t["id"])["status"] == "done"
    return t["id"], int(pidfile.read_text())


def _kill_from(pidfile: Path) -> None:
    try:
        os.kill(int(pidfile.read_text()), 9)
    except (OSError, ValueError):
        pass


def test_a_workers_background_child_does_not_outlive_the_workers_exit(ab: Any, tmp_path: Path) -> None:
    late, pidfile = tmp_path / "late", tmp_path / "bg.pid"
    script = (f"sh -c 'sleep 30; echo late > {late}' & echo $! > {pidfile}; "
              "echo '{\"success\": true, \"summary\": \"left a child\"}' > .board/result.json")
    try:
        _, bg = _leave_behind(ab, script, pidfile)
        assert not liveness.pid_alive(bg)
        assert not late.exists()
    finally:
        _kill_from(pidfile)


@pytest.mark.parametrize("launch", ["shell", "program"])
@pytest.mark.parametrize("leave", ["setsid", "setpgid"])
def test_a_process_a_worker_takes_out_of_its_process_group_does_not_outlive_its_run(
        ab: Any, tmp_path: Path, leave: str, launch: str) -> None:
    cgroups = WorkerCgroups(Path(ab.settings.home), ab.settings.host_id or "test")
    if cgroups.probe() is None:
        pytest.skip(f"no cgroups for workers on this host: {cgroups.why}")
    late, pidfile = tmp_path / "late", tmp_path / "bg.pid"
    child = f"echo $$ > {pidfile}; sleep 30; echo late > {late}"
    regroup = (f"import os, time; os.setpgid(0, 0); open({str(pidfile)!r}, 'w').write(str(os.getpid())); "
               f"time.sleep(30); open({str(late)!r}, 'w').write('late')")  # a process group of its own
    start = (f"setsid sh -c {shlex.quote(child)} < /dev/null > /dev/null 2>&1 &" if leave == "setsid"
             else f"{shlex.quote(sys.executable)} -c {shlex.quote(regroup)} &")
    script = (f"{start} while [ ! -s {pidfile} ]; do sleep 0.01; done; "
              "echo '{\"success\": true, \"summary\": \"left a daemon\"}' > .board/result.json")
    try:
        task_id, bg = _leave_behind(ab, script, pidfile, launch)
        assert not liveness.pid_alive(bg), f"the {leave} process {bg} outlived its run"
        assert not late.exists()
        (ended,) = [e for e in ab.board().events(0, task_id=task_id) if e["kind"] == "leftovers_ended"]
        assert ended["payload"]["processes"] >= 1
    finally:
        _kill_from(pidfile)


def test_a_process_a_worker_detaches_ends_when_its_run_is_stopped_for_its_max_runtime(ab: Any, tmp_path: Path) -> None:
    """Stopped by the dispatcher (here: its max runtime), not exited: what the worker started
    outside its process group ends with the run, and the run's cgroup is removed."""
    cgroups = WorkerCgroups(Path(ab.settings.home), ab.settings.host_id or "test")
    if cgroups.probe() is None:
        pytest.skip(f"no cgroups for workers on this host: {cgroups.why}")
    pidfile = tmp_path / "bg.pid"
    child = f"echo $$ > {pidfile}; exec sleep 300"
    script = f"setsid sh -c {shlex.quote(child)} < /dev/null > /dev/null 2>&1 & sleep 300"
    ab.add_profile("slow", command="sh -c " + shlex.quote(script))
    t = ab.board().create("runs past its limit", assignee="slow", max_runtime="2s", max_retries=1)
    d = Dispatcher(ab.db, ab.settings)
    try:
        d.run_pass()
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the daemon started")
        bg = int(pidfile.read_text())
        wait_for(lambda: d.run_pass() is not None and ab.board().show(t["id"])["status"] != "running",
                 timeout=60, what="the run stopped at its max runtime")
        run_id = ab.board().show(t["id"])["runs"][-1]["id"]
        assert ab.board().show(t["id"])["runs"][-1]["outcome"] == "timed_out"
        wait_for(lambda: not liveness.pid_alive(bg), timeout=15, what=f"the detached process {bg} ended")
        assert not cgroups.folder(run_id).exists()
    finally:
        d.stop()
        _kill_from(pidfile)


# -- a full disk ----------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home on a 4 MiB tmpfs (needs root to mount)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.decode().strip()}")
    home = mnt / "home"
    monkeypatch.setenv("AGENTBOARD_HOME", str(home))
    monkeypatch.delenv("AGENTBOARD_DATABASE_URL", raising=False)
    try:
        yield home
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_answers_503_unavailable_and_the_cli_exits_6_leaving_no_temp_files(small_disk: Path) -> None:
    home = small_disk
    with agentboard.connect(str(home)) as ab, start_api(ab) as api:
        c = api.as_admin
        task = c.post("/api/tasks", json={"title": "before the disk filled"}).json()
        fill(home / "filler")
        body = "x" * 200_000
        answers = []
        for i in range(40):
            r = c.post("/api/tasks", json={"title": f"big {i}", "body": body})
            answers.append(r.status_code)
            if r.status_code == 503:
                assert r.json()["error"]["code"] == "unavailable"
                assert "disk is full" in r.json()["error"]["message"]
                break
        assert answers[-1] == 503 and set(answers) <= {201, 503}, answers
        r = c.post(f"/api/tasks/{task['id']}/attachments", params={"name": "big.bin"}, content=b"y" * 300_000)
        assert _error(r, 503, "unavailable")
        assert c.get(f"/api/tasks/{task['id']}/attachments").json() == []
        for _ in range(20):
            out = _cli(home, "create", "from the cli", "--body", body[:100_000])
            assert out.returncode in (0, 6), (out.stdout, out.stderr)
            if out.returncode == 6:
                break
        assert out.returncode == 6, (out.stdout, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 and "disk is full" in out.stderr
        assert c.get("/api/config").status_code == 200  # the server still answers
    leftovers = [p for p in home.rglob("*") if p.name.endswith((".tmp", ".upload")) or ".tmp" in p.name]
    assert leftovers == []


def test_gc_on_a_full_disk_reports_what_it_removed_before_saying_what_it_could_not_do(small_disk: Path) -> None:
    home = small_disk
    out = _cli(home, "create", "a task with events")
    assert out.returncode == 0, out.stderr
    logs = home / "boards" / "default" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    old = logs / "t_0badc0de.log"  # a purged task's log: it goes at once
    old.write_text("x")
    with agentboard.connect(str(home)) as ab:  # a dispatcher keeps the database open (its log files exist)
        for i in range(30):
            ab.board().archive(ab.board().create(f"task {i}")["id"])
        ab.db.write(lambda tx: tx.execute("UPDATE task_events SET created_at = 1000"))  # long past retention
        fill(home / "filler")
        out = _cli(home, "gc", "--event-retention-days", "0")
    assert out.returncode == 6, (out.stdout, out.stderr)
    assert "1 log(s)" in out.stdout and not old.exists()
    (line,) = out.stderr.strip().splitlines()
    assert "gc removed what is listed above, but not the old events" in line and "disk is full" in line


# -- sockets --------------------------------------------------------------------------------------


def _ws(api: Api, **params: Any) -> str:
    from urllib.parse import urlencode

    return api.url.replace("http://", "ws://") + "/api/events?" + urlencode(params)


def _closed_code(ws: Any) -> int:
    """The code the server closes ``ws`` with; a socket left open fails (TimeoutError), never hangs."""
    with pytest.raises(ConnectionClosed) as info:
        while True:
            ws.recv(timeout=30)
    assert info.value.rcvd is not None
    return info.value.rcvd.code


def test_a_socket_is_closed_promptly_when_its_token_is_revoked_or_its_run_closes(api_any: Api) -> None:
    api = api_any
    member = api.token("watcher")
    with connect(_ws(api, token=member)) as ws:
        json.loads(ws.recv(timeout=10))
        tokens.revoke(api.db, "watcher")
        assert _closed_code(ws) == 4401
    t = api.ab.board().create("job", assignee="x")
    run_id = int(runs.claim(api.db, "default", t["id"])["run_id"])
    with connect(_ws(api, token=tokens.create_run_token(api.db, "default", t["id"], run_id))) as ws:
        json.loads(ws.recv(timeout=10))
        runs.reclaim(api.db, "default", t["id"])
        assert _closed_code(ws) == 4401


def test_an_overflowing_since_cursor_is_invalid_input_not_a_crash(api_any: Api) -> None:
    for since in ("99999999999999999999999", "-1", "9" * 5000):
        with connect(_ws(api_any, token=api_any.admin, since=since)) as ws:
            with pytest.raises(ConnectionClosed) as info:
                ws.recv(timeout=10)
            assert info.value.rcvd is not None and info.value.rcvd.code == 4400, since
    with connect(_ws(api_any, token=api_any.admin)) as ws:  # the server is fine
        assert "cursor" in json.loads(ws.recv(timeout=10))


# -- cross-board answers --------------------------------------------------------------------------


def test_a_token_of_board_a_cannot_tell_a_task_on_board_b_from_one_that_does_not_exist(api_any: Api) -> None:
    api = api_any
    api.ab.create_board("b")
    hidden = api.ab.board("b").create("secret plans")
    scoped = api.client(api.token("a-only", boards=("default",)))
    missing = "t_00000000"
    for method, path, kw in [
        ("GET", "/api/tasks/{id}", {}),
        ("GET", "/api/tasks/{id}/attachments", {}),
        ("GET", "/api/tasks/{id}/log", {}),
        ("POST", "/api/tasks/{id}/comments", {"json": {"body": "x"}}),
        ("PATCH", "/api/tasks/{id}", {"json": {"priority": 1}}),
    ]:
        there = scoped.request(method, path.format(id=hidden["id"]), **kw)
        nowhere = scoped.request(method, path.format(id=missing), **kw)
        assert there.status_code == nowhere.status_code == 404, (path, there.text, nowhere.text)
        assert there.json()["error"]["message"].replace(hidden["id"], missing) == nowhere.json()["error"]["message"]


# -- file modes of a new home ---------------------------------------------------------------------


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_a_new_home_is_private_to_its_owner(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        by_init = tmp_path / "by-init"
        out = _cli(by_init, "init")
        assert out.returncode == 0, out.stderr
        with agentboard.connect(str(tmp_path / "by-open")) as ab:
            ab.board().create("a task")
            for home in (by_init, tmp_path / "by-open"):
                assert _mode(home) == 0o700, home
                files = [home / "agentboard.db", home / "agentboard.db-wal", home / "agentboard.db-shm"]
                assert files[0].exists()
                for f in files:
                    if f.exists():
                        assert _mode(f) == 0o600, f
    finally:
        os.umask(old)


def test_with_worker_cgroups_off_no_cgroup_is_made_and_the_reason_says_so(tmp_path: Path) -> None:
    off = WorkerCgroups(tmp_path / "home", "h", enabled=False)
    assert off.probe() is None and off.prepare(1) is None and off.runs() == []
    assert "worker_cgroups is off" in off.why
    assert not (tmp_path / "home" / "run").exists()
