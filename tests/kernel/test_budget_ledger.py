"""What a budget counts, on both backends: a run's spend is read from its own row of
``task_runs`` and the ledger holds what is not a run (LLM calls), so every reader — a budget set
later summing its window, the totals kept at each close, the spending report, the gate's expected
cost and its runs still waiting for their usage — counts each run once, budgeted or not."""

from __future__ import annotations

from typing import Any

import pytest

from agentboard.domain.errors import StaleRun
from agentboard.kernel import budgets, runs, supervision

B = "default"


@pytest.fixture(autouse=True)
def _profiles(ab: Any) -> None:
    ab.add_profile("w", command="true")
    ab.add_profile("v", command="true")


def _spent(board: Any, scope: str, ref: str) -> dict[str, float]:
    shown = budgets.show(board.db, scope=scope, ref=ref)
    assert len(shown) == 1, shown
    return dict(shown[0]["spent"])


def _work(board: Any, title: str, *, usage: dict[str, Any] | None = None, pid: int | None = None,
          **fields: Any) -> tuple[str, int]:
    """A task claimed and completed by its worker (``pid``: the spawn recorded first); its id and run."""
    t = board.create(title, assignee=fields.pop("assignee", "w"), **fields)["id"]
    run = board.claim(t)["run_id"]
    if pid is not None:
        board.record_spawn(t, run, pid=pid)
    board.complete(t, run_id=run, summary="done", usage=usage)
    return t, run


def _as_supervision(board: Any, task_id: str) -> None:
    board.db.write(lambda tx: tx.execute("UPDATE tasks SET purpose = 'supervision' WHERE id = :t", {"t": task_id}))


def _ledger(board: Any) -> list[dict[str, Any]]:
    return board.db.read(lambda tx: tx.all("SELECT source, run_id, runs, tokens, cost_usd, pending FROM budget_usage "
                                           "ORDER BY id"))


def _numbers(spent: dict[str, float]) -> tuple[float, float, float]:
    return spent["runs"], spent["tokens"], round(spent["cost"], 6)


