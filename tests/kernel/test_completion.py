"""A worker's completion, on both backends: what a user sees afterwards is the same whichever way
the database writes it (on PostgreSQL a plain completion is one compare-and-swap statement; a
held, refused or unusual one takes the general path)."""

from __future__ import annotations

from typing import Any

import pytest
from kernelkit import check_invariants, snapshot

from agentboard.domain.errors import InvalidInput, StaleRun
from agentboard.kernel import budgets, runs

B = "default"


def _spent(board: Any, **scope: str) -> dict[str, float]:
    shown = [b for b in board.budgets() if all(b.get(k) == v for k, v in scope.items())]
    assert len(shown) == 1, shown
    return dict(shown[0]["spent"])


def _run_row(board: Any, task_id: str) -> dict[str, Any]:
    return dict(board.runs(task_id)[-1])


def test_a_worker_completion_closes_its_run_counts_its_spend_and_wakes_what_waited(board: Any) -> None:
    goal = board.goal("ship it")["id"]
    board.set_budget(max_cost=10.0)
    parent = board.create("build", assignee="w", goal=goal)["id"]
    child = board.create("test", assignee="w", parents=[parent], goal=goal)["id"]
    run = board.claim(parent)["run_id"]

    done = board.complete(parent, run_id=run, summary="built\nin detail", result="ok: 3 files",
                          usage={"input_tokens": 100, "output_tokens": 50, "cost_usd": 0.25})

    assert done["status"] == "done" and done["run_id"] == run and done["promoted"] == [child]
    assert done["result"] == "ok: 3 files" and done["current_run_id"] is None
    r = _run_row(board, parent)
    assert (r["id"], r["status"], r["outcome"]) == (run, "closed", "completed")
    assert (r["input_tokens"], r["output_tokens"], r["cost_usd"]) == (100, 50, 0.25)
    assert r["summary"] == "built\nin detail" and r["ended_at"] >= r["started_at"]
    assert board.show(child)["status"] == "ready"
    spent = _spent(board, scope="board")
    assert (spent["runs"], spent["tokens"], spent["cost"]) == (1, 150, 0.25)
    kinds = [e["kind"] for e in board.events(task_id=parent)]
    assert kinds.count("completed") == 1 and kinds[-1] == "completed"
    check_invariants(board.db)

    run2 = board.claim(child)["run_id"]
    board.complete(child, run_id=run2, summary="passed")
    assert board.goals()[0]["status"] == "verifying"  # the goal's last task done: its acceptance next
    check_invariants(board.db)


def test_a_run_completed_before_any_budget_existed_counts_when_one_is_set(board: Any) -> None:
    t = board.create("research", assignee="w")["id"]
    run = board.claim(t)["run_id"]
    board.complete(t, run_id=run, usage={"cost_usd": 0.5, "output_tokens": 7})
    board.set_budget(max_cost=2.0, per="day")
    spent = _spent(board, scope="board")
    assert (spent["runs"], spent["tokens"], spent["cost"]) == (1, 7, 0.5)


def test_a_task_that_requires_review_goes_to_review_with_its_run_saying_so(board: Any) -> None:
    t = board.create("risky change", assignee="w", review=True)["id"]
    run = board.claim(t)["run_id"]
    out = board.complete(t, run_id=run, summary="changed", result="see diff")
    assert out["status"] == "review" and out["completed_at"] is None and out["result"] == "see diff"
    assert _run_row(board, t)["outcome"] == "review_requested"
    assert [e["kind"] for e in board.events(task_id=t)][-1] == "review_requested"
    check_invariants(board.db)


def test_a_report_on_a_task_with_verify_commands_waits_for_them(board: Any) -> None:
    t = board.create("fix the bug", assignee="w", verify=["pytest -q"])["id"]
    run = board.claim(t)["run_id"]
    held = board.complete(t, run_id=run, summary="fixed", usage={"cost_usd": 0.1})
    assert held["pending_verification"] is True and held["status"] == "running"
    r = _run_row(board, t)
    assert r["status"] == "open" and r["pending_report"]
    assert "completed" not in [e["kind"] for e in board.events(task_id=t)]
    done = runs.complete(board.db, B, t, run_id=run, summary="fixed", verified=True, usage={"cost_usd": 0.1})
    assert done["status"] == "done" and _run_row(board, t)["outcome"] == "completed"
    check_invariants(board.db)


