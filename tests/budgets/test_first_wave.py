"""With no run history and no `expected_cost`, what a run costs is unknown: a cost or token
budget starts one run at a time in its scope until a run has closed with its usage, then the
expected cost of one run gates the next — real dispatcher, real worker processes (each run
reports $5 and 1,010 tokens)."""

from __future__ import annotations

import shlex
from typing import Any

from dispatch.conftest import open_runs, statuses, wait_for

from agentboard.kernel import budgets

PAYS = "sh -c " + shlex.quote(
    "agentboard complete --summary x --usage '{\"cost_usd\": 5, \"input_tokens\": 1000, \"output_tokens\": 10}'")


def _settled(ab: Any, board: Any, ids: list[str], done: int) -> bool:
    """``done`` tasks done, the others blocked, no run under way."""
    st = statuses(board, ids)
    return (sum(1 for s in st.values() if s == "done") >= done and set(st.values()) <= {"done", "blocked"}
            and open_runs(ab.db) == 0)


def test_with_no_run_history_a_cost_budget_starts_one_run_not_the_whole_first_wave(ab, board, dispatcher):
    ab.add_profile("payer", command=PAYS)
    budgets.set_budget(ab.db, "board", "default", budgets.Limits.build(max_cost=5))
    ids = [board.create(f"pay {i}", assignee="payer")["id"] for i in range(8)]
    dispatcher()  # max_parallel 8: without the rule, all eight would start at once
    wait_for(lambda: _settled(ab, board, ids, 1), 120, what="the runs settled")
    assert sum(len(board.runs(i)) for i in ids) == 1
    st = statuses(board, ids)
    assert sorted(st.values()) == ["blocked"] * 7 + ["done"], st
    reasons = [board.show(i)["block_reason"] for i in ids if st[i] == "blocked"]
    assert all(r.startswith("the board default budget ") for r in reasons), reasons
    # the runs refused while the first ran say why, and what lets more start at once
    waiting = [r for r in reasons if "starts one run at a time while the cost of a run is unknown" in r]
    assert waiting, reasons
    assert "profile 'payer' has no run whose usage is known and no expected_cost, and 1 is under way" in waiting[0]
    assert "agentboard budget set --profile payer --expected-cost USD" in waiting[0]
    (shown,) = budgets.show(ab.db, scope="board", ref="default")
    assert shown["spent"]["cost"] == 5.0 and shown["spent"]["runs"] == 1


def test_once_a_run_has_closed_with_its_usage_the_expected_tokens_of_one_run_gate_the_next(ab, board, dispatcher):
    ab.add_profile("payer", command=PAYS)
    budgets.set_budget(ab.db, "board", "default", budgets.Limits.build(max_tokens=2500))
    ids = [board.create(f"pay {i}", assignee="payer")["id"] for i in range(8)]
    # the tasks the first run held back are released at the next interval once it has closed
    dispatcher(dispatch_interval=1.0)
    # one run alone; then 1,490 tokens left afford one more run of the expected 1,010, not two;
    # then 480 left afford none
    wait_for(lambda: _settled(ab, board, ids, 2), 120, what="two runs done, the rest blocked")
    st = statuses(board, ids)
    assert sorted(st.values()) == ["blocked"] * 6 + ["done"] * 2, st
    assert sum(len(board.runs(i)) for i in ids) == 2
    (shown,) = budgets.show(ab.db, scope="board", ref="default")
    assert shown["spent"]["tokens"] == 2020 and not shown["exhausted"]
    reasons = [board.show(i)["block_reason"] for i in ids if st[i] == "blocked"]
    assert all(r.startswith("the board default budget ") for r in reasons), reasons
