"""Insights, on both backends: a run history made through the real verbs, and the numbers a
person would work out by hand from it — per profile, per model and per board day. The rollups
kept as runs close (each closed run pending until a fold adds it) agree with the ones rebuilt
from the runs afterwards."""

from __future__ import annotations

import time
from typing import Any

import pytest

from agentboard.domain.errors import InvalidInput
from agentboard.kernel import insights, purge, races, runs
from agentboard.store import rollups

DAY = 86400


def _shift_run(board: Any, run_id: int, seconds: float) -> None:
    """The open run started ``seconds`` earlier (a run that took that long when it closes now)."""
    board.db.write(lambda tx: tx.execute("UPDATE task_runs SET started_at = started_at - :s WHERE id = :r",
                                         {"s": seconds, "r": run_id}))


def _age_task(board: Any, task_id: str, seconds: float) -> None:
    board.db.write(lambda tx: tx.execute("UPDATE tasks SET created_at = created_at - :s WHERE id = :t",
                                         {"s": seconds, "t": task_id}))


def _history(board: Any, ab: Any) -> dict[str, str]:
    """alpha (model m-a): t1 done at its first attempt (0.50 $, 150 tokens, 100 s); t2 crashes once,
    then is done (0.25 $ + 0.10 $); t5 times out and is given up on. beta (model m-b): t3 with
    checks and review fails verification once, passes, and is approved (0.40 $); t4 on model m-c
    goes to review, changes are requested, then it is rejected. t6 is closed by a person."""
    ab.add_profile("alpha", command="true", model_name="m-a")
    ab.add_profile("beta", command="true", model_name="m-b")
    t = {}
    t["t1"] = board.create("one", assignee="alpha")["id"]
    _age_task(board, t["t1"], 3000)
    r = board.claim(t["t1"])["run_id"]
    _shift_run(board, r, 100)
    board.complete(t["t1"], run_id=r, usage={"input_tokens": 100, "output_tokens": 50, "cost_usd": 0.5})

    t["t2"] = board.create("two", assignee="alpha")["id"]
    _age_task(board, t["t2"], 20000)
    r = board.claim(t["t2"])["run_id"]
    _shift_run(board, r, 10)
    board.fail(t["t2"], "crashed", run_id=r, error="boom")
    runs.update_run(board.db, r, cost_usd=0.1)  # its usage, learned after the run closed
    r = board.claim(t["t2"])["run_id"]
    _shift_run(board, r, 1000)
    board.complete(t["t2"], run_id=r, usage={"input_tokens": 10, "output_tokens": 10, "cost_usd": 0.25})

    t["t3"] = board.create("three", assignee="beta", verify=["true"], review=True)["id"]
    r = board.claim(t["t3"])["run_id"]
    board.fail(t["t3"], "verify_failed", run_id=r, error="checks failed")
    r = board.claim(t["t3"])["run_id"]
    runs.complete(board.db, board.slug, t["t3"], run_id=r, verified=True, usage={"cost_usd": 0.4})
    board.approve(t["t3"])

    t["t4"] = board.create("four", assignee="beta", review=True, model="m-c")["id"]
    r = board.claim(t["t4"])["run_id"]
    board.complete(t["t4"], run_id=r)
    board.request_changes(t["t4"], "not yet")
    r = board.claim(t["t4"])["run_id"]
    board.complete(t["t4"], run_id=r)
    board.reject(t["t4"], "no")

    t["t5"] = board.create("five", assignee="alpha")["id"]
    r = board.claim(t["t5"])["run_id"]
    board.fail(t["t5"], "timed_out", run_id=r, error="too slow")
    board.give_up(t["t5"], "stop")

    t["t6"] = board.create("six", assignee="alpha")["id"]
    board.complete(t["t6"])
    return t


def _groups(board: Any, by: str, since: str | None = None) -> dict[str, dict[str, Any]]:
    out = insights.read(board.db, board.slug, insights.Query.build(by, since))
    return {g["key"]: g for g in out["groups"]}


def _rollup_rows(board: Any) -> list[dict[str, Any]]:
    """The rollups' rows (once the closed runs pending are folded into them)."""
    insights.fold(board.db)
    cols = ", ".join((*rollups.KEYS, *rollups.COUNTS))
    rows = board.db.read(lambda tx: tx.all(f"SELECT {cols} FROM run_rollups ORDER BY board, day, profile, model"))
    return [{k: (round(float(v), 6) if isinstance(v, float) else v) for k, v in dict(r).items()} for r in rows]


