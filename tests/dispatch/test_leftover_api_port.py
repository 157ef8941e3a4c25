"""A dispatcher of a release that did not record its workers' API port (no
``run/worker-api.port``) left workers running: the next dispatcher serves the port they were told
to report to, so their reports reach it; a worker's port taken by another program meanwhile, or a
port recorded, is used as before."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentboard.api.serve import WORKER_PORT_FILE, bind_worker_port, leftover_api_ports
from agentboard.dispatch import guard


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def leftover(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A home whose worker file lists a live worker told to report to a port of its own."""
    home, port = tmp_path / "home", _free_port()
    env = {**os.environ, "AGENTBOARD_API_URL": f"http://127.0.0.1:{port}", "AGENTBOARD_RUN_ID": "7"}
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        guard.WorkerFile(guard.worker_file(home, "old-host")).started(7, worker.pid, time.time())
        yield home, port
    finally:
        worker.kill()
        worker.wait()


def test_the_workers_of_a_release_that_recorded_no_port_get_their_port_served(leftover: tuple[Path, int]) -> None:
    home, port = leftover
    assert leftover_api_ports(home) == [port]
    sock = bind_worker_port(home)
    try:
        assert sock.getsockname()[1] == port
        assert (home / WORKER_PORT_FILE).read_text(encoding="ascii") == str(port), "remembered for the next"
    finally:
        sock.close()


def test_a_recorded_port_wins_and_a_taken_one_gives_way_to_a_new_port(leftover: tuple[Path, int]) -> None:
    home, port = leftover
    recorded = _free_port()
    (home / WORKER_PORT_FILE).write_text(str(recorded), encoding="ascii")
    sock = bind_worker_port(home)
    assert sock.getsockname()[1] == recorded
    sock.close()
    (home / WORKER_PORT_FILE).unlink()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        sock = bind_worker_port(home)
        try:
            assert sock.getsockname()[1] not in (port, 0)
        finally:
            sock.close()
