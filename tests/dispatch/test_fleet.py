"""A fleet of tasks over several profiles and every adapter, each done exactly once."""

from __future__ import annotations

import shlex
import time

from .conftest import FAKES, RESULT_OK, all_in, completed_runs, dump, events, open_runs, wait_for


def test_fleet_of_12_over_3_profiles_each_done_exactly_once(ab, board, dispatcher):
    ab.add_profile("alpha", command=RESULT_OK, max_concurrency=2)
    ab.add_profile("beta", command=RESULT_OK)
    # gamma reports through the worker verb instead of the file
    ab.add_profile("gamma", command="agentboard complete --summary 'gamma did it'")
    ids = [board.create(f"task {i}", assignee=("alpha", "beta", "gamma")[i % 3])["id"] for i in range(12)]
    dispatcher()
    wait_for(lambda: all_in(board, ids, {"done"}), what="all 12 tasks done")
    for tid in ids:
        assert completed_runs(ab.db, tid) == 1
        assert len(board.runs(tid)) == 1
    assert open_runs(ab.db) == 0
    summaries = {board.runs(t)[0]["summary"] for t in ids}
    assert "gamma did it" in summaries and any(s.startswith("did t_") for s in summaries)


def test_command_adapter_substitutes_placeholders_and_writes_the_prompt(ab, board, dispatcher, tmp_path):
    out = tmp_path / "seen.txt"
    cmd = ("sh -c " + shlex.quote(f"echo \"{{task_id}} {{run_id}} {{board}} {{workspace}}\" > {out}; "
                                   f"cp {{prompt_file}} {tmp_path}/prompt.md; "
                                   "echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json"))
    ab.add_profile("echoer", command=cmd)
    t = board.create("show me the placeholders", assignee="echoer")
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"done"}))
    run = board.runs(t["id"])[0]
    task_id, run_id, slug, ws = out.read_text().split()
    assert (task_id, int(run_id), slug) == (t["id"], run["id"], "default")
    assert ws == run["workspace_path"] and ws.endswith(f"/workspaces/{t['id']}")
    prompt = (tmp_path / "prompt.md").read_text()
    assert "show me the placeholders" in prompt
    assert "result.json" in prompt and "agentboard complete" in prompt and "kanban_complete" in prompt


def test_claude_adapter_with_fake_claude_code(ab, board, dispatcher):
    ab.add_profile("claude", adapter="claude", command=str(FAKES / "fake_claude"))
    t = board.create("write notes", assignee="claude")
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"done"}))
    wait_for(lambda: board.runs(t["id"])[0].get("cost_usd") is not None, what="usage recorded")
    run = board.runs(t["id"])[0]
    assert run["summary"] == "wrote notes.md"
    assert run["cost_usd"] == 0.0421
    assert run["input_tokens"] == 1200 and run["output_tokens"] == 345
    assert run["exit_code"] == 0
    ws = run["workspace_path"]
    assert (ab.home / "boards/default/workspaces" / t["id"] / "notes.md").exists() or ws
    log = (ab.home / "boards/default/logs" / f"{t['id']}.log").read_text()
    assert '"type": "result"' in log and '"mcp_servers": [{"name"' in log


def test_claude_usage_limit_blocks_the_task_until_its_cool_down_ends(ab, board, dispatcher):
    ab.add_profile("claude", adapter="claude", command=str(FAKES / "fake_claude"),
                   env={"FAKE_CLAUDE_MODE": "usage_limit"})
    t = board.create("hit the limit", assignee="claude")
    dispatcher(rate_limit_cooldown=3600)
    wait_for(lambda: board.runs(t["id"]) and board.runs(t["id"])[0]["outcome"] == "rate_limited")
    task = board.show(t["id"])
    task = task.get("task", task)
    assert (task["status"], task["block_kind"], task["consecutive_failures"]) == ("blocked", "rate_limited", 0)
    assert task["cooldown_until"] > time.time() + 3000
    assert len(board.runs(t["id"])) == 1  # not respawned during the cooldown