def test_per_profile_insights_are_the_numbers_worked_out_by_hand(board: Any, ab: Any) -> None:
    _history(board, ab)
    g = _groups(board, "profile")

    alpha = g["alpha"]
    # runs: t1 (ok), t2 (crashed, ok), t5 (timed out); done: t1 and t2
    assert (alpha["runs"], alpha["tasks_done"]) == (4, 2)
    # first attempts: t1 ok, t2 crashed, t5 timed out
    assert (alpha["first_attempts"], alpha["first_attempt_success_rate"]) == (3, pytest.approx(1 / 3))
    assert alpha["verifications"] == 0 and alpha["verification_pass_rate"] is None
    assert alpha["reviews"] == 0 and alpha["review_approval_rate"] is None
    assert alpha["cost_usd"] == pytest.approx(0.85)
    assert alpha["cost_per_done_task"] == pytest.approx(0.85 / 2)
    assert alpha["tokens_per_done_task"] == pytest.approx((150 + 20) / 2)
    assert alpha["failures"] == {"crashed": 1, "timed_out": 1}
    # durations 100 s, 10 s, 1000 s, ~0 s: the median lies between 10 s and 100 s, p90 near 1000 s
    assert 8 <= alpha["duration_p50_s"] <= 128
    assert rollups.bucket_of(alpha["duration_p90_s"]) == rollups.bucket_of(1000)

    beta = g["beta"]
    # t3: verify_failed, then passed; t4: two runs to review
    assert (beta["runs"], beta["tasks_done"]) == (4, 1)
    assert (beta["first_attempts"], beta["first_attempt_success_rate"]) == (2, pytest.approx(1 / 2))
    assert (beta["verifications"], beta["verification_pass_rate"]) == (2, pytest.approx(1 / 2))
    # t3 approved; t4 changes requested, then rejected
    assert (beta["reviews"], beta["review_approval_rate"]) == (3, pytest.approx(1 / 3))
    assert beta["cost_per_done_task"] == pytest.approx(0.4)
    assert beta["failures"] == {"verify_failed": 1}
    assert (beta["races_entered"], beta["races_won"]) == (0, 0)

    # the task a person closed is done by nobody's run
    assert g[""]["tasks_done"] == 1 and g[""]["runs"] == 0


def test_per_model_insights_follow_the_task_model_over_the_profile_model(board: Any, ab: Any) -> None:
    _history(board, ab)
    g = _groups(board, "model")
    assert (g["m-a"]["runs"], g["m-a"]["tasks_done"]) == (4, 2)
    assert (g["m-b"]["runs"], g["m-b"]["tasks_done"], g["m-b"]["review_approval_rate"]) == (2, 1, 1.0)
    assert (g["m-c"]["runs"], g["m-c"]["tasks_done"], g["m-c"]["review_approval_rate"]) == (2, 0, 0.0)


def test_the_board_view_counts_tasks_done_spend_and_cycle_times_per_day(board: Any, ab: Any) -> None:
    _history(board, ab)
    out = insights.read(board.db, board.slug, insights.Query.build("board", "7d"))
    tl = out["timeline"]
    assert out["groups"] == [] and out["since_days"] == 7 and len(tl["days"]) == 7
    today = tl["days"][-1]
    assert today["day"] == time.strftime("%Y-%m-%d", time.gmtime())
    assert (today["tasks_done"], tl["tasks_done"]) == (4, 4)
    assert today["runs"] == 8 and today["cost_usd"] == pytest.approx(1.25)
    # started: t1..t5 ran, t6 was closed without a run; done: t1, t2, t3, t6 → t4, t5 in progress
    assert today["started"] == 6 and today["work_in_progress"] == 2
    # cycle times: t1 ~3000 s, t2 ~20000 s, t3 and t6 ~0 s
    assert sum(b["tasks"] for b in tl["cycle_time_histogram"]) == 4
    assert tl["cycle_time_p90_s"] is not None and rollups.bucket_of(tl["cycle_time_p90_s"]) == rollups.bucket_of(20000)
    assert tl["cycle_time_p50_s"] <= 4096


