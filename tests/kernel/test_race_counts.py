"""What a race counts, on both backends: insights count the attempts that ran (a race archived
before its attempts ran entered nobody), and the board's task counts (`agentboard stats`,
`boards show`) count the race once, never its attempts' own tasks."""

from __future__ import annotations

from typing import Any

from agentboard.kernel import insights, queries, races


def _groups(board: Any, by: str, since: str | None = None) -> dict[str, dict[str, Any]]:
    out = insights.read(board.db, board.slug, insights.Query.build(by, since))
    return {g["key"]: g for g in out["groups"]}


def _race_done(board: Any, entries: str, winner: int) -> str:
    """A race whose attempts all ran and finished, attempt ``winner`` picked."""
    tid = board.create("race", race=entries.split(","))["id"]
    races.settle(board.db, board.slug)
    for a in races.attempts(board.db, board.slug, tid)["attempts"]:
        at = a["attempt_task_id"]
        board.complete(at, run_id=board.claim(at)["run_id"], usage={"cost_usd": 0.1})
    races.settle(board.db, board.slug)
    races.pick(board.db, board.slug, tid, winner)
    assert board.show(tid)["status"] == "done"
    return tid


def test_a_race_archived_before_its_attempts_ran_is_entered_by_nobody_in_all_time_as_in_a_day(
        board: Any, ab: Any) -> None:
    ab.add_profile("alpha", command="true", model_name="m-a")
    ab.add_profile("beta", command="true")
    _race_done(board, "alpha,beta", 1)
    # archived before it started: its attempts were never made
    never = board.create("never started", race=["alpha", "beta", "alpha:m-x"])["id"]
    board.archive(never)
    # started (its attempts' tasks made), archived before any attempt ran
    unrun = board.create("started, never ran", race=["alpha", "beta"])["id"]
    races.settle(board.db, board.slug)
    assert all(a["attempt_task_id"] for a in races.attempts(board.db, board.slug, unrun)["attempts"])
    board.archive(unrun)
    races.settle(board.db, board.slug)
    assert {a["state"] for a in races.attempts(board.db, board.slug, never)["attempts"]} == {"cancelled"}

    for since in (None, "1d"):
        g = _groups(board, "profile", since)
        assert (g["alpha"]["races_entered"], g["alpha"]["races_won"]) == (1, 1), since
        assert (g["beta"]["races_entered"], g["beta"]["races_won"]) == (1, 0), since
        models = _groups(board, "model", since)
        assert "m-x" not in models, since  # only the never-started race had an attempt on m-x
        assert (models["m-a"]["races_entered"], models["m-a"]["races_won"]) == (1, 1), since
        assert (models[""]["races_entered"], models[""]["races_won"]) == (1, 0), since


def test_stats_and_the_board_view_count_a_race_once_and_none_of_its_attempts(board: Any, ab: Any) -> None:
    ab.add_profile("alpha", command="true")
    ab.add_profile("beta", command="true")
    plain = board.create("plain", assignee="alpha")["id"]
    board.complete(plain, run_id=board.claim(plain)["run_id"])
    _race_done(board, "alpha,beta", 2)
    running = board.create("running race", race=["alpha", "beta"])["id"]
    races.settle(board.db, board.slug)
    board.create("waiting", assignee="beta")

    stats = queries.stats(board.db, board.slug)
    by_status = {s: n for s, n in stats["by_status"].items() if n}
    # the plain task and the race are done; the race under way runs; its attempts are not tasks
    assert by_status == {"done": 2, "running": 1, "ready": 1}
    assert stats["total"] == 4
    assert stats["by_assignee"] == {"alpha": {"done": 2, "running": 1}, "beta": {"ready": 1}}
    # the attempts' runs are runs of the board all the same
    assert stats["runs"] == 3
    view = queries.board_view(board.db, board.slug)
    assert {c["status"]: c["count"] for c in view["columns"] if c["count"]} == by_status
    assert board.show(running)["status"] == "running"