def test_a_budget_set_after_runs_closed_without_any_budget_counts_those_runs(ab: Any, board: Any) -> None:
    goal = board.goal("ship it")["id"]
    in_goal, _ = _work(board, "in the goal", goal=goal, usage={"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.1})
    _work(board, "plain", usage={"output_tokens": 20, "cost_usd": 0.2})
    _work(board, "by another profile", assignee="v", usage={"output_tokens": 40, "cost_usd": 0.4})
    sup, _ = _work(board, "supervise", usage={"output_tokens": 80, "cost_usd": 0.8})
    _as_supervision(board, sup)
    person = board.create("closed by hand", assignee="w")["id"]
    board.complete(person, summary="no worker ran it")  # a synthetic run: it spent nothing
    ab.create_board("other")
    _work(ab.board("other"), "elsewhere", usage={"output_tokens": 160, "cost_usd": 1.6})
    assert _ledger(board) == []  # no budget anywhere: nothing but the runs' own rows

    budgets.set_budget(board.db, "task", in_goal, budgets.Limits.build(max_runs=10))
    budgets.set_budget(board.db, "goal", goal, budgets.Limits.build(max_runs=10))
    budgets.set_budget(board.db, "board", B, budgets.Limits.build(max_cost=100.0, per="day"))
    budgets.set_budget(board.db, "supervision", B, budgets.Limits.build(max_cost=100.0, per="month"))
    budgets.set_budget(board.db, "profile", "w", budgets.Limits.build(max_tokens=10_000))
    assert _numbers(_spent(board, "task", in_goal)) == (1, 15, 0.1)
    assert _numbers(_spent(board, "goal", goal)) == (1, 15, 0.1)
    # the board's work (its supervision counts against its own budget), on this board only
    assert _numbers(_spent(board, "board", B)) == (3, 75, 0.7)
    assert _numbers(_spent(board, "supervision", B)) == (1, 80, 0.8)
    # every run profile w ran, on every board
    assert _numbers(_spent(board, "profile", "w")) == (4, 275, 2.7)

    # shared with the work, the board's budget counts its supervision too
    supervision.set_budget_scope(board.db, B, False)
    assert _numbers(_spent(board, "board", B)) == (4, 155, 1.5)


def test_a_run_is_counted_once_when_a_budget_exists_at_its_close(board: Any) -> None:
    budgets.set_budget(board.db, "board", B, budgets.Limits.build(max_cost=10.0))
    t, run = _work(board, "budgeted", usage={"input_tokens": 3, "output_tokens": 4, "cost_usd": 0.5})
    assert _numbers(_spent(board, "board", B)) == (1, 7, 0.5)
    # the budget changed (its window summed again), a budget set on another scope of the run,
    # the board's supervision setting changed (both board budgets summed again): still one run
    budgets.set_budget(board.db, "board", B, budgets.Limits.build(max_cost=20.0))
    budgets.set_budget(board.db, "task", t, budgets.Limits.build(max_runs=5))
    budgets.set_budget(board.db, "profile", "w", budgets.Limits.build(max_runs=5))
    supervision.set_budget_scope(board.db, B, False)
    supervision.set_budget_scope(board.db, B, True)
    for scope, ref in (("board", B), ("task", t), ("profile", "w")):
        assert _numbers(_spent(board, scope, ref)) == (1, 7, 0.5), scope
    # a report of the same run again changes nothing
    with pytest.raises(StaleRun):
        board.complete(t, run_id=run, summary="again", usage={"cost_usd": 9.0})
    assert _numbers(_spent(board, "board", B)) == (1, 7, 0.5)
    assert _ledger(board) == []


def test_the_spending_report_is_the_runs_and_the_llm_calls_with_and_without_budgets(board: Any) -> None:
    t, _ = _work(board, "work", usage={"output_tokens": 100, "cost_usd": 1.0})
    sup, _ = _work(board, "supervise", usage={"output_tokens": 10, "cost_usd": 0.1})
    _as_supervision(board, sup)
    budgets.record_llm_usage(board.db, B, t, {"input_tokens": 5, "output_tokens": 5, "cost_usd": 0.05})
    budgets.record_llm_usage(board.db, B, sup, {"output_tokens": 2, "cost_usd": 0.02})
    budgets.record_llm_usage(board.db, B, None, {"output_tokens": 1, "cost_usd": 0.01})

    def report() -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        out = budgets.spending(board.db, B)
        return _numbers(out["work"]["spent"]), _numbers(out["supervision"]["spent"])

    expected = ((1, 111, 1.06), (1, 12, 0.12))
    assert report() == expected
    assert [r["source"] for r in _ledger(board)] == ["llm", "llm", "llm"]  # the ledger: the LLM calls only
    budgets.set_budget(board.db, "board", B, budgets.Limits.build(max_cost=50.0))
    budgets.set_budget(board.db, "profile", "w", budgets.Limits.build(max_cost=50.0))
    assert report() == expected
    # a run closed under the budgets, and one more call
    _work(board, "more work", usage={"output_tokens": 1000, "cost_usd": 2.0})
    budgets.record_llm_usage(board.db, B, None, {"output_tokens": 3, "cost_usd": 0.03})
    expected = ((2, 1114, 3.09), (1, 12, 0.12))
    assert report() == expected
    shown = budgets.show(board.db, scope="board", ref=B)[0]
    assert _numbers(shown["by"]["work"]["spent"]) == expected[0]
    assert _numbers(shown["spent"]) == expected[0]  # the board's work, by its running total
    assert budgets.spending(board.db, B, per="day")["work"]["spent"]["runs"] == 2


def test_a_run_closed_before_its_workers_exit_waits_for_its_usage_and_counts_it_once(board: Any) -> None:
    budgets.set_budget(board.db, "board", B, budgets.Limits.build(max_tokens=10_000))
    # the worker reports first: its run is closed, its usage still to come with its exit
    t, run = _work(board, "reported first", pid=4242, usage={"output_tokens": 100})
    assert [(r["source"], r["run_id"], r["pending"], r["tokens"]) for r in _ledger(board)] == [
        ("pending", run, 1, 0)]
    assert _numbers(_spent(board, "board", B)) == (1, 100, 0)
    # the exit brings the agent's usage: added once, and the run no longer waits
    runs.update_run(board.db, run, exit_code=0, output_tokens=250, cost_usd=0.3)
    assert _ledger(board) == []
    assert _numbers(_spent(board, "board", B)) == (1, 250, 0.3)
    runs.update_run(board.db, run, exit_code=0)  # the same exit again: nothing more
    assert _numbers(_spent(board, "board", B)) == (1, 250, 0.3)

    # no budget covers the run at its close: no marker; a budget set before its exit gets one,
    # and the usage its exit brings counts once against it
    budgets.clear_budget(board.db, "board", B)
    _, run2 = _work(board, "reported first, unbudgeted", pid=4343, assignee="v", usage={"output_tokens": 7})
    assert _ledger(board) == []
    budgets.set_budget(board.db, "profile", "v", budgets.Limits.build(max_tokens=1_000))
    assert [(r["source"], r["run_id"]) for r in _ledger(board)] == [("pending", run2)]
    assert _numbers(_spent(board, "profile", "v")) == (1, 7, 0)
    runs.update_run(board.db, run2, exit_code=0, output_tokens=70)
    assert _ledger(board) == []
    assert _numbers(_spent(board, "profile", "v")) == (1, 70, 0)
    budgets.set_budget(board.db, "profile", "v", budgets.Limits.build(max_tokens=2_000))  # summed again
    assert _numbers(_spent(board, "profile", "v")) == (1, 70, 0)
    budgets.set_budget(board.db, "board", B, budgets.Limits.build(max_tokens=10_000))
    assert _numbers(_spent(board, "board", B)) == (2, 320, 0.3)


def test_a_run_waiting_for_its_usage_holds_back_the_next_run_a_tight_budget_cannot_pay(board: Any) -> None:
    budgets.set_budget(board.db, "profile", "w", budgets.Limits.build(expected_cost=0.4))
    budgets.set_budget(board.db, "board", B, budgets.Limits.build(max_cost=1.0))
    _work(board, "first", pid=4242, usage={"cost_usd": 0.1})
    nxt = board.create("next", assignee="w")
    # $0.90 left, $0.40 of it held for the run whose usage is still to come: one more run fits
    assert board.db.read(lambda tx: budgets.gate_in(tx, nxt)) is None
    _work(board, "second", pid=4343, usage={"cost_usd": 0.1})
    why = board.db.read(lambda tx: budgets.gate_in(tx, nxt))  # $0.80 left, all of it held for the two
    assert why is not None and "cannot afford another run" in why and "2 under way" in why
    # their exits bring their usage: nothing is held any longer
    for r in board.db.read(lambda tx: tx.all("SELECT run_id FROM budget_usage WHERE pending = 1")):
        runs.update_run(board.db, int(r["run_id"]), exit_code=0)
    assert board.db.read(lambda tx: budgets.gate_in(tx, nxt)) is None


def test_the_gate_expects_the_median_of_a_profiles_last_runs_budgeted_or_not(board: Any) -> None:
    for cost in (0.1, 0.3, 0.2):
        _work(board, f"costs {cost}", usage={"cost_usd": cost, "output_tokens": int(cost * 1000)})
    _work(board, "another profile's", assignee="v", usage={"cost_usd": 5.0})
    budgets.set_budget(board.db, "board", B, budgets.Limits.build(max_cost=10.0))
    _work(board, "under the budget", usage={"cost_usd": 0.25, "output_tokens": 250})
    expected, source = board.db.read(lambda tx: budgets.expected_in(tx, "w"))
    assert (round(expected["cost"], 6), expected["tokens"]) == (0.225, 225.0)
    assert source == "the median of the last 4 runs of profile 'w'"
    assert board.db.read(lambda tx: budgets.expected_in(tx, "nobody"))[1] == "no runs yet"


def test_a_runs_row_in_the_ledger_from_an_older_schema_is_not_counted_twice(board: Any) -> None:
    # a dump exported before migration 0024 brings each run's row of the ledger with it
    _, run = _work(board, "imported", usage={"output_tokens": 30, "cost_usd": 0.3})
    board.db.write(lambda tx: tx.execute(
        "INSERT INTO budget_usage (board, task_id, profile, run_id, source, at, runs, runtime, tokens, cost_usd) "
        "SELECT board, task_id, profile, id, 'run', ended_at, 1, 0, 30, 0.3 FROM task_runs WHERE id = :r",
        {"r": run}))
    budgets.set_budget(board.db, "board", B, budgets.Limits.build(max_cost=10.0))
    assert _numbers(_spent(board, "board", B)) == (1, 30, 0.3)
    assert _numbers(budgets.spending(board.db, B)["work"]["spent"]) == (1, 30, 0.3)