def test_rollups_kept_as_runs_close_equal_the_ones_rebuilt_from_the_runs(board: Any, ab: Any) -> None:
    _history(board, ab)
    kept = _rollup_rows(board)
    assert kept
    insights.rebuild(board.db, board.slug)
    assert _rollup_rows(board) == kept
    insights.rebuild(board.db)
    assert _rollup_rows(board) == kept


def test_runs_of_minutes_and_tasks_of_hours_land_in_the_buckets_a_rebuild_puts_them_in(board: Any) -> None:
    """A completed run is folded into the bucket of its duration and its task's cycle time: with
    runs far from the first bucket, a rebuild agrees."""
    for i, (run_s, cycle_s) in enumerate([(90.0, 5_000.0), (3.5, 3.6), (1_000.0, 200_000.0)]):
        t = board.create(f"long {i}", assignee="w", review=i == 1)["id"]
        run = board.claim(t)["run_id"]
        board.db.write(lambda tx, t=t, run=run, run_s=run_s, cycle_s=cycle_s: (
            tx.execute("UPDATE task_runs SET started_at = started_at - :d WHERE id = :r", {"d": run_s, "r": run}),
            tx.execute("UPDATE tasks SET created_at = created_at - :d WHERE id = :t", {"d": cycle_s, "t": t})))
        board.complete(t, run_id=run, summary="done")
    kept = _summed_rows(board)
    row = kept[0]
    assert row["d7"] == 1 and row["d2"] == 1 and row["d10"] == 1 and row["c13"] == 1 and row["c18"] == 1
    assert row["done"] == 2 and row["runs"] == 3
    insights.rebuild(board.db, board.slug)
    assert _summed_rows(board) == kept


def _summed_rows(board: Any) -> list[dict[str, Any]]:
    """The rollups per key, their shards (one per writing connection on PostgreSQL) added up, once
    the closed runs pending are folded into them."""
    insights.fold(board.db)
    keys = ", ".join(rollups.KEYS)
    sums = ", ".join(f"SUM({c}) AS {c}" for c in rollups.COUNTS)
    rows = board.db.read(lambda tx: tx.all(f"SELECT {keys}, {sums} FROM run_rollups GROUP BY {keys} ORDER BY {keys}"))
    return [{k: (round(float(v), 6) if isinstance(v, float) else int(v) if k in rollups.COUNTS else v)
             for k, v in dict(r).items()} for r in rows]


def test_a_task_reopened_then_done_again_leaves_the_rollups_a_rebuild_makes(board: Any, ab: Any) -> None:
    t = _history(board, ab)
    board.reopen(t["t1"], reason="again")  # done by alpha's run
    board.reopen(t["t6"])  # closed by a person
    assert _groups(board, "profile")["alpha"]["tasks_done"] == 1
    kept = _summed_rows(board)
    insights.rebuild(board.db, board.slug)
    assert _summed_rows(board) == kept
    board.complete(t["t1"], run_id=board.claim(t["t1"])["run_id"])
    board.complete(t["t6"])
    assert (_groups(board, "profile")["alpha"]["tasks_done"], _groups(board, "profile")[""]["tasks_done"]) == (2, 1)
    kept = _summed_rows(board)
    insights.rebuild(board.db, board.slug)
    assert _summed_rows(board) == kept


def test_usage_learned_after_a_run_closed_is_counted(board: Any, ab: Any) -> None:
    ab.add_profile("alpha", command="true")
    tid = board.create("late usage", assignee="alpha")["id"]
    r = board.claim(tid)["run_id"]
    board.complete(tid, run_id=r)
    runs.update_run(board.db, r, input_tokens=40, output_tokens=2, cost_usd=0.3)
    g = _groups(board, "profile")["alpha"]
    assert (g["input_tokens"], g["output_tokens"], g["cost_usd"]) == (40, 2, pytest.approx(0.3))
    kept = _rollup_rows(board)
    insights.rebuild(board.db)
    assert _rollup_rows(board) == kept


def _pending(board: Any) -> list[tuple[int, int]]:
    return [(int(r["run_id"]), int(r["done"])) for r in board.db.read(
        lambda tx: tx.all("SELECT run_id, done FROM run_rollups_pending ORDER BY run_id"))]