def test_codex_adapter_with_fake_codex(ab, board, dispatcher):
    ab.add_profile("codex", adapter="codex", command=str(FAKES / "fake_codex"), model_name="gpt-5-codex")
    t = board.create("answer", assignee="codex")
    dispatcher()
    wait_for(lambda: all_in(board, [t["id"]], {"done"}))
    run = board.runs(t["id"])[0]
    assert run["summary"] == "wrote answer.txt"
    assert run["input_tokens"] == 2048 and run["output_tokens"] == 256
    ws = ab.home / "boards/default/workspaces" / t["id"]
    assert (ws / "answer.txt").read_text() == f"answer for {t['id']}\n"
    assert dump(ws / ".board" / "result.json")["success"] is True


def test_a_full_host_skips_the_passes_of_changes_it_cannot_act_on_but_not_of_its_own_tasks(ab, board, dispatcher):
    from agentboard.dispatch.liveness import group_has_live

    ab.add_profile("long", command="sh -c 'sleep 300'")
    ab.add_profile("quick", command=RESULT_OK)
    long_id = board.create("hold the only slot", assignee="long")["id"]
    d = dispatcher(max_parallel=1, dispatch_interval=3600)
    wait_for(lambda: (board.show(long_id).get("worker_pid") or 0) > 0, what="the long task's worker started")
    pid = int(board.show(long_id)["worker_pid"])
    # new ready tasks: work this host has no room for; each wakes it, none is worth a pass
    waiting = []
    for i in range(4):
        skipped = d.skipped
        waiting.append(board.create(f"wait {i}", assignee="quick")["id"])
        wait_for(lambda s=skipped: d.skipped > s, what="the wake-up of a new ready task skipped")
        if i == 0:
            passes = d.passes  # the pass after its own spawn is behind it now
    assert d.passes == passes
    assert all_in(board, waiting, {"ready"})
    # its own task archived: a pass, which stops the worker and fills the freed slot
    board.archive(long_id)
    wait_for(lambda: not group_has_live(pid), what="the archived task's worker stopped")
    wait_for(lambda: all_in(board, waiting, {"done"}), what="the waiting tasks done one after another")
    assert d.passes > passes


def test_a_big_pass_records_its_first_workers_before_it_claims_the_last_tasks(ab, board, dispatcher):
    from collections import Counter

    from agentboard.dispatch.spawning import CLAIM_BATCH, FIRST_CLAIM

    ab.add_profile("w", command=RESULT_OK)
    # groups of 2, 8, then twice the one before: 2, 8, 16 and the 3 left
    n = FIRST_CLAIM + CLAIM_BATCH + 2 * CLAIM_BATCH + 3
    ids = [board.create(f"t{i}", assignee="w")["id"] for i in range(n)]
    d = dispatcher(start=False, max_parallel=n)
    report = d.run_pass()
    assert sorted(s["task"] for s in report["spawned"]) == sorted(ids)  # one pass starts them all
    claimed = [e for e in events(board, kind="claimed") if e["task_id"] in ids]
    spawned = [e for e in events(board, kind="spawned") if e["task_id"] in ids]
    assert len(claimed) == len(spawned) == n
    # a claim, its workers started and recorded, then the next claim: four of each (a group's
    # record sets its tasks' updated_at, one time per record)
    recorded = {t: board.show(t)["updated_at"] for t in ids}
    assert len({e["created_at"] for e in claimed}) == len(set(recorded.values())) == 4
    sizes = sorted(Counter(e["created_at"] for e in claimed).values())
    assert sizes == sorted([FIRST_CLAIM, CLAIM_BATCH, 2 * CLAIM_BATCH, 3])
    assert min(recorded.values()) < max(e["created_at"] for e in claimed)
    # each spawned event is timed when its worker's process started, which its record follows
    assert all(float(e["created_at"]) <= recorded[e["task_id"]] for e in spawned)
    assert len({e["created_at"] for e in spawned}) > 4
    d.start()
    wait_for(lambda: all_in(board, ids, {"done"}), what="every task done")


