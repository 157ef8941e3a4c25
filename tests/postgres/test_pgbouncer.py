"""A dispatcher whose database URL is PgBouncer in transaction mode (``pg_transaction_pooler``):
no prepared statements and no startup options go through the pooler, and its wake-up ``LISTEN``
goes to the server itself (``pg_listen_url``). Needs the ``pgbouncer`` binary (scripts/test
installs it); skipped without it, except under CI."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testenv import wait_for

import agentboard

from .bouncer import free_port as _free_port
from .bouncer import pgbouncer as _pgbouncer

WORKER = "sh -c " + shlex.quote("echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json")


@pytest.fixture
def bouncer(pg_url: str) -> Iterator[str]:
    with _pgbouncer(pg_url, 2) as url:
        yield url


def test_a_dispatcher_through_pgbouncer_in_transaction_mode_runs_every_task_once_woken_by_each(
        pg_url: str, bouncer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentboard.api.serve import WorkerAPI, run_tokens
    from agentboard.dispatch.dispatcher import Dispatcher

    monkeypatch.setenv("AGENTBOARD_PG_TRANSACTION_POOLER", "true")
    monkeypatch.setenv("AGENTBOARD_PG_LISTEN_URL", pg_url)
    ab = agentboard.connect(bouncer)
    ab.settings.home = tmp_path
    assert ab.settings.pg_transaction_pooler
    ab.add_profile("w", command=WORKER)
    board = ab.board()
    s = ab.settings
    s.dispatch_interval = 3600  # only a notification starts a new task's pass
    s.max_parallel = 4
    api = WorkerAPI(s, ab.db).start()
    d = Dispatcher(ab.db, s, api_url=api.url, token_factory=run_tokens(ab.db))
    d.start()
    try:
        wait_for(lambda: d.passes >= 1, what="the first pass")
        ids = [board.create(f"t{i}", assignee="w")["id"] for i in range(12)]  # each statement many times
        wait_for(lambda: all(t["status"] == "done" for t in board.list(limit=100) if t["id"] in ids)
                 and len([t for t in board.list(limit=100) if t["id"] in ids]) == 12, what="every task done")
    finally:
        d.stop()
        api.stop()
    runs = ab.db.read(lambda tx: tx.all("SELECT task_id, outcome FROM task_runs"))
    ab.close()
    assert sorted(r["task_id"] for r in runs) == sorted(ids)
    assert {r["outcome"] for r in runs} == {"completed"}


def test_through_a_transaction_pooler_no_statement_is_prepared_on_a_server_session(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # statement names are unique in a process, not across processes: through a transaction-mode
    # pooler, a name this process prepared on one server session may be another process's
    # statement on the session its next transaction gets
    from agentboard.kernel import runs, tasks

    counts = []
    for pooled in ("false", "true"):
        monkeypatch.setenv("AGENTBOARD_PG_TRANSACTION_POOLER", pooled)
        ab = agentboard.connect(pg_url)
        try:
            for i in range(3):
                t = tasks.create(ab.db, "default", f"{pooled} {i}", assignee="w")["id"]
                runs.complete(ab.db, "default", t, run_id=runs.claim(ab.db, "default", t)["run_id"], summary="ok")
            with ab.db._raw() as conn:  # the one connection these verbs ran on, one after the other
                counts.append(conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0])
            assert [t["status"] for t in ab.board().list(limit=10) if t["title"].startswith(pooled)] == ["done"] * 3
        finally:
            ab.close()
    assert counts[0] > 0 and counts[1] == 0


#: one process's verbs through the pooler: ``argv[1]`` the URL, ``argv[2]`` its name; prints the
#: errors it met, one per line
_WRITER = """
import sys
import agentboard
from agentboard.kernel import runs, tasks
ab = agentboard.connect(sys.argv[1])
for i in range(120):
    try:
        t = tasks.create(ab.db, "default", f"{sys.argv[2]} {i}", assignee="w")["id"]
        if sys.argv[2] == "finisher":
            runs.complete(ab.db, "default", t, run_id=runs.claim(ab.db, "default", t)["run_id"], summary="ok")
    except Exception as exc:
        print(type(exc).__name__, exc)
