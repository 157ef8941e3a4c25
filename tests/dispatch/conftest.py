"""Helpers for dispatcher tests: a started dispatcher, waiting on the board, shell workers."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from testenv import wait_for as wait_for

FAKES = Path(__file__).parent.parent / "fakes"

# a worker that reports by writing .board/result.json (no agentboard process needed)
RESULT_OK = "sh -c " + shlex.quote(
    "echo '{\"success\": true, \"summary\": \"did {task_id}\"}' > .board/result.json"
)


def statuses(board: Any, ids: list[str]) -> dict[str, str]:
    rows = {t["id"]: t["status"] for t in board.list(limit=100000)}
    return {i: rows.get(i, "?") for i in ids}


def all_in(board: Any, ids: list[str], wanted: set[str]) -> bool:
    return all(s in wanted for s in statuses(board, ids).values())


def events(board: Any, task_id: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
    out = [e for e in board.events(0, limit=100000)]
    if task_id:
        out = [e for e in out if e["task_id"] == task_id]
    if kind:
        out = [e for e in out if e["kind"] == kind]
    return out


def open_runs(db: Any) -> int:
    return int(db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM task_runs WHERE status = 'open'")))


def completed_runs(db: Any, task_id: str) -> int:
    return int(db.read(lambda tx: tx.scalar(
        "SELECT COUNT(*) FROM task_runs WHERE task_id = :t AND outcome = 'completed'", {"t": task_id})))


def dump(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


@pytest.fixture
def dispatcher(ab: Any) -> Iterator[Callable[..., Any]]:
    """Factory for started dispatchers on the test's home, each handing its workers the API it
    serves (as `agentboard dispatcher` does); all are stopped at the end."""
    from agentboard.api.serve import WorkerAPI, run_tokens
    from agentboard.dispatch.dispatcher import Dispatcher

    made: list[Any] = []
    apis: list[Any] = []

    def make(start: bool = True, **overrides: Any) -> Any:
        s = ab.settings
        s.spawn_grace = overrides.pop("spawn_grace", 0.5)
        for k, v in overrides.items():
            setattr(s, k, v)
        api = WorkerAPI(s, ab.db).start()
        apis.append(api)
        d = Dispatcher(ab.db, s, api_url=api.url, token_factory=run_tokens(ab.db))
        made.append(d)
        if start:
            d.start()
        return d

    yield make
    for d in made:
        d.stop()
        # a test that failed before releasing its workers leaves none behind (a stopped
        # dispatcher leaves its workers running, as a restart re-adopts them)
        for w in d.ctx.workers.all():
            with contextlib.suppress(OSError):
                os.killpg(w.pid, signal.SIGKILL)
    for api in apis:
        api.stop()