def test_a_host_running_many_workers_holds_a_handful_of_threads(ab, board, dispatcher):
    import threading

    # threads this test's dispatcher started (other tests of this process may leave theirs)
    before = set(threading.enumerate())

    def ours() -> list[str]:
        return sorted(t.name for t in threading.enumerate() if t.name.startswith("agentboard") and t not in before)

    ab.add_profile("sleeper", command="sh -c 'sleep 300'")
    ids = [board.create(f"work {i}", assignee="sleeper")["id"] for i in range(24)]
    d = dispatcher(max_parallel=24)
    wait_for(lambda: d.workers.running() == 24, what="24 workers running")
    # the pools' threads end once idle: what is left does not grow with the workers
    wait_for(lambda: not any(n.startswith(("agentboard-prepare", "agentboard-dispatch_")) for n in ours()),
             what="the pools' threads ended")
    assert len(ours()) < 10, ours()
    pids = [int(board.show(t)["worker_pid"]) for t in ids]
    for t in ids:
        board.archive(t)
    from agentboard.dispatch.liveness import group_has_live

    wait_for(lambda: not any(group_has_live(p) for p in pids), what="the archived tasks' workers stopped")


def test_stopping_dispatchers_leaves_none_of_their_threads_behind(ab, board, dispatcher):
    import threading

    from agentboard.api.serve import WorkerAPI, run_tokens
    from agentboard.dispatch.dispatcher import Dispatcher

    ab.add_profile("w", command=RESULT_OK)
    api = WorkerAPI(ab.settings, ab.db).start()
    before = set(threading.enumerate())

    def ours() -> list[str]:  # the dispatchers' (not the database's notifier, on PostgreSQL)
        return sorted(t.name for t in threading.enumerate() if t.name.startswith("agentboard")
                      and t.name != "agentboard-notify" and t not in before)

    try:
        for i in range(4):  # each starts a worker (so its exit watcher runs), then stops
            t = board.create(f"task {i}", assignee="w")
            d = Dispatcher(ab.db, ab.settings, api_url=api.url, token_factory=run_tokens(ab.db))
            d.start()
            wait_for(lambda t=t: all_in(board, [t["id"]], {"done"}), what=f"task {i} done")
            assert "agentboard-exits" in ours()
            d.stop()
            # the pools' idle threads end by themselves; the exit watcher and the loop at the stop
            assert not any(n in ("agentboard-exits", "agentboard-dispatcher", "agentboard-wake") for n in ours())
        wait_for(lambda: not any(n.startswith(("agentboard-prepare", "agentboard-dispatch_")) for n in ours()),
                 what="the pools' threads ended")
        assert ours() == []
    finally:
        api.stop()


def test_a_host_whose_first_candidates_another_host_took_fills_its_room_from_the_next(ab, board, dispatcher):
    from agentboard.dispatch.spawning import Choice
    from agentboard.kernel import boards as kboards
    from agentboard.kernel import dispatching as kd

    ab.add_profile("w", command=RESULT_OK)
    ids = [board.create(f"t{i}", assignee="w", priority=20 - i)["id"] for i in range(20)]
    d = dispatcher(start=False, max_parallel=6)
    profile = next(p for p in ab.profiles() if p["name"] == "w")
    chosen = [Choice(t, profile) for t in kd.ready_batch(ab.db, "default", 20)]
    # another host claims the 1st, 2nd, 4th and 7th of the queue just before this one does
    taken = [ids[0], ids[1], ids[3], ids[6]]
    assert len(kd.claim_batch(ab.db, "default", taken, host="elsewhere")) == 4
    res = d.spawner.spawn_batch(kboards.get(ab.db, "default"), chosen, want=6)
    mine = [c.task["id"] for c in res.claimed]
    assert mine == [ids[2], ids[4], ids[5], ids[7], ids[8], ids[9]]  # the next six, in order
    d.start()
    wait_for(lambda: all_in(board, mine, {"done"}), what="its six tasks done")