ab.close()
"""


def test_two_processes_sharing_one_pooled_server_session_run_every_verb_without_an_error(
        pg_url: str, tmp_path: Path) -> None:
    import sys

    agentboard.connect(pg_url).close()  # the schema, before the pooler's sessions open
    env = {**os.environ, "AGENTBOARD_PG_TRANSACTION_POOLER": "true", "AGENTBOARD_HOME": str(tmp_path)}
    with _pgbouncer(pg_url, 1) as url:
        procs = [subprocess.Popen([sys.executable, "-c", _WRITER, url, name], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for name in ("creator", "finisher")]
        outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs == ["", ""], outs  # e.g. "DuplicatePreparedStatement prepared statement "ab_1" already exists"
    ab = agentboard.connect(pg_url)
    try:
        counts = ab.db.read(lambda tx: tx.all("SELECT status, COUNT(*) AS n FROM tasks GROUP BY status ORDER BY 1"))
    finally:
        ab.close()
    assert [(r["status"], r["n"]) for r in counts] == [("done", 120), ("ready", 120)]


def test_a_verb_the_pooler_cannot_give_a_server_session_is_refused_as_one_to_try_again(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server out of the pooler's reach (a restart): PgBouncer answers the transaction with
    ``query_wait_timeout`` or ``server login has been failing`` before anything ran. That is a
    verb to try again (``Unavailable`` with a retry-after: the API's 503 that a worker's report
    waits through), not a connection lost in the middle of a write; once the server is back in
    reach the same database object writes again."""
    import signal
    import time

    from sqlalchemy.engine import make_url

    from agentboard.domain.errors import Unavailable

    agentboard.connect(pg_url).close()
    monkeypatch.setenv("AGENTBOARD_PG_TRANSACTION_POOLER", "true")
    info: dict[str, Any] = {}
    with _pgbouncer(pg_url, 1, info) as url:
        ab = agentboard.connect(url)
        try:
            board = ab.board()
            board.create("before")  # the process's pooled connection to the pooler is open
            ini: Path = info["ini"]
            reachable = ini.read_text()
            live = f"port={make_url(pg_url).port or 5432}"
            ini.write_text(reachable.replace(live, f"port={_free_port()}", 1))  # nothing listens there
            info["proc"].send_signal(signal.SIGHUP)
            time.sleep(1.0)
            with pytest.raises(Unavailable) as refused:
                board.create("while the server is out of reach")
            assert refused.value.retry_after is not None, refused.value.message
            assert refused.value.message.startswith("cannot open the database: the connection pooler"), \
                refused.value.message
            ini.write_text(reachable)
            info["proc"].send_signal(signal.SIGHUP)
            wait_for(lambda: _writes(board), 60, "a write through the pooler once the server is back in reach")
            titles = {t["title"] for t in board.list(limit=100)}
            assert "before" in titles and "while the server is out of reach" not in titles
        finally:
            ab.close()


def _writes(board: Any) -> bool:
    from agentboard.domain.errors import Unavailable

    try:
        board.create("after")
        return True
    except Unavailable:
        return False


def test_a_dispatcher_behind_a_transaction_pooler_without_pg_listen_url_says_new_work_waits_for_its_interval(
        pg_url: str, bouncer: str, tmp_path: Path) -> None:
    import signal
    import sys
    import threading

    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    env.update(AGENTBOARD_HOME=str(tmp_path), AGENTBOARD_DATABASE_URL=bouncer, AGENTBOARD_HOST_ID="pooled",
               AGENTBOARD_PG_TRANSACTION_POOLER="true", AGENTBOARD_DISPATCH_INTERVAL="300")
    proc = subprocess.Popen([sys.executable, "-m", "agentboard", "dispatcher"], env=env, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines: list[str] = []
    assert proc.stderr is not None
    threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True).start()
    try:
        said = wait_for(lambda: next((line for line in list(lines) if "pg_listen_url" in line), None), 60,
                        "the dispatcher saying it cannot be woken")
        assert "wake-ups need pg_listen_url" in said and "AGENTBOARD_PG_LISTEN_URL" in said, said
        assert "300 s" in said  # new work waits for the interval pass: how long, in the operator's terms
        assert proc.poll() is None
        assert len([line for line in list(lines) if "pg_listen_url" in line]) == 1  # once, at its start
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