def test_a_completed_run_waits_in_the_pending_runs_until_a_read_folds_it_in(board: Any, ab: Any) -> None:
    ab.add_profile("alpha", command="true")
    tid = board.create("one", assignee="alpha")["id"]
    r = board.claim(tid)["run_id"]
    board.complete(tid, run_id=r, usage={"input_tokens": 7, "output_tokens": 3, "cost_usd": 0.2})
    assert _pending(board) == [(r, 1)]
    assert board.db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM run_rollups")) == 0
    g = _groups(board, "profile")["alpha"]  # the read folds first
    assert (g["runs"], g["tasks_done"], g["input_tokens"], g["cost_usd"]) == (1, 1, 7, pytest.approx(0.2))
    assert _pending(board) == []
    assert insights.fold(board.db) is False  # nothing left: no write


def test_usage_learned_after_the_run_was_folded_in_is_added_once(board: Any, ab: Any) -> None:
    ab.add_profile("alpha", command="true")
    tid = board.create("late usage", assignee="alpha")["id"]
    r = board.claim(tid)["run_id"]
    board.complete(tid, run_id=r, usage={"input_tokens": 5})
    assert insights.fold(board.db) is True
    runs.update_run(board.db, r, input_tokens=40, cost_usd=0.3)
    g = _groups(board, "profile")["alpha"]
    assert (g["input_tokens"], g["cost_usd"]) == (40, pytest.approx(0.3))
    kept = _rollup_rows(board)
    insights.rebuild(board.db)
    assert _rollup_rows(board) == kept


def test_a_purged_task_whose_run_was_pending_stays_counted(board: Any, ab: Any) -> None:
    ab.add_profile("alpha", command="true")
    tid = board.create("gone soon", assignee="alpha")["id"]
    board.complete(tid, run_id=board.claim(tid)["run_id"], usage={"cost_usd": 0.5})
    purge.purge(board.db, board.slug, tid)
    assert _pending(board) == []
    g = _groups(board, "profile")["alpha"]
    assert (g["runs"], g["tasks_done"], g["cost_usd"]) == (1, 1, pytest.approx(0.5))


def test_runs_completed_while_others_fold_are_each_counted_once(board: Any, ab: Any) -> None:
    """Four writers complete tasks while two folders fold over and over: every run is counted
    once, as a rebuild counts it."""
    import threading

    ab.add_profile("alpha", command="true")
    ids = [board.create(f"t{i}", assignee="alpha")["id"] for i in range(60)]
    errors: list[BaseException] = []
    done = threading.Event()

    def complete(part: list[str]) -> None:
        try:
            for tid in part:
                board.complete(tid, run_id=runs.claim(board.db, board.slug, tid)["run_id"], usage={"cost_usd": 0.01})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def fold() -> None:
        try:
            while not done.is_set():
                insights.fold(board.db)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writers = [threading.Thread(target=complete, args=(ids[i::4],)) for i in range(4)]
    folders = [threading.Thread(target=fold) for _ in range(2)]
    for th in (*writers, *folders):
        th.start()
    for th in writers:
        th.join()
    done.set()
    for th in folders:
        th.join()
    assert errors == []
    g = _groups(board, "profile")["alpha"]
    assert (g["runs"], g["tasks_done"], g["cost_usd"]) == (60, 60, pytest.approx(0.6))
    kept = _summed_rows(board)
    insights.rebuild(board.db, board.slug)
    assert _summed_rows(board) == kept


def test_since_keeps_only_the_last_days(board: Any, ab: Any) -> None:
    _history(board, ab)
    # move t1's run and completion ten days back, and rebuild (as the migration does)
    def _w(tx: Any) -> None:
        tx.execute("UPDATE task_runs SET started_at = started_at - :s, ended_at = ended_at - :s "
                   "WHERE task_id = (SELECT id FROM tasks WHERE title = 'one')", {"s": 10 * DAY})
        tx.execute("UPDATE tasks SET completed_at = completed_at - :s, created_at = created_at - :s "
                   "WHERE title = 'one'", {"s": 10 * DAY})
    board.db.write(_w)
    insights.rebuild(board.db, board.slug)
    assert _groups(board, "profile")["alpha"]["tasks_done"] == 2
    assert _groups(board, "profile", "7d")["alpha"]["tasks_done"] == 1
    assert _groups(board, "profile", "1w")["alpha"]["runs"] == 3
    tl = insights.read(board.db, board.slug, insights.Query.build("board", "7d"))["timeline"]
    assert tl["tasks_done"] == 3
    # t1 started and finished before the window: work in progress is still t4 and t5
    assert tl["days"][-1]["work_in_progress"] == 2
    whole = insights.read(board.db, board.slug, insights.Query.build("board"))["timeline"]
    assert whole["tasks_done"] == 4 and len(whole["days"]) == 11


