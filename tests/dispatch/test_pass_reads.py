"""A pass costs the database what it has to do: one with workers running and nothing new reads its
snapshot and the ready queue, and writes nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentboard.store import engine


def _inbox(board: Any, task_id: str) -> str:
    path = Path(board.show(task_id)["workspace_path"]) / ".board" / "inbox.md"
    return path.read_text() if path.exists() else ""


def test_a_pass_with_workers_running_and_nothing_new_is_two_reads_and_no_write(
        ab: Any, board: Any, dispatcher: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ab.add_profile("w", command="sleep 30")
    ids = [board.create(f"task {i}", assignee="w")["id"] for i in range(3)]
    d = dispatcher(start=False, max_parallel=8)
    assert len(d.run_pass_report().spawned) == 3
    board.comment(ids[0], "a message for the worker", author="alice")
    d.run_pass_report()
    assert "a message for the worker" in _inbox(board, ids[0])
    calls: Counter[str] = Counter()
    depth = [0]
    for name in ("read", "read_pipelined", "write"):
        original = getattr(engine.Database, name)

        def counted(self: Any, fn: Any, *a: Any, _name: str = name, _original: Any = original, **k: Any) -> Any:
            if not depth[0]:  # a transaction, however the store runs it
                calls["write" if _name == "write" else "read"] += 1
            depth[0] += 1
            try:
                return _original(self, fn, *a, **k)
            finally:
                depth[0] -= 1
        monkeypatch.setattr(engine.Database, name, counted)
    assert not d.run_pass_report().spawned
    # the snapshot (its statements at once on PostgreSQL) and the ready queue: the schedules,
    # races, supervisors, budgets and inbox files read nothing more when they have nothing new
    assert calls == {"read": 2}, calls
    monkeypatch.undo()
    board.comment(ids[1], "another one", author="alice")
    d.run_pass_report()
    assert "another one" in _inbox(board, ids[1]) and "another one" not in _inbox(board, ids[0])
