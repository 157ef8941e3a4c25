"""Property-based: random sequences of kernel verbs keep the kernel's invariants (docs/kernel.md).

After every step: running ⇔ exactly one open run ⇔ ``current_run_id`` set; no dependency
cycles; a ready task has all parents done/archived (and an assignee); event ids strictly
increase; every closed run has an outcome. A refused verb changes nothing.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, multiple, rule
from kernelkit import check_invariants, snapshot
from testenv import FAST

import agentboard
from agentboard.domain import states
from agentboard.domain.errors import Conflict, NotFound
from agentboard.kernel import comments, goals, links, profiles, queries, runs, tasks

B = "default"
NAMES = st.sampled_from(["alice", "bob", None])


_TEMPLATE: list[Path] = []


def _template() -> Path:
    """A migrated home, made once per session and copied for each example (migrating is slow)."""
    if not _TEMPLATE:
        folder = Path(tempfile.mkdtemp(prefix="ab-sm-template-"))
        atexit.register(shutil.rmtree, folder, True)  # gone with the test process
        agentboard.connect(str(folder)).close()
        _TEMPLATE.append(folder)
    return _TEMPLATE[0]


class KernelMachine(RuleBasedStateMachine):
    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="ab-sm-")
        shutil.copyfile(_template() / "agentboard.db", Path(self.dir) / "agentboard.db")
        self.client = agentboard.connect(self.dir)
        self.db = self.client.db
        self.cursor = 0
        self.goal = goals.create(self.db, B, "ship it")["id"]
        profiles.add(self.db, "alice", command="true")

    def teardown(self) -> None:
        self.client.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # a refused verb must leave the database as it was
    def _apply(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        before = snapshot(self.db)
        try:
            return fn(self.db, B, *args, **kwargs)
        except (Conflict, NotFound):
            assert snapshot(self.db) == before, f"refused {fn.__name__} changed the database"
            return None

    def _run_id(self, task_id: str) -> int | None:
        return self.db.read(lambda tx: tx.scalar("SELECT current_run_id FROM tasks WHERE id = :t", {"t": task_id}))

    @initialize(target=ids)
    def first(self) -> str:
        return tasks.create(self.db, B, "first", assignee="alice")["id"]

    @rule(target=ids, assignee=NAMES, parents=st.lists(ids, max_size=2, unique=True),
          triage=st.booleans(), in_goal=st.booleans(), review=st.booleans())
    def create(self, assignee: str | None, parents: list[str], triage: bool, in_goal: bool, review: bool) -> str:
        return str(tasks.create(self.db, B, "task", assignee=assignee, parents=parents, triage=triage,
                                goal=self.goal if in_goal else None, review=review)["id"])

    @rule(parent=ids, child=ids)
    def link(self, parent: str, child: str) -> None:
        if parent != child:
            self._apply(links.link, parent, child)

    @rule(parent=ids, child=ids)
    def unlink(self, parent: str, child: str) -> None:
        self._apply(links.unlink, parent, child)

    @rule(t=ids)
    def claim(self, t: str) -> None:
        self._apply(runs.claim, t)

    @rule(t=ids, stale=st.booleans())
    def heartbeat(self, t: str, stale: bool) -> None:
        rid = self._run_id(t)
        self._apply(runs.heartbeat, t, run_id=(rid or 0) + (1000 if stale else 0) if rid else None)

    @rule(t=ids, with_run=st.booleans())
    def complete(self, t: str, with_run: bool) -> None:
        rid = self._run_id(t) if with_run else None
        self._apply(runs.complete, t, summary="done", run_id=rid)

    @rule(t=ids)
    def block(self, t: str) -> None:
        self._apply(tasks.block, t, "waiting")

    @rule(t=ids)
    def unblock(self, t: str) -> None:
        self._apply(tasks.unblock, t)

    @rule(t=ids, outcome=st.sampled_from(["crashed", "timed_out", "protocol_violation", "rate_limited"]))
    def fail(self, t: str, outcome: str) -> None:
        self._apply(runs.fail, t, outcome, run_id=self._run_id(t), error="x")

    @rule(t=ids)
    def reclaim(self, t: str) -> None:
        self._apply(runs.reclaim, t)

    @rule(t=ids, verdict=st.sampled_from(["approved", "changes_requested", "rejected"]))
    def review(self, t: str, verdict: str) -> None:
        self._apply(runs.review, t, verdict, "feedback")

    @rule(t=ids)
    def archive(self, t: str) -> None:
        self._apply(tasks.archive, t)

    @rule(t=ids)
    def restore(self, t: str) -> None:
        self._apply(tasks.restore, t)

    @rule(t=ids)
    def reopen(self, t: str) -> None:
        self._apply(tasks.reopen, t)

    @rule(t=ids)
    def release(self, t: str) -> None:
        self._apply(tasks.release, t)

    @rule(t=ids, who=NAMES)
    def assign(self, t: str, who: str | None) -> None:
        self._apply(tasks.assign, t, who)

    @rule(t=ids, status=st.sampled_from(states.STATUSES))
    def drag(self, t: str, status: str) -> None:
        self._apply(tasks.set_status, t, status)

    @rule(target=ids, t=ids)
    def comment(self, t: str) -> Any:
        out = self._apply(comments.comment, t, "hello @alice and @nobody")
        if out is None:
            return multiple()
        assert out["skipped_mentions"] == ["nobody"] and len(out["spawned_subtasks"]) == 1
        return multiple(*out["spawned_subtasks"])

    @rule(t=ids, with_run=st.booleans())
    def request_review(self, t: str, with_run: bool) -> None:
        self._apply(runs.request_review, t, summary="look", run_id=self._run_id(t) if with_run else None)

    @rule(limit=st.integers(1, 3))
    def claim_next(self, limit: int) -> None:
        for r in runs.claim_next(self.db, B, limit=limit, assignees=["alice", "bob"]):
            assert r["claimed"] and r["assignee"] in ("alice", "bob")

    @rule(t=ids, who=NAMES)
    def reassign_running(self, t: str, who: str | None) -> None:
        self._apply(tasks.assign, t, who, reclaim=True)

    @rule(t=ids, goal=st.booleans())
    def move_goal(self, t: str, goal: bool) -> None:
        self._apply(tasks.edit, t, goal_id=self.goal if goal else "")

    @invariant()
    def invariants_hold(self) -> None:
        check_invariants(self.db)
        goals_of = self.db.read(lambda tx: tx.all("SELECT DISTINCT goal_id FROM tasks WHERE goal_id IS NOT NULL"))
        assert all(r["goal_id"] == self.goal for r in goals_of), goals_of

    @invariant()
    def events_strictly_increase(self) -> None:
        new = [e["id"] for e in queries.events_after(self.db, B, self.cursor, limit=100_000)]
        assert new == sorted(set(new)) and all(i > self.cursor for i in new)
        if new:
            self.cursor = new[-1]

    @invariant()
    def settled_goal_has_only_done_tasks(self) -> None:
        goal = goals.show(self.db, B, self.goal)
        live = [t for t in goal["tasks"] if t["status"] != states.ARCHIVED]
        if goal["status"] == "done":
            assert all(t["status"] == states.DONE for t in live), goal


#: 100 random sequences of 50 verbs in the full run (each run draws new ones, so runs over time
#: cover far more); AGENTBOARD_STATE_MACHINE_EXAMPLES asks for more, e.g. when hunting a bug
EXAMPLES = int(os.environ.get("AGENTBOARD_STATE_MACHINE_EXAMPLES", "20" if FAST else "100"))

KernelMachine.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestKernelMachine = KernelMachine.TestCase