def test_an_empty_board_has_no_groups_and_a_flat_timeline(board: Any) -> None:
    assert insights.read(board.db, board.slug, insights.Query.build("profile"))["groups"] == []
    tl = insights.read(board.db, board.slug, insights.Query.build("board", "3d"))["timeline"]
    assert [d["tasks_done"] for d in tl["days"]] == [0, 0, 0]
    assert tl["cycle_time_p50_s"] is None


@pytest.mark.parametrize("by,since", [("owner", None), ("profile", "soon"), ("profile", "0d")])
def test_a_bad_grouping_or_window_is_refused_saying_what_to_use(by: str, since: str | None) -> None:
    with pytest.raises(InvalidInput, match="invalid (by|since)"):
        insights.Query.build(by, since)


def test_percentiles_come_from_the_bucket_holding_the_rank() -> None:
    hist = [0] * rollups.BUCKETS
    hist[rollups.bucket_of(100)] = 9
    hist[rollups.bucket_of(5000)] = 1
    assert 64 <= insights.percentile(hist, 0.5) < 128  # type: ignore[operator]
    assert 4096 <= insights.percentile(hist, 0.95) < 8192  # type: ignore[operator]
    assert insights.percentile([0] * rollups.BUCKETS, 0.5) is None



def _race(board: Any, title: str, entries: str, winner: int, *, fail: tuple[int, ...] = ()) -> str:
    """A race through the race verbs: started, each attempt's task run (those in ``fail`` crash
    once, then finish), settled, attempt ``winner`` picked."""
    tid = board.create(title, race=entries.split(","))["id"]
    races.settle(board.db, board.slug)
    for a in races.attempts(board.db, board.slug, tid)["attempts"]:
        at = a["attempt_task_id"]
        r = board.claim(at)["run_id"]
        if a["n"] in fail:
            board.fail(at, "crashed", run_id=r, error="boom")
            r = board.claim(at)["run_id"]
        board.complete(at, run_id=r, usage={"cost_usd": 0.1})
    races.settle(board.db, board.slug)
    races.pick(board.db, board.slug, tid, winner)
    assert board.show(tid)["status"] == "done"
    return tid


def test_races_entered_and_won_and_a_races_done_credit_the_picked_attempt(board: Any, ab: Any) -> None:
    ab.add_profile("alpha", command="true", model_name="m-a")
    ab.add_profile("beta", command="true", model_name="m-b")
    _race(board, "first race", "alpha,beta", 1)
    _race(board, "second race", "alpha,beta:m-x", 2, fail=(1,))
    _race(board, "third race", "alpha,alpha", 2)
    g = _groups(board, "profile")
    assert (g["alpha"]["races_entered"], g["alpha"]["races_won"]) == (4, 2)
    assert (g["beta"]["races_entered"], g["beta"]["races_won"]) == (2, 1)
    # the attempts' runs are their profiles' runs; the done tasks are the races, credited to the winners
    assert (g["alpha"]["runs"], g["beta"]["runs"]) == (5, 2)
    assert (g["alpha"]["tasks_done"], g["beta"]["tasks_done"]) == (2, 1)
    assert g["alpha"]["first_attempt_success_rate"] == pytest.approx(3 / 4)
    assert "" not in g  # no done race is left to nobody
    models = _groups(board, "model")
    assert (models["m-a"]["races_entered"], models["m-b"]["races_entered"]) == (4, 1)
    assert (models["m-x"]["races_won"], models["m-x"]["tasks_done"]) == (1, 1)
    tl = insights.read(board.db, board.slug, insights.Query.build("board", "1d"))["timeline"]
    # three races done; the attempts' own tasks are not the board's tasks done, nor in progress
    assert tl["tasks_done"] == 3 and tl["days"][-1]["work_in_progress"] == 0
    kept = _rollup_rows(board)
    insights.rebuild(board.db)
    assert _rollup_rows(board) == kept
