"""Helpers for the supervisor's tests: a board supervised by the fake supervisor agent (a real
process acting through the CLI with its run token), and reads of the wakes."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from dispatch.conftest import RESULT_OK, dispatcher, events, wait_for  # noqa: F401  (fixture re-export)

from agentboard.kernel import boards as kboards
from agentboard.kernel import supervision

FAKES = Path(__file__).parent.parent / "fakes"
SUP = "sup"
ACTOR = f"supervisor:{SUP}"


def supervise(ab: Any, board: Any, plan: dict[str, Any] | None = None, **settings: Any) -> None:
    """Add the fake supervisor profile (acting as ``plan`` says) and make it the board's supervisor."""
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKES / 'fake_supervisor'))}"
    ab.add_profile(SUP, command=cmd, env={"FAKE_SUPERVISOR_PLAN": json.dumps(plan or {})})
    supervision.set_supervisor(ab.db, board.slug, SUP, actor="alice")
    if settings:
        set_board(ab, board, **settings)


def set_board(ab: Any, board: Any, **settings: Any) -> None:
    current = kboards.get(ab.db, board.slug)["settings"]
    kboards.update(ab.db, board.slug, settings={**current, **settings})


def wakes(ab: Any, board: Any, status: str | None = None) -> list[dict[str, Any]]:
    return supervision.wakes(ab.db, board.slug, status=status, limit=100000)


def supervision_tasks(ab: Any, board: Any) -> list[dict[str, Any]]:
    return ab.db.read(lambda tx: tx.all(
        "SELECT id, status, title FROM tasks WHERE board = :b AND purpose = 'supervision' ORDER BY created_at",
        {"b": board.slug}))


def spawns(log: Path) -> list[dict[str, Any]]:
    """The fake supervisor's starts, as it logged them."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def gated_worker(gate: Path) -> str:
    """A worker command that waits for ``gate`` to exist, then reports success."""
    return "sh -c " + shlex.quote(
        f"while [ ! -f {shlex.quote(str(gate))} ]; do sleep 0.05; done; "
        "echo '{\"success\": true, \"summary\": \"done\"}' > .board/result.json")


__all__ = ["ACTOR", "RESULT_OK", "SUP", "dispatcher", "events", "gated_worker", "set_board", "spawns", "supervise",
           "supervision_tasks", "wait_for", "wakes"]
