"""The supervisor's own tasks are not the board's work: `stats` and the insights leave them out
of the tasks done (their runs still count as runs and spend)."""

from __future__ import annotations

from typing import Any

from agentboard.kernel import insights, queries, runs, supervision

from .conftest import supervise


def test_a_done_supervision_task_is_no_task_done_of_the_board(ab: Any, board: Any) -> None:
    supervise(ab, board)
    ab.add_profile("w", command="true")
    work = board.create("real work", assignee="w")["id"]
    run = runs.claim(ab.db, board.slug, work)
    board.complete(work, summary="done", run_id=run["run_id"])
    stuck = board.create("stuck", assignee="w")["id"]
    board.block(stuck, "waits for a person", actor="alice")
    (sup,) = supervision.take_due(ab.db, board.slug)["tasks"]
    srun = runs.claim(ab.db, board.slug, sup["id"])
    board.complete(sup["id"], summary="looked at it", run_id=srun["run_id"],
                   usage={"input_tokens": 10, "output_tokens": 1, "cost_usd": 0.05})

    stats = queries.stats(ab.db, board.slug)
    assert stats["by_status"]["done"] == 1 and stats["total"] == 2
    assert stats["runs"] == 2 and stats["cost_usd"] == 0.05  # its run is spend all the same
    insights.fold(ab.db)
    day = insights.read(ab.db, board.slug, insights.Query.build("board", "1d"))["timeline"]
    assert day["tasks_done"] == 1
    insights.rebuild(ab.db, board.slug)  # older numbers recomputed the same way
    assert insights.read(ab.db, board.slug, insights.Query.build("board", "1d"))["timeline"]["tasks_done"] == 1
