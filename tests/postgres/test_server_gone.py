"""A dispatcher whose database server goes away for a while (a restart, a failover, a maintenance
window that refuses connections) says so in one line per failed pass, keeps trying, and goes on
once the server is back, on new connections."""

from __future__ import annotations

import logging
import shlex
import time
from pathlib import Path

import psycopg
import pytest

from agentboard.dispatch.dispatcher import Dispatcher
from agentboard.kernel import queries, tasks


def _admin(pg_url: str) -> tuple[psycopg.Connection[object], str]:
    url = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
    name = url.rsplit("/", 1)[1].split("?", 1)[0]
    return psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True), name


def test_a_dispatcher_outlives_its_server_refusing_connections(pg_url: str, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    import agentboard

    ab = agentboard.connect(pg_url)
    ab.settings.home = tmp_path
    ab.add_profile("w", command="sh -c " + shlex.quote(
        "echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json"))
    db = ab.db
    d = Dispatcher(db, ab.settings)
    d.start()
    admin, name = _admin(pg_url)
    try:
        assert d.wait_idle(30)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="agentboard"):
            # what a server shutting down does: new sessions refused, the open ones ended
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            admin.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                          "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not any(
                    r.getMessage().startswith("dispatcher pass failed") for r in caplog.records):
                d.wake()
                time.sleep(0.2)
            tried = d.passes
            # while it lasts, woken five times a second: a few tries (pauses of 1, 2, 4 s), one line
            for _ in range(25):
                d.wake()
                time.sleep(0.2)
            assert d.passes - tried <= 4
            failed = [r for r in caplog.records if r.getMessage().startswith("dispatcher pass failed")]
            assert len(failed) == 1, [r.getMessage() for r in caplog.records]
            # one line that says what is wrong and what happens next; no traceback
            assert all(r.levelno == logging.WARNING and r.exc_info is None for r in failed)
            text = failed[-1].getMessage()
            assert "\n" not in text and "trying again" in text
            # a pass in flight when its session ended, or one that found the server refusing
            assert "lost the connection to the database server" in text or "cannot open the database" in text
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            made = tasks.create(db, "default", "after the server came back", assignee="w")
            caplog.clear()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and queries.task_detail(db, "default", made["id"])["status"] != "done":
                d.wake()
                time.sleep(0.2)
        # the task made once the server was back was started and finished by the same dispatcher
        assert queries.task_detail(db, "default", made["id"])["status"] == "done"
        assert not [r for r in caplog.records if r.getMessage().startswith("dispatcher pass failed")]
        assert [r for r in caplog.records if r.getMessage().startswith("dispatcher pass works again")]
    finally:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        admin.close()
        d.stop()
        ab.close()


def test_a_workers_report_waits_for_the_server_and_is_applied_once_it_is_back(pg_url: str, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    import threading

    import agentboard
    from agentboard.api.serve import WorkerAPI, run_tokens
    from agentboard.kernel import runs

    ab = agentboard.connect(pg_url)
    ab.settings.home = tmp_path
    ab.add_profile("w", command="true")
    made = tasks.create(ab.db, "default", "report across a restart", assignee="w")
    run = runs.claim(ab.db, "default", made["id"])
    api = WorkerAPI(ab.settings, ab.db).start()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "AGENTBOARD_API_URL": api.url,
           "AGENTBOARD_TOKEN": run_tokens(ab.db)("default", made["id"], run["run_id"]),
           "AGENTBOARD_TASK": made["id"], "AGENTBOARD_RUN_ID": str(run["run_id"]), "AGENTBOARD_BOARD": "default"}
    admin, name = _admin(pg_url)
    try:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        admin.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                      "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
        back = threading.Timer(2.0, lambda: admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        back.start()
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "agentboard", "complete", "--summary", "ported"],
                              env=env, capture_output=True, text=True, timeout=60)
        back.join()
        # it waited for the server (and said so once), then its report was applied
        assert done.returncode == 0, done.stderr
        assert time.monotonic() - started >= 1.5
        assert done.stderr.count("trying again for up to") == 1, done.stderr
        assert "cannot open the database" in done.stderr
        detail = queries.task_detail(ab.db, "default", made["id"])
        assert detail["status"] == "done"
        assert [(r["id"], r["summary"]) for r in detail["runs"]] == [(run["run_id"], "ported")]
    finally:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        admin.close()
        api.stop()
        ab.close()
