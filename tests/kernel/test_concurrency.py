"""Claim races across threads and processes, many writers on one SQLite home, kill -9 mid-write."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pytest
from kernelkit import check_invariants

import agentboard
from agentboard.domain.errors import Conflict, NotFound
from agentboard.kernel import comments, links, queries, runs, tasks

FORK = mp.get_context("fork")


def _target(ab: Any, backend: str) -> str:
    """What a separate process passes to ``agentboard.connect`` to open the same database."""
    return str(ab.settings.home) if backend.startswith("sqlite") else backend


def _open_runs(db: Any, task_id: str) -> int:
    return int(db.read(lambda tx: tx.scalar(
        "SELECT COUNT(*) FROM task_runs WHERE task_id = :t AND status = 'open'", {"t": task_id})))


# -- claim races ------------------------------------------------------------------------------------


def test_eight_threads_claim_one_task(ab: Any) -> None:
    board = ab.board()
    t = board.create("contended", assignee="w")
    barrier = threading.Barrier(8)
    wins: list[dict[str, Any]] = []
    losses: list[Exception] = []
    errors: list[BaseException] = []

    def claimer() -> None:
        barrier.wait()
        try:
            wins.append(runs.claim(ab.db, "default", t["id"]))
        except Conflict as exc:
            losses.append(exc)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=claimer) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert len(wins) == 1 and len(losses) == 7
    assert _open_runs(ab.db, t["id"]) == 1
    assert board.show(t["id"])["current_run_id"] == wins[0]["run_id"]
    check_invariants(ab.db)


def _claim_in_process(target: str, task_id: str, barrier: Any, out: Any) -> None:
    try:
        client = agentboard.connect(target)
        barrier.wait()
        try:
            run = runs.claim(client.db, "default", task_id)
            out.put(("won", run["run_id"]))
        except Conflict:
            out.put(("lost", None))
        client.close()
    except BaseException as exc:  # pragma: no cover - reported by the parent
        out.put(("error", repr(exc)))


def test_eight_processes_claim_one_task(ab: Any, backend: str) -> None:
    t = ab.board().create("contended across processes", assignee="w")
    barrier = FORK.Barrier(8)
    out = FORK.Queue()
    procs = [FORK.Process(target=_claim_in_process, args=(_target(ab, backend), t["id"], barrier, out))
             for _ in range(8)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    assert [r for r in results if r[0] == "error"] == []
    assert sorted(r[0] for r in results) == ["lost"] * 7 + ["won"]
    assert _open_runs(ab.db, t["id"]) == 1
    check_invariants(ab.db)


def _claim_next_in_process(target: str, barrier: Any, out: Any) -> None:
    try:
        client = agentboard.connect(target)
        barrier.wait()
        got = []
        while True:
            batch = runs.claim_next(client.db, "default", limit=2)
            if not batch:
                break
            got.extend(r["id"] for r in batch)
        out.put(("ok", got))
        client.close()
    except BaseException:  # pragma: no cover - reported by the parent
        out.put(("error", traceback.format_exc()))


def test_competing_dispatchers_claim_each_task_once(ab: Any, backend: str) -> None:
    board = ab.board()
    ids = {board.create(f"job {i}", assignee="w")["id"] for i in range(40)}
    barrier = FORK.Barrier(4)
    out = FORK.Queue()
    procs = [FORK.Process(target=_claim_next_in_process, args=(_target(ab, backend), barrier, out)) for _ in range(4)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    assert [r for r in results if r[0] == "error"] == []
    claimed = [i for _, got in results for i in got]
    assert sorted(claimed) == sorted(ids), "every task claimed exactly once"
    check_invariants(ab.db)


# -- many writers on one SQLite home ------------------------------------------------------------------

EXPECTED = (Conflict, NotFound)


def _random_writer(home: str, seed: int, n_ops: int, out: Any) -> None:
    rng = random.Random(seed)
    unexpected: list[str] = []
    counts: dict[str, int] = {}
    try:
        client = agentboard.connect(home)
        db = client.db
        mine: list[tuple[str, int]] = []  # (task, run) this process holds
        known: list[str] = []

        def pick() -> str | None:
            return rng.choice(known) if known else None

        for i in range(n_ops):
            if i % 25 == 0:
                known = [t["id"] for t in queries.list_tasks(db, "default", include_archived=True, limit=400)]
            op = rng.choice(("create", "create", "link", "claim", "claim", "heartbeat", "complete", "complete",
                             "block", "unblock", "reclaim", "comment", "archive", "restore", "reopen", "crash"))
            try:
                if op == "create":
                    parents = [p for p in {pick(), pick()} if p and rng.random() < 0.3]
                    t = tasks.create(db, "default", f"p{seed} op{i}", assignee=rng.choice(("a", "b", None)),
                                     parents=parents)
                    known.append(t["id"])
                elif op == "link":
                    p, c = pick(), pick()
                    if p and c and p != c:
                        links.link(db, "default", p, c)
                elif op == "claim":
                    for r in runs.claim_next(db, "default", limit=1):
                        mine.append((r["id"], r["run_id"]))
                elif op == "heartbeat" and mine:
                    t_id, r_id = rng.choice(mine)
                    runs.heartbeat(db, "default", t_id, run_id=r_id)
                elif op == "complete" and mine:
                    t_id, r_id = mine.pop(rng.randrange(len(mine)))
                    runs.complete(db, "default", t_id, summary=f"done by {seed}", run_id=r_id)
                elif op == "crash" and mine:
                    t_id, r_id = mine.pop(rng.randrange(len(mine)))
                    runs.fail(db, "default", t_id, "crashed", run_id=r_id, error="boom")
                elif op == "block" and (t_id := pick()):
                    tasks.block(db, "default", t_id, "needs input")
                elif op == "unblock" and (t_id := pick()):
                    tasks.unblock(db, "default", t_id)
                elif op == "reclaim" and (t_id := pick()):
                    runs.reclaim(db, "default", t_id)
                elif op == "comment" and (t_id := pick()):
                    comments.comment(db, "default", t_id, f"note from {seed}")
                elif op == "archive" and (t_id := pick()):
                    tasks.archive(db, "default", t_id)
                elif op == "restore" and (t_id := pick()):
                    tasks.restore(db, "default", t_id)
                elif op == "reopen" and (t_id := pick()):
                    tasks.reopen(db, "default", t_id)
                counts[op] = counts.get(op, 0) + 1
            except EXPECTED:
                counts["refused"] = counts.get("refused", 0) + 1
            except Exception:
                unexpected.append(f"{op}: {traceback.format_exc()}")
        client.close()
    except BaseException:  # pragma: no cover
        unexpected.append(traceback.format_exc())
    out.put((seed, unexpected, counts))


@pytest.mark.stress
def test_sixteen_processes_random_operations_keep_every_invariant(home: Path) -> None:
    client = agentboard.connect(str(home))
    for i in range(20):
        tasks.create(client.db, "default", f"seed {i}", assignee="a")
    out = FORK.Queue()
    procs = [FORK.Process(target=_random_writer, args=(str(home), seed, 200, out)) for seed in range(16)]
    for p in procs:
        p.start()
    results = [out.get(timeout=280) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    problems = [u for _, unexpected, _ in results for u in unexpected]
    assert problems == [], "\n".join(problems[:5])
    done = sum(c.get("complete", 0) for _, _, c in results)
    print({k: sum(c.get(k, 0) for _, _, c in results) for k in ("create", "claim", "complete", "refused")})
    assert done > 0, "the workload completed nothing"
    check_invariants(client.db)
    events = [e["id"] for e in queries.events_after(client.db, None, 0, limit=1_000_000)]
    assert events == sorted(set(events))
    client.close()


# -- kill -9 a writer mid-transaction ------------------------------------------------------------------

_WRITER = textwrap.dedent("""
    import sys, time
    import agentboard
    from agentboard.kernel import tasks
    client = agentboard.connect(sys.argv[1])
    mode = sys.argv[2]
    if mode == "hold":
        def big(tx):
            for i in range(3000):
                tasks.create_in(tx, tasks.NewTask(board="default", title=f"uncommitted {i}", body="x" * 2000,
                                                  assignee="w", check_board=False))
            print("inside", flush=True)
            time.sleep(60)
        client.db.write(big)
    else:
        print("inside", flush=True)
        i = 0
        while True:
            tasks.create(client.db, "default", f"loop {i}", body="y" * 5000, assignee="w")
            i += 1
""")


@pytest.mark.parametrize("mode", ["hold", "loop"])
def test_kill_9_mid_transaction_leaves_a_sound_database(home: Path, mode: str) -> None:
    client = agentboard.connect(str(home))
    before = len(queries.list_tasks(client.db, "default", limit=100_000))
    rng = random.Random(7)
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(home), mode], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "inside"
        if mode == "loop":
            time.sleep(rng.uniform(0.05, 0.4))  # let it commit some and die somewhere inside a write
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    conn = sqlite3.connect(home / "agentboard.db")
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    after = queries.list_tasks(client.db, "default", limit=100_000)
    if mode == "hold":
        assert len(after) == before, "an uncommitted transaction left rows behind"
    # the killed writer's lock is gone: a new write goes through
    t = tasks.create(client.db, "default", "after the crash", assignee="w")
    assert runs.claim(client.db, "default", t["id"])["claimed"]
    check_invariants(client.db)
    client.close()
