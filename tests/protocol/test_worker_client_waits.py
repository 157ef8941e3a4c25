"""A worker's calls of the board's API outlive a short absence of the board: a request that was
never sent (the API's port refuses it) or whose verb never reached the database (503 with
``Retry-After``) is sent again for a bounded time, saying so once; then the worker is told."""

from __future__ import annotations

import socket
import time

import pytest

from agentboard.domain.errors import Unavailable
from agentboard.remote import WorkerClient


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()  # nothing listens there now: a connection is refused at once
    return port


def test_an_api_that_refuses_connections_is_tried_for_a_while_then_reported() -> None:
    told: list[str] = []
    client = WorkerClient(f"http://127.0.0.1:{_closed_port()}", "abt_x", retry_for=1.5, on_retry=told.append)
    started = time.monotonic()
    with pytest.raises(Unavailable, match=r"cannot reach the board's API .* \(tried for 1.5s\)"):
        client.task_detail("t_00000000")
    assert 1.4 <= time.monotonic() - started < 10
    assert len(told) == 1 and "trying again for up to 1.5s" in told[0]
    client.close()


def test_without_a_wait_an_unreachable_api_is_reported_at_once() -> None:
    client = WorkerClient(f"http://127.0.0.1:{_closed_port()}", "abt_x", retry_for=0)
    started = time.monotonic()
    with pytest.raises(Unavailable, match="cannot reach the board's API"):
        client.task_detail("t_00000000")
    assert time.monotonic() - started < 5
    client.close()


def test_a_report_the_board_cannot_take_names_the_file_it_can_go_to() -> None:
    client = WorkerClient(f"http://127.0.0.1:{_closed_port()}", "abt_x", retry_for=0)
    with pytest.raises(Unavailable, match=r"cannot reach the board's API .*\.board/result\.json"):
        client.complete("t_00000000", run_id=1, summary="done")
    client.close()