def test_a_completion_refused_leaves_the_task_its_run_and_the_ledger_untouched(board: Any) -> None:
    t = board.create("job", assignee="w")["id"]
    run = board.claim(t)["run_id"]
    before = snapshot(board.db, t)
    ledger = board.db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM budget_usage"))
    with pytest.raises(InvalidInput, match="usage.cost_usd must be a finite number >= 0"):
        board.complete(t, run_id=run, usage={"cost_usd": "lots"})
    with pytest.raises(StaleRun):
        board.complete(t, run_id=run + 1000, summary="not mine")
    assert snapshot(board.db, t) == before
    assert board.db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM budget_usage")) == ledger
    board.complete(t, run_id=run)
    with pytest.raises(StaleRun):  # a second report of the same run
        board.complete(t, run_id=run, summary="again")
    # a run's spend is read from its own row: the ledger gets nothing, and the run counts once
    assert board.db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM budget_usage")) == ledger
    board.set_budget(max_runs=5)
    assert _spent(board, scope="board")["runs"] == 1
    check_invariants(board.db)


def test_a_completion_over_a_budget_is_recorded_and_the_budget_says_spent(board: Any) -> None:
    budgets.set_budget(board.db, "board", B, budgets.Limits.build(max_cost=0.3))
    t = board.create("expensive", assignee="w")["id"]
    run = board.claim(t)["run_id"]
    assert board.complete(t, run_id=run, usage={"cost_usd": 0.5})["status"] == "done"
    shown = budgets.show(board.db, scope="board", ref=B)[0]
    assert shown["exhausted"] and shown["spent"]["cost"] == 0.5
    assert [e["kind"] for e in board.events(kinds=["budget_exhausted"])] == ["budget_exhausted"]


def test_a_completions_event_says_what_was_reported_and_nothing_for_what_was_not(board: Any) -> None:
    plain, full, by_hand = (board.create(t, assignee="w")["id"] for t in ("plain", "full", "by hand"))
    board.complete(plain, run_id=board.claim(plain)["run_id"])
    board.complete(full, run_id=board.claim(full)["run_id"], summary="did it\nall of it", result="3 files")
    board.complete(by_hand, summary="closed by a person")

    def payload(task_id: str) -> dict[str, Any]:
        (ev,) = [e for e in board.show(task_id)["events"] if e["kind"] == "completed"]
        return dict(ev["payload"])

    assert payload(plain) == {}
    assert payload(full) == {"summary": "did it", "result": "3 files"}
    assert payload(by_hand) == {"summary": "closed by a person", "synthetic": True}


def test_completing_a_worktree_task_already_done_says_it_is_done_not_how_to_finish_it(board: Any) -> None:
    from agentboard.domain.errors import InvalidTransition
    from agentboard.kernel import boards

    t = board.create("fix", assignee="w")["id"]
    board.complete(t, run_id=board.claim(t)["run_id"], summary="fixed")
    boards.update(board.db, board.slug, settings={"integrate": "merge"})
    board.db.write(lambda tx: tx.execute(
        "UPDATE tasks SET workspace_kind = 'worktree', branch_name = :br WHERE id = :id",
        {"br": f"ab/{t}", "id": t}))
    before = snapshot(board.db, t)

    with pytest.raises(InvalidTransition) as err:
        board.complete(t)

    assert str(err.value).startswith(f"cannot complete task {t} while it is done (allowed from: ")
    assert snapshot(board.db, t) == before


@pytest.mark.parametrize("field, value, message", [
    ("priority", 2_000_000, "priority is 2000000; give -1000000 to 1000000"),
    ("max_retries", -1, "max_retries is -1; give 1 to 1000"),
])
def test_an_edit_out_of_a_fields_range_is_refused_by_the_kernel_as_a_create_would_be(
        board: Any, ab: Any, field: str, value: int, message: str) -> None:
    from agentboard.kernel import tasks

    t = board.create("edit me")
    with pytest.raises(InvalidInput, match=message):
        tasks.edit(ab.db, "default", t["id"], **{field: value})
    assert board.show(t["id"])[field] == t[field]
