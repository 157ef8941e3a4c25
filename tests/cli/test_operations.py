"""Operator verbs: export / import / migrate-to, backup / restore."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from testenv import wait_for

from .conftest import Runner, assert_one_line_error, task_id

WRITER = r"""
import sys, agentboard
from agentboard.kernel import tasks
db = agentboard.connect(sys.argv[1]).db
n = 0
while True:
    t = tasks.create(db, "default", f"w{sys.argv[2]}-{n}", body="x" * 200)
    print(t["id"], flush=True)
    n += 1
"""


def test_export_and_import_through_the_cli_carry_a_task_and_its_comment(
        cli: Runner, cli_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tid = task_id(cli("create", "carry me", "--body", "b", "--json"))
    assert cli("comment", tid, "hello from before").code == 0
    dump = tmp_path / "d.jsonl"
    r = cli("export", "-o", str(dump))
    assert r.code == 0 and "exported" in r.err
    other = tmp_path / "other"
    monkeypatch.setenv("AGENTBOARD_HOME", str(other))
    r = cli("import", str(dump))
    assert r.code == 0 and "imported" in r.out, r.err
    shown = cli("show", tid, "--json").json()
    assert shown["title"] == "carry me"
    assert [c["body"] for c in shown["comments"]] == ["hello from before"]
    again = cli("import", str(dump), "--json").json()
    assert again["verification"]["ok"] is True


def test_an_incremental_export_goes_onto_the_copy_it_continues_and_is_refused_by_an_empty_home(
        cli: Runner, cli_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    old = task_id(cli("create", "copied in full", "--json"))
    full = tmp_path / "full.jsonl"
    assert cli("export", "-o", str(full)).code == 0
    since = time.time()
    time.sleep(0.05)
    new = task_id(cli("create", "made after the full copy", "--json"))
    assert cli("comment", old, "said after the full copy").code == 0
    inc = tmp_path / "inc.jsonl"
    assert cli("export", "--since", str(since), "-o", str(inc)).code == 0
    monkeypatch.setenv("AGENTBOARD_HOME", str(tmp_path / "copy"))
    assert cli("import", str(full)).code == 0
    r = cli("import", str(inc))
    assert r.code == 0, r.err
    assert cli("show", new, "--json").json()["title"] == "made after the full copy"
    assert [c["body"] for c in cli("show", old, "--json").json()["comments"]] == ["said after the full copy"]
    monkeypatch.setenv("AGENTBOARD_HOME", str(tmp_path / "empty"))
    r = cli("import", str(inc))
    assert r.code == 4 and f"rows about 1 task(s) this database does not hold (e.g. {old})" in r.err
    assert cli("list", "--json").json() == []


def test_import_of_something_else_is_one_line_and_writes_nothing(
        cli: Runner, tmp_path: Path, counts: object) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n')
    before = counts()  # type: ignore[operator]
    assert_one_line_error(cli("import", str(bad)), 2, "not an agentboard export")
    assert_one_line_error(cli("import", str(tmp_path / "missing.jsonl")), 2, "no file")
    assert counts() == before  # type: ignore[operator]


def test_a_bad_dump_on_standard_input_is_named_as_standard_input_not_a_temporary_file(
        cli: Runner, cli_home: Path, counts: object) -> None:
    before = counts()  # type: ignore[operator]
    r = cli("import", "-", input="not json at all\n")
    assert_one_line_error(r, 2, "standard input: line 1 is not JSON")
    assert ".import-" not in r.err
    assert counts() == before  # type: ignore[operator]


def test_migrate_to_refuses_while_a_dispatcher_holds_the_board(cli: Runner, cli_home: Path, tmp_path: Path) -> None:
    from agentboard.dispatch.planning import BoardLock

    lock = BoardLock(cli_home / "boards" / "default" / "dispatcher.lock")
    assert lock.acquire()
    try:
        target = tmp_path / "copy.db"
        assert_one_line_error(cli("migrate-to", f"sqlite:///{target}"), 4, "dispatcher is running", "default")
        assert not target.exists()
    finally:
        lock.release()
    r = cli("migrate-to", f"sqlite:///{target}", "--json")
    assert r.code == 0, r.err
    assert r.json()["verification"]["ok"] is True


@pytest.mark.postgres
def test_migrate_to_postgresql_verifies_every_table(cli: Runner, tmp_path: Path, pg_database: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [task_id(cli("create", f"task {n}", "--json")) for n in range(5)]
    cli("link", ids[0], ids[1])
    r = cli("migrate-to", pg_database)
    assert r.code == 0, r.err
    assert "verified: every table matches" in r.out
    monkeypatch.setenv("AGENTBOARD_DATABASE_URL", pg_database)
    listed = {t["id"] for t in cli("list", "--json").json()}
    assert listed == set(ids)


def test_a_backup_taken_while_four_processes_write_is_consistent(cli: Runner, cli_home: Path, tmp_path: Path) -> None:
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(cli_home), str(n)], stdout=subprocess.PIPE,
                                text=True, env={**os.environ}) for n in range(4)]
    acked: list[str] = []
    try:
        for w in writers:  # every writer has committed a few tasks before the backup starts
            assert w.stdout is not None
            for _ in range(5):
                line = w.stdout.readline()
                assert line, "a writer died"
                acked.append(line.strip())
        dest = tmp_path / "bk"
        r = cli("backup", str(dest), "--json")
        assert r.code == 0, r.err
        info = r.json()
    finally:
        for w in writers:
            w.terminate()
        for w in writers:
            w.wait(timeout=60)
    assert info["integrity"] == "ok"
    with sqlite3.connect(dest / "agentboard.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        present = {row[0] for row in conn.execute("SELECT id FROM tasks")}
        events = {row[0] for row in conn.execute("SELECT task_id FROM task_events WHERE kind = 'created'")}
    assert set(acked) <= present
    assert present == events  # no task without its creation event: one snapshot
    assert info["tasks"] == len(present) >= 20


def test_restore_refuses_a_live_home_without_force_and_brings_the_backup_back(
        cli: Runner, cli_home: Path, tmp_path: Path) -> None:
    kept = task_id(cli("create", "in the backup", "--json"))
    (tmp_path / "f.txt").write_text("attached")
    assert cli("attach", kept, str(tmp_path / "f.txt")).code == 0
    dest = tmp_path / "bk"
    assert cli("backup", str(dest)).code == 0
    later = task_id(cli("create", "after the backup", "--json"))
    assert_one_line_error(cli("restore", str(dest)), 4, "live home", "--force")
    assert {t["id"] for t in cli("list", "--json").json()} == {kept, later}
    r = cli("restore", str(dest), "--force")
    assert r.code == 0, r.err
    assert {t["id"] for t in cli("list", "--json").json()} == {kept}
    assert list((cli_home / "backups").glob("pre-restore-*/agentboard.db"))
    # restore of task ids still works
    cli("archive", kept)
    assert cli("restore", kept).out.strip() == f"{kept}: todo"


def test_a_backup_restored_into_a_new_home_finds_its_attachments(
        cli: Runner, cli_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tid = task_id(cli("create", "with a file", "--json"))
    (tmp_path / "f.txt").write_text("attached")
    cli("attach", tid, str(tmp_path / "f.txt"))
    dest = tmp_path / "bk"
    assert cli("backup", str(dest)).code == 0
    other = tmp_path / "newhome"
    monkeypatch.setenv("AGENTBOARD_HOME", str(other))
    assert cli("restore", str(dest)).code == 0
    att = cli("attachments", tid, "--json").json()[0]
    assert att["path"].startswith(str(other)) and Path(att["path"]).read_text() == "attached"


def test_a_restore_says_the_backups_settings_were_left_for_the_operator_to_take(
        cli: Runner, cli_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (cli_home / "config.toml").write_text("failure_limit = 3\n")
    task_id(cli("create", "kept", "--json"))
    dest = tmp_path / "bk"
    assert cli("backup", str(dest)).code == 0 and (dest / "config.toml").is_file()
    other = tmp_path / "newhome"
    monkeypatch.setenv("AGENTBOARD_HOME", str(other))
    r = cli("restore", str(dest))
    assert r.code == 0, r.err
    assert not (other / "config.toml").exists()  # a backup's settings are never taken silently
    assert f"note: the backup's settings were not restored; to use them: cp {dest / 'config.toml'}" in r.err
    assert cli("restore", str(dest), "--force", "--json").json()["config_left"] == str(dest / "config.toml")


def test_backup_of_a_postgresql_home_says_to_use_pg_dump(cli: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBOARD_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    assert_one_line_error(cli("backup"), 2, "pg_dump")


def test_export_since_a_duration(cli: Runner, tmp_path: Path) -> None:
    task_id(cli("create", "old", "--json"))
    out = tmp_path / "d.jsonl"
    assert cli("export", "--since", "1d", "-o", str(out)).code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[-1]["tables"]["tasks"]["rows"] == 1
    assert_one_line_error(cli("export", "--since", "yesterday"), 2, "invalid time")


def test_archive_purge_refuses_running_work_then_force_stops_its_worker(cli: Runner, cli_home: Path) -> None:
    import agentboard
    from agentboard.config import load
    from agentboard.kernel import runs

    tid = task_id(cli("create", "busy", "--assignee", "worker", "--json"))
    worker = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        with agentboard.connect(str(cli_home)) as ab:
            run = runs.claim(ab.db, "default", tid)
            runs.record_spawn(ab.db, "default", tid, run["run_id"], pid=worker.pid, host=load().host_id)
        assert_one_line_error(cli("archive", tid, "--purge"), 4, "is running", "--force")
        assert cli("show", tid, "--json").json()["status"] == "running"
        r = cli("archive", tid, "--purge", "--force", "--json")
        assert r.code == 0, r.err
        assert r.json()["worker_stopped"] is True
        assert worker.wait(timeout=30) is not None
    finally:
        if worker.poll() is None:
            worker.kill()
    assert_one_line_error(cli("show", tid), 3, tid)


def test_attach_rm_removes_an_attachment(cli: Runner, tmp_path: Path) -> None:
    tid = task_id(cli("create", "files", "--json"))
    (tmp_path / "a.txt").write_text("a")
    cli("attach", tid, str(tmp_path / "a.txt"))
    r = cli("attach-rm", tid, "a.txt")
    assert r.code == 0 and "removed attachment a.txt" in r.out
    assert cli("attachments", tid, "--json").json() == []
    assert_one_line_error(cli("attach-rm", tid, "a.txt"), 3, "no attachment")


def test_template_run_from_the_cli_creates_linked_tasks(cli: Runner, cli_home: Path) -> None:
    folder = cli_home / "templates"
    folder.mkdir()
    (folder / "triage.toml").write_text('[[task]]\nkey = "look"\ntitle = "Look at {day}"\nassignee = "coder"\n'
                                        '[[task]]\ntitle = "Sum up {day}"\nparents = ["look"]\nassignee = "coder"\n')
    listed = cli("template", "list").out
    assert "triage" in listed and "day" in listed
    assert "[look] Look at {day}" in cli("template", "show", "triage").out
    assert_one_line_error(cli("template", "run", "triage"), 2, "--set day=")
    r = cli("template", "run", "triage", "--set", "day=monday", "--json")
    assert r.code == 0, r.err
    first, second = r.json()["tasks"]
    assert (first["status"], second["status"]) == ("ready", "todo")
    assert [p["id"] for p in cli("show", second["id"], "--json").json()["parents"]] == [first["id"]]


def test_schedule_verbs_and_create_not_before(cli: Runner, cli_home: Path) -> None:
    src = task_id(cli("create", "weekly report", "--assignee", "writer", "--json"))
    r = cli("schedule", "add", "0 9 * * 1", "--clone", src)
    assert r.code == 0 and "(UTC); next" in r.out, r.err
    listed = cli("schedule", "list", "--json").json()
    assert listed[0]["cron"] == "0 9 * * 1" and listed[0]["missed"] == "skip"
    assert cli("schedule", "fire").out.strip() == "nothing due"
    assert_one_line_error(cli("schedule", "add", "0 9 * * 1"), 2, "--template", "--clone")
    assert_one_line_error(cli("schedule", "add", "99 9 * * 1", "--clone", src), 2, "outside")
    assert cli("schedule", "rm", str(listed[0]["id"])).code == 0
    assert cli("schedule", "list", "--json").json() == []
    waiting = cli("create", "later", "--assignee", "writer", "--not-before", "2h", "--json").json()
    assert waiting["status"] == "todo"
    assert_one_line_error(cli("create", "bad", "--not-before", "soonish"), 2, "invalid time")


@pytest.mark.postgres
def test_migrate_to_from_postgresql_refuses_while_a_dispatcher_listens(
        cli: Runner, tmp_path: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBOARD_DATABASE_URL", pg_database)
    task_id(cli("create", "on postgres", "--json"))
    env = {**os.environ, "AGENTBOARD_DATABASE_URL": pg_database, "AGENTBOARD_DISPATCH_INTERVAL": "0.5"}
    proc = subprocess.Popen([sys.executable, "-m", "agentboard", "dispatcher", "--quiet"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = tmp_path / "back.db"
    try:
        import agentboard
        from agentboard.kernel import transfer

        with agentboard.connect(pg_database) as ab:
            wait_for(lambda: transfer.other_processes(ab.db), timeout=60, what="the dispatcher connected")
        assert_one_line_error(cli("migrate-to", f"sqlite:///{target}"), 4, f"pid {proc.pid} on")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    r = cli("migrate-to", f"sqlite:///{target}", "--json")
    assert r.code == 0, r.err
    assert r.json()["verification"]["ok"] is True


def _with_password(url: str, password: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(password=password).render_as_string(hide_password=False)


@pytest.mark.postgres
def test_migrate_to_a_url_with_a_password_never_prints_it_and_says_to_keep_it_in_the_environment_file(
        cli: Runner, cli_home: Path, pg_database: str) -> None:
    tid = task_id(cli("create", "moved", "--json"))
    secret = _with_password(pg_database, "s3cret-Pw")  # the test server trusts: any password opens it
    r = cli("migrate-to", secret)
    assert r.code == 0, r.err
    assert "s3cret-Pw" not in r.out + r.err
    last = r.lines()[-1]
    assert ":***@" in last and "/etc/agentboard/env" in last and "config.toml" not in last, last
    j = cli("migrate-to", secret, "--json")
    assert j.code == 0 and "s3cret-Pw" not in j.out + j.err
    import agentboard

    with agentboard.connect(pg_database) as ab:
        assert ab.board().show(tid)["title"] == "moved"


def test_a_password_with_an_unescaped_at_sign_is_refused_in_one_line_without_any_of_it(
        cli: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBOARD_DATABASE_URL", "postgresql://agentboard:se@cret-tail@127.0.0.1:5432/board")
    r = cli("list")
    assert_one_line_error(r, 2, "%40", "postgresql://agentboard:***@127.0.0.1:5432/board")
    assert "se@" not in r.err and "cret-tail" not in r.err
    r = cli("migrate-to", "postgresql://agentboard:se@cret-tail@127.0.0.1:5432/other")
    assert r.code == 2 and "cret-tail" not in r.err + r.out


@pytest.mark.postgres
def test_migrate_to_from_postgresql_refuses_while_serve_without_a_dispatcher_uses_it(
        cli: Runner, tmp_path: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import re
    import signal

    import httpx

    monkeypatch.setenv("AGENTBOARD_DATABASE_URL", pg_database)
    task_id(cli("create", "on postgres", "--json"))
    env = {**os.environ, "AGENTBOARD_DATABASE_URL": pg_database, "AGENTBOARD_HOME": str(tmp_path / "api")}
    serve = subprocess.Popen([sys.executable, "-m", "agentboard", "serve", "--port", "0", "--no-dispatch"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    target = tmp_path / "back.db"
    try:
        assert serve.stdout is not None
        login = None
        while login is None:
            line = serve.stdout.readline()
            assert line, "serve printed no login URL"
            login = re.search(r"(http://\S+)/login\?token=(\S+)", line)
        api, token = login.group(1), login.group(2)
        made = httpx.post(api + "/api/tasks", json={"title": "written through the API"},
                          headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert made.status_code in (200, 201), made.text
        r = cli("migrate-to", f"sqlite:///{target}")
        assert_one_line_error(r, 4, f"pid {serve.pid} on", "agentboard serve")
        assert not target.exists()
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
    r = cli("migrate-to", f"sqlite:///{target}", "--json")
    assert r.code == 0, r.err
    assert r.json()["verification"]["ok"] is True
