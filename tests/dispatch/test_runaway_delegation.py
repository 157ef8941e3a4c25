"""An orchestrator that hands its work to itself (an easy prompt mistake) does not grow a board
without end: its delegation stops at ``delegation_depth_limit``, and the worker's CLI says so with
exit code 4, as for every limit of a run."""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

from .conftest import all_in, wait_for


def test_an_orchestrator_delegating_to_itself_stops_at_the_depth_limit_and_its_cli_exits_4(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    codes = tmp_path / "codes"
    ab.add_profile("orch", orchestrator=True, command="sh -c " + shlex.quote(
        "for i in 1 2; do agentboard create \"child $i of $AGENTBOARD_TASK\" --assignee orch 2>>"
        f"{tmp_path}/errors; echo $? >> {codes}; done; agentboard complete --summary 'delegated'"))
    board.create("root", assignee="orch")
    dispatcher(delegation_depth_limit=2)
    # 1 + 2 + 4 tasks, then the runs of the 4 deepest are refused: 7 tasks, all done
    wait_for(lambda: len(codes.read_text().split()) >= 14 if codes.exists() else False, timeout=90,
             what="every run's creates answered")
    tasks = board.list(limit=1000)
    wait_for(lambda: all_in(board, [t["id"] for t in tasks], {"done"}), timeout=60, what="every task done")
    time.sleep(1)  # nothing more is created
    assert len(board.list(limit=1000)) == 7
    answered = codes.read_text().split()
    assert sorted(answered) == ["0"] * 6 + ["4"] * 8
    assert "delegation_depth_limit = 2" in (tmp_path / "errors").read_text()
