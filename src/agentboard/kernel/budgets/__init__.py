"""Budgets: limits on what a task, a goal, a board or a profile may spend, checked before a spawn.

A budget is one row per scope (``task``, ``goal``, ``board``, ``profile`` and its id, and
``supervision`` and a board's slug) with any of four limits — runs, total runtime (seconds),
tokens (input + output) and cost (USD) — and, for a board, its supervision or a profile, an
optional window (``day`` or ``month``, UTC calendar).

Supervision has a scope of its own: with the board setting ``supervision_budget`` (default on),
the runs of the board's supervision tasks (``purpose = 'supervision'``) count against its
``supervision`` budget instead of its ``board`` budget, so the supervisor cannot spend the runs
meant for the work (and a spent work budget does not silence the supervisor). Turned off, they
count against the board's budget like any task.

What was spent is read from two places: a closed run's own row of ``task_runs`` (one run, its
runtime, its tokens and cost, against its task, the task's goal, its board and the profile that
ran it) and the ``budget_usage`` ledger of what is not a run (an LLM helper call), written in the
transaction that records the call. A run is never written to the ledger — except, while a budget
covers it, the ``pending`` marker of a run closed before its worker's exit was recorded. The
transaction that closes a run or records a call adds it to the running totals of the budgets
of its scopes and checks them: at 80% of a limit one ``budget_warning`` event per scope and
window, at 100% one ``budget_exhausted``.

A race's task budget covers its attempts (each a task of its own, carrying the race's goal):
their runs count against it when it is read (:func:`attempts_spend_in`), the gate counts its
attempts running as runs under way, and the race's settle checks it each pass
(:func:`check_race_in`).

The dispatcher's claim (:func:`gate_in`, called by ``dispatching.claim_batch`` and the review run
opener) refuses a task when one of its scopes cannot afford one more run: a limit reached, or the
remaining budget, less the expected cost of the runs in flight, below the expected cost of one
run (the profile's configured ``expected_cost``, else the median of its recent runs whose usage
is known). While neither tells what a run of the profile costs, a scope with a cost or token
limit starts one run at a time, until a run has closed with its usage. A refused
task is blocked with kind ``budget`` and a reason naming the limit; :func:`release_in` unblocks
such tasks as soon as the gate lets them through again (a limit raised or cleared, a new window).
Running workers in an exhausted scope are told to stop by their heartbeat answer
(:func:`stop_reason_in`) and stopped by the dispatcher after a grace period (:func:`stop_run`).

The runs under way spend runtime as they go: a runtime limit counts what they have run so far
(:func:`open_runtime_in`), in what the budgets show, in the gate and in the dispatcher's check
of its running workers (:func:`running_over`), which marks a runtime limit they passed as spent.

The verbs live in four modules: ``scopes`` (what a budget counts), ``ledger`` (what was spent),
``gate`` (the checks before a spawn and on running workers) and ``limits`` (setting them);
``kernel.budgets.X`` names them all.
"""

from __future__ import annotations

from .gate import (
    block_in,
    expected_in,
    gate_batch_in,
    gate_in,
    release,
    release_in,
    review_gate,
    running_over,
    running_over_budget,
    stop_reason_in,
    stop_run,
)
from .ledger import (
    CLOSED_RUN,
    CLOSED_RUN_FACTS,
    account_row_in,
    account_run_in,
    account_usage_in,
    attempts_spend_in,
    check_race_in,
    open_runs_in,
    open_runtime_in,
    rebuild_board_in,
    record_llm_usage,
    run_updated_in,
    spend_in,
    spending,
    usage_numbers,
)
from .limits import Limits, clear_budget, for_task, set_budget, show
from .scopes import (
    LIMIT_OF,
    METRICS,
    PERS,
    SCOPES,
    SUPERVISION,
    amount,
    own_scope,
    scope_name,
    window,
)

__all__ = [
    "LIMIT_OF", "METRICS", "PERS", "SCOPES", "Limits", "account_run_in", "account_usage_in", "amount", "block_in",
    "clear_budget", "expected_in", "for_task", "own_scope", "rebuild_board_in", "spending", "gate_batch_in", "gate_in", "record_llm_usage", "release",
    "release_in", "review_gate", "running_over_budget", "set_budget", "show", "spend_in", "stop_reason_in", "stop_run",
    "usage_numbers", "window", "account_row_in", "run_updated_in", "SUPERVISION", "scope_name", "CLOSED_RUN", "CLOSED_RUN_FACTS",
    "attempts_spend_in", "check_race_in", "running_over", "open_runs_in", "open_runtime_in",
]
