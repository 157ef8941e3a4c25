"""Connection handling for many hosts: a server that does not answer and an exhausted pool give
a clear error instead of a hang, and one stuck session cannot stall the other writers."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agentboard.config import Settings
from agentboard.domain.errors import Unavailable
from agentboard.kernel import queries, runs, tasks
from agentboard.store import Tx, open_database

FORK = mp.get_context("fork")


@pytest.fixture
def silent_server() -> object:
    """A TCP port that accepts connections and never answers (a server that hangs)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock.getsockname()[1]
    sock.close()


def test_a_server_that_does_not_answer_fails_the_cli_with_a_one_line_error(silent_server: int, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    env.update(AGENTBOARD_HOME=str(tmp_path), AGENTBOARD_PG_CONNECT_TIMEOUT="1",
               AGENTBOARD_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{silent_server}/x?sslmode=disable")
    out = subprocess.run([sys.executable, "-m", "agentboard", "list"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == Unavailable.exit_code
    assert out.stderr.startswith("error: cannot open the database") and "timeout" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_server_that_refuses_connections_fails_the_cli_with_one_line(tmp_path: Path) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there: libpq's refusal runs over two lines
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    env.update(AGENTBOARD_HOME=str(tmp_path), AGENTBOARD_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{port}/x")
    out = subprocess.run([sys.executable, "-m", "agentboard", "list"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == Unavailable.exit_code
    assert out.stderr.startswith("error: cannot open the database") and "refused" in out.stderr
    assert out.stderr.count("\n") == 1, out.stderr


def test_an_exhausted_pool_fails_with_a_clear_error_instead_of_waiting(pg_url: str, tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, pg_pool_size=1, pg_max_overflow=0, pg_pool_timeout=0.5)
    db = open_database(pg_url, settings=settings)
    holding, release = threading.Event(), threading.Event()

    def hold(tx: Tx) -> None:
        tx.event("default", None, "probe", {})
        holding.set()
        release.wait(60)

    th = threading.Thread(target=lambda: db.write(hold))
    th.start()
    try:
        assert holding.wait(30)
        with pytest.raises(Unavailable, match="all 1 database connections of this process stayed busy"):
            queries.last_event_id(db)
    finally:
        release.set()
        th.join(30)
    assert queries.last_event_id(db) > 0  # the connection is back: the next call works
    db.close()


def test_kernel_sessions_carry_the_statement_and_lock_timeouts(pg_url: str, tmp_path: Path) -> None:
    db = open_database(pg_url, settings=Settings(home=tmp_path, pg_statement_timeout=7, pg_lock_timeout=2.5,
                                                 pg_idle_timeout=40))
    shown = db.read(lambda tx: tx.one(
        "SELECT current_setting('statement_timeout') AS st, current_setting('lock_timeout') AS lt, "
        "current_setting('idle_in_transaction_session_timeout') AS it"))
    assert shown == {"st": "7s", "lt": "2500ms", "it": "40s"}
    db.close()


def _stuck_claimer(url: str, home: str, task_id: str) -> None:
    """Claims the task and then stops dead inside the transaction, its row lock held."""
    db = open_database(url, settings=Settings(home=Path(home), pg_idle_timeout=1))

    def claim_and_freeze(tx: Tx) -> None:
        runs.claim_in(tx, "default", task_id, host="frozen")
        tx.rowcount  # noqa: B018 - make sure the claim reached the server before freezing
        os.kill(os.getpid(), signal.SIGSTOP)

    db.write(claim_and_freeze)


def test_a_session_frozen_inside_a_transaction_does_not_stall_other_writers(pg_url: str, tmp_path: Path) -> None:
    db = open_database(pg_url, settings=Settings(home=tmp_path))
    t = tasks.create(db, "default", "contended", assignee="w")
    frozen = FORK.Process(target=_stuck_claimer, args=(pg_url, str(tmp_path), t["id"]))
    frozen.start()
    try:
        # the frozen process holds the task's row; its server session is ended by the idle
        # timeout, its claim rolled back, and this claim goes through
        def frozen_holds_the_row() -> bool:
            return bool(db.read(lambda tx: tx.scalar(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND state = 'idle in transaction'")))
        deadline = 60
        while not frozen_holds_the_row() and deadline > 0 and frozen.is_alive():
            deadline -= 0.05
            threading.Event().wait(0.05)
        out = runs.claim(db, "default", t["id"], host="alive")
        assert out["claimed"]
        assert [r["worker_host"] for r in queries.runs(db, "default", t["id"])] == ["alive"]
    finally:
        frozen.kill()
        frozen.join(30)
    db.close()
