"""The roads to done: one function per action, called by every surface.

The CLI, REST (single and bulk, so the dashboard too), MCP, the Python API, the reviewer agent
and the dispatcher finish a task through these functions and nothing else:

- :func:`review` / :func:`approve` — a verdict on a task in review; approval integrates;
- :func:`review_run` — a reviewer agent's verdict from its review run (a profile or the LLM),
  which closes the run: approval integrates the same way;
- :func:`complete` — a worker's report (with its run id: the kernel holds it for verification
  and integration) or a person closing a task (without one: the gates below);
- :func:`set_status` — the dashboard's move (bulk "Move to…", the Python API);
- :func:`update` — PATCH's edit + assign + status in one transaction;
- :func:`complete_verified` — the dispatcher, after a worker's exit and its verification;
- :func:`pick` — the winner of a race (``kernel.races``): its branch becomes the race's and is
  integrated like an approved task's. A race is finished only by a pick: approving it, or a
  person's done, is refused until one of its attempts is picked.

A person's move to done passes two gates before anything changes, and is refused (409, with
what to do) otherwise:

- **review** — a task that requires review is done only by approving it in review: done on a
  task in review *is* an approval; a running one goes to review (as its worker's report
  would); on any other task that requires review it is refused;
- **verification** — a task with checks (``verify`` commands) is done only when they passed
  after a worker's run (the dispatcher runs them, confined like the worker): a person's done
  on it is refused, saying so; clear the checks first to close it by hand. (A task in review has
  passed them already: its worker's report was verified before it entered review.)

Then the board's ``integrate`` setting (:mod:`.integrate`): approval integrates the branch of a
worktree task; a worktree task without review is integrated when it becomes done too (after
its verification), unless the board sets ``review_before_integrate`` (its branch is left, an
``integration_left`` event says so). The git work comes first, the kernel's transition
second, so done means integrated: a refused integration blocks a task in review or a worker's
verified run ``needs_input`` with the reason, and refuses a person's move with nothing changed.
The kernel enforces the order: its done transitions of a task whose branch is due for
integration refuse to run unless told ``integrated=True``.

Whatever the mode (``none`` included), what a worker left uncommitted in a worktree is committed
on the task's branch (:func:`_commit_pending`) before the task is done — by the dispatcher once
the worker has exited (a worker's report on a worktree task waits for that exit, in the kernel),
by an approval, by a race's pick — so a branch that is kept, and that the tasks after it start
from, holds the work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ..config import Settings
from ..domain import model, states
from ..domain.errors import Conflict, InvalidInput
from ..kernel import boards as kboards
from ..kernel import branches as kbranches
from ..kernel import dispatching as kd
from ..kernel import races as kraces
from ..kernel import runs, tasks
from ..kernel.common import done_gate
from ..protocol import review as review_rules
from ..store.engine import Database, Row
from . import branches, gitutil, integrate

#: a kernel transition to run once the gates passed (``integrated``: the branch is on the base)
Apply = Callable[[bool], Row]


class PickRefused(Conflict):
    """A race's pick refused because its attempt's branch could not be integrated: ``why``
    (the refusal, ending with how to try again), ``mode`` (the board's ``integrate``)."""

    def __init__(self, message: str, why: str, mode: str) -> None:
        super().__init__(message)
        self.why, self.mode = why, mode


def check_gates(db: Database, task: Row, *, fields: Mapping[str, Any] | None = None) -> None:
    """Refuse (:class:`Conflict`) a person's move of ``task`` (not in review) to done that would
    skip its review or its checks (``kernel.common.done_gate``); ``fields``: edits applied in
    the same request first."""
    why = done_gate(task, verify_enabled=bool(db.settings.verify), fields=dict(fields or {}))
    if why:
        raise Conflict(why)


def _integrate_or_refuse(db: Database, board: str, task: Row, settings: dict[str, Any], *,
                         again: str | None = None) -> integrate.Outcome | str:
    """Integrate ``task``'s branch as the board says: the outcome, or why it was refused
    (``again``: how to try again once that is fixed, ``integrate.integrate``)."""
    mode = str(settings.get("integrate"))
    repo = branches.repo_of(task)
    if repo is None:
        return f"it has no repository to {mode} its branch into"
    base = branches.board_base(repo, settings)
    try:
        return integrate.integrate(repo, task, mode, base, again=again)
    except integrate.Refused as exc:
        return f"{exc}"
    except gitutil.GitError as exc:
        return f"{exc}"


def _record(db: Database, board: str, task_id: str, out: Row, done: integrate.Outcome, mode: str,
            actor: str | None) -> Row:
    kbranches.record_integration(db, board, task_id, done.outcome, pr_url=done.pr_url,
                                 detail={"mode": mode, **done.detail}, actor=actor)
    return {**out, "integration": done.outcome, "pr_url": done.pr_url or out.get("pr_url")}


def _unpicked_race(db: Database, board: str, task: Row) -> None:
    """Refuse to finish a race none of whose attempts is picked."""
    if task.get("race_until") and kraces.is_unpicked_race(db, board, task["id"]):
        raise Conflict(f"task {task['id']} is a race: it is finished by picking the attempt that wins "
                       f"(`agentboard attempts {task['id']}`, then `agentboard pick {task['id']} N`)")


def _approve(db: Database, board: str, task: Row, apply: Apply, actor: str | None) -> Row:
    """Approve ``task`` (in review) through ``apply``: the branch first, then the verdict, then
    the outcome; a refusal blocks the task ``needs_input`` instead of approving it."""
    task_id = task["id"]
    # refused before any git work: a blocked task's branch must not land on the base unapproved
    states.check("approve", task["status"], states.DONE, task_id)
    _unpicked_race(db, board, task)
    if task.get("workspace_kind") != "worktree" or not task.get("branch_name"):
        return apply(False)
    settings = kboards.get(db, board).get("settings") or {}
    if kbranches.integration_due(task, settings, approval=True) != "integrate":
        # the branch stays, and is what the tasks after it start from: it holds what review saw
        _worker_gone(db, task)
        committed = _commit_pending(task, None, None)
        out = apply(False)
        kbranches.record_integration(db, board, task_id, "left", actor=actor, detail={
            "branch": task.get("branch_name"), **({"committed": committed} if committed else {})})
        return {**out, "integration": "left"}
    mode = str(settings.get("integrate"))
    _worker_gone(db, task)
    _commit_pending(task, None, None)
    done = _integrate_or_refuse(db, board, task, settings)
    if isinstance(done, str):
        return kbranches.refuse_integration(db, board, task_id, f"approval could not {mode} the branch: {done}",
                                            detail={"mode": mode}, actor=actor)
    return _record(db, board, task_id, apply(True), done, mode, actor)


#: seconds after its report that a worker still running may hold up an approval: the dispatcher
#: stops a worker that goes on after reporting within ``reaping.REPORTED_GRACE`` (30 s); past this,
#: one nobody recorded the exit of (its dispatcher gone) no longer does
WORKER_EXIT_WAIT = 120.0


def worker_still_running(db: Database, task_id: str) -> str | None:
    """Why the work of a task in review may still change (the worker that sent it there may
    still be running), or None. Known from the run (the dispatcher records its exit code when
    the process ends) and, for a worker on this host, from the process itself."""
    from .liveness import pid_alive

    run = runs.worker_of_review(db, task_id)
    if not run or not run.get("worker_pid") or run.get("exit_code") is not None or run.get("ended_at") is None:
        return None
    since = time.time() - float(run["ended_at"])
    if since > WORKER_EXIT_WAIT:
        return None
    if run.get("worker_host") == db.settings.host_id and not pid_alive(int(run["worker_pid"]),
                                                                       started_after=run.get("started_at")):
        return None
    return f"the worker of run {run['id']} is still running ({int(since)} s after its report)"


#: seconds an approval waits for the worker that sent its task to review to exit: one that
#: reported as its last act is gone within them, its exit recorded by its dispatcher
EXIT_WAIT = 5.0


def _worker_gone(db: Database, task: Row) -> None:
    """Refuse (:class:`Conflict`) to integrate the branch of a task in review while the worker
    that sent it there may still be running (after :data:`EXIT_WAIT` seconds for it to exit): what
    it commits after its report would land on the base branch unreviewed."""
    deadline = time.monotonic() + EXIT_WAIT
    while (why := worker_still_running(db, task["id"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    if why:
        raise Conflict(f"task {task['id']}: {why}; what it changes now would land unreviewed. Approve once it "
                       "has exited (the dispatcher stops it within 30 s of its report)")


def refused_approval(task: Row) -> bool:
    """``task`` is blocked because its approval could not integrate its branch: approving it
    again (or done) retries the integration, the work having been reviewed already."""
    return task.get("status") == states.BLOCKED and task.get("integration") == "refused"


def _retry_integration(db: Database, board: str, task: Row, apply: Apply, actor: str | None) -> Row:
    """Integrate the branch of a task whose approval's integration was refused (its blocker
    fixed), then done; refused again, nothing changes and the error says why."""
    settings = kboards.get(db, board).get("settings") or {}
    if kbranches.integration_due(task, settings, approval=True) != "integrate":
        return apply(False)
    mode = str(settings.get("integrate"))
    _commit_pending(task, None, None)
    done = _integrate_or_refuse(db, board, task, settings)
    if isinstance(done, str):
        raise Conflict(f"task {task['id']} stays blocked: its branch still could not be integrated ({mode}): {done}")
    return _record(db, board, task["id"], apply(True), done, mode, actor)


def to_done(db: Database, board: str, task_id: str, apply: Apply, *, actor: str | None = None,
            fields: Mapping[str, Any] | None = None, expected: str | None = None) -> Row:
    """A person's move of a task to done through ``apply`` (the kernel transition): an approval
    for a task in review; otherwise the gates (:func:`check_gates`), then the branch's
    integration when it is due, then the move. ``expected``: the status the person saw; a task
    that has left it is refused before any git work (the kernel checks it again in its
    transaction)."""
    task = kd.task(db, board, task_id)
    tasks.expect_status(task, expected)
    status = task["status"]
    if status == states.REVIEW:
        return _approve(db, board, task, apply, actor)
    if status == states.DONE or not states.can("complete", status):
        return apply(False)  # nothing to do, or the kernel says why it cannot
    _unpicked_race(db, board, task)
    check_gates(db, task, fields=fields)
    if refused_approval(task):
        return _retry_integration(db, board, task, apply, actor)
    if task.get("review_required"):
        return apply(False)  # running → review (the kernel's complete)
    settings = kboards.get(db, board).get("settings") or {}
    if kbranches.integration_due(task, settings) != "integrate":
        return apply(False)
    mode = str(settings.get("integrate"))
    done = _integrate_or_refuse(db, board, task, settings)
    if isinstance(done, str):
        raise Conflict(f"task {task_id} was not moved to done: the board integrates finished work ({mode}), "
                       f"and its branch could not be integrated: {done}")
    return _record(db, board, task_id, apply(True), done, mode, actor)


# -- the actions -------------------------------------------------------------------------------


def review(db: Database, board: str, task_id: str, verdict: str, text: str = "", *, reviewer: str | None = None,
           score: int | None = None, findings: list[Any] | None = None, actor: str | None = None) -> Row:
    """A person's verdict on a task in review (CLI, REST, chat); approval integrates. Its text
    (a rejection's or a request for changes' reason) holds no terminal controls, as a block's
    reason does not."""
    model.plain(text or "", "review text")

    def apply(integrated: bool) -> Row:
        return runs.review(db, board, task_id, verdict, text, reviewer=reviewer, score=score, findings=findings,
                           actor=actor, integrated=integrated)

    if verdict != "approved":
        return apply(False)
    task = kd.task(db, board, task_id)
    if refused_approval(task):  # approved already; its merge was refused: retried now
        return complete(db, board, task_id, summary=text or None, actor=actor)
    return _approve(db, board, task, apply, actor)


def review_run(db: Database, board: str, task_id: str, run_id: int, v: runs.Verdict, *,
               actor: str | None = None, usage: dict[str, Any] | None = None) -> Row:
    """The verdict ``v`` of review run ``run_id`` (a reviewer profile's or the LLM's), applied
    and the run closed; an approval integrates the branch first, as :func:`review` does. A
    refused integration blocks the task ``needs_input`` (the answer's status says so) and the
    run is closed as reviewed, its verdict kept on it."""
    def apply(integrated: bool) -> Row:
        return runs.review_run_verdict(db, board, task_id, run_id, v, actor=actor, usage=usage,
                                       integrated=integrated)

    if v.verdict != "approved":
        return apply(False)
    out = _approve(db, board, kd.task(db, board, task_id), apply, actor)
    if out.get("status") != states.DONE:  # the branch could not be integrated: the task is blocked
        runs.close_review_run(db, board, task_id, run_id, "reviewed", usage=usage, verdict=v)
    return out


def review_entered(db: Database, settings: Settings, board: str, task_id: str) -> Row:
    """A task has landed in review: run its board's reviewer (``protocol.review.on_review_entered``),
    a heuristic verdict applied through :func:`review` — the one road to done, which integrates.
    While the worker that sent it is still running, nothing yet: its work may still change, and the
    dispatcher hands it off once the worker has exited (``reaping.Reaper.review_entry``)."""
    if why := worker_still_running(db, task_id):
        return {"action": "waits_for_the_worker", "reason": why}
    return review_rules.on_review_entered(db, settings, board, task_id, apply=review)


def apply_verdict(db: Database, board: str, task_id: str, verdict: dict[str, Any], *,
                  reviewer: str = "reviewer-agent", actor: str | None = None) -> Row:
    """A reviewer agent's verdict (``review-verdict.json``), checked, applied through :func:`review`."""
    return review_rules.apply_verdict(db, board, task_id, verdict, apply=review, reviewer=reviewer, actor=actor)


def approve(db: Database, board: str, task_id: str, *, text: str = "", actor: str | None = None) -> Row:
    """Approve a task in review: its branch is integrated as the board says, then it is done."""
    return review(db, board, task_id, "approved", text, actor=actor)


def complete(db: Database, board: str, task_id: str, *, summary: str | None = None,
             metadata: dict[str, Any] | None = None, result: str | None = None,
             usage: dict[str, Any] | None = None, run_id: int | None = None, actor: str | None = None,
             worker: bool = False) -> Row:
    """Finish a task. With ``run_id`` (a worker's report on its own run): the kernel's complete,
    held until the dispatcher has verified and integrated it (``worker``: the report comes
    through the worker's run token). Without (a person): done through the review gate (a task
    in review is approved), the verification gate and integration."""
    if run_id is not None:
        if ((worker or summary is not None) and not (summary or "").strip()
                and not (result or "").strip()):
            # what the hand-off to the tasks after it says: a worker says it, as the MCP tool and
            # result.json make it (a run claimed by hand may close without one)
            raise InvalidInput("summary is empty: say what was done (or give a result line)")
        return runs.complete(db, board, task_id, summary=summary, metadata=metadata, result=result, usage=usage,
                             run_id=run_id, actor=actor, await_spawn=worker)
    task = kd.task(db, board, task_id)
    if task["status"] == states.REVIEW:
        return approve(db, board, task_id, text=summary or "", actor=actor)

    def apply(integrated: bool) -> Row:
        return runs.complete(db, board, task_id, summary=summary, metadata=metadata, result=result, usage=usage,
                             actor=actor, integrated=integrated)

    return to_done(db, board, task_id, apply, actor=actor)


def set_status(db: Database, board: str, task_id: str, status: str, *, reason: str | None = None,
               actor: str | None = None, expected: str | None = None) -> Row:
    """Move a task to ``status`` through the verb that reaches it; done passes :func:`to_done`.
    ``expected``: the status the person saw (``kernel.tasks.set_status``)."""
    def apply(integrated: bool) -> Row:
        return tasks.set_status(db, board, task_id, status, reason=reason, actor=actor, integrated=integrated,
                                expected=expected)

    if status != states.DONE:
        return apply(False)
    return to_done(db, board, task_id, apply, actor=actor, expected=expected)


def update(db: Database, board: str, task_id: str, *, fields: Mapping[str, Any] | None = None, assign: bool = False,
           assignee: str | None = None, status: str | None = None, reason: str | None = None,
           actor: str | None = None, expected: str | None = None) -> Row:
    """Edit, reassign and move in one transaction (``kernel.tasks.update``); done passes
    :func:`to_done` (with the edits of the same request taken into account). ``expected``: the
    status the person saw; a task that has left it is refused with nothing changed."""
    def apply(integrated: bool) -> Row:
        return tasks.update(db, board, task_id, fields=fields, assign=assign, assignee=assignee, status=status,
                            reason=reason, actor=actor, integrated=integrated, expected=expected)

    if status != states.DONE:
        return apply(False)
    return to_done(db, board, task_id, apply, actor=actor, fields=fields, expected=expected)


def complete_verified(db: Database, board: str, task_id: str, *, run_id: int, summary: str | None = None,
                      metadata: dict[str, Any] | None = None, result: str | None = None,
                      usage: dict[str, Any] | None = None, actor: str | None = None,
                      exit_code: int | None = None) -> Row:
    """The dispatcher's completion of a worker's verified success (``protocol.lifecycle``), its
    worker gone: what it left uncommitted in a worktree is committed on the task's branch (whatever
    the board's ``integrate``); a worktree task without review whose board integrates has its
    branch integrated first; a refusal closes the run and blocks the task ``needs_input`` with
    the reason."""
    task = kd.task(db, board, task_id)
    committed = _commit_pending(task, summary, run_id)
    if committed:
        metadata = {**(metadata or {}), "committed": committed}

    def apply(integrated: bool) -> Row:
        return runs.complete(db, board, task_id, summary=summary, metadata=metadata, result=result, usage=usage,
                             run_id=run_id, actor=actor, verified=True, exit_code=exit_code, integrated=integrated)

    if task.get("workspace_kind") != "worktree" or task.get("review_required"):
        return apply(False)
    settings = kboards.get(db, board).get("settings") or {}
    if kbranches.integration_due(task, settings) != "integrate":
        return apply(False)
    if task["status"] != states.RUNNING or task.get("current_run_id") != run_id:
        return apply(False)  # the kernel says the run is stale
    mode = str(settings.get("integrate"))
    done = _integrate_or_refuse(db, board, task, settings)
    if isinstance(done, str):
        return tasks.refuse_integration(db, board, task_id, f"the work is done but could not be integrated ({mode}): "
                                        f"{done}", run_id=run_id, detail={"mode": mode}, actor="dispatcher")
    return _record(db, board, task_id, apply(True), done, mode, "dispatcher")


def _commit_pending(task: Row, summary: str | None, run_id: int | None, *,
                    when: str = "left uncommitted, as its review saw it") -> dict[str, Any] | None:
    """What the worker of a worktree task left uncommitted, committed on its branch
    (``integrate.commit_pending``): once it has exited, before its verified success is recorded
    (``run_id``: the run, still current), or before its approval (or a race's pick, ``when``
    saying so) integrates or keeps the branch (None: what review saw). Review, integration and
    the tasks that start from the branch then see it hold what the checks passed."""
    repo = branches.repo_of(task) if task.get("workspace_kind") == "worktree" else None
    if repo is None or (run_id is not None and (task.get("status") != states.RUNNING
                                                or task.get("current_run_id") != run_id)):
        return None
    text = (summary or task.get("result") or "").strip()
    head = text.splitlines()[0][:72] if text else str(task.get("title") or task["id"])
    if run_id is not None:
        when = f"(run {run_id}) left uncommitted when it exited, its success accepted"
    return integrate.commit_pending(repo, task, f"{head}\n\nWhat the worker of {task['id']} {when}, "
                                    "committed by agentboard.")


def pick(db: Database, board: str, task_id: str, n: int, *, actor: str | None = None,
         again: str | None = None) -> Row:
    """Pick attempt ``n`` as the winner of race ``task_id`` — the one function behind ``agentboard
    pick``, ``POST /api/tasks/{id}/pick``, the dashboard, MCP and a ``first-pass`` race's
    dispatcher. The attempt's branch becomes the race's branch and is integrated as the board
    says (like an approval) before the race is done; a race that requires review (or a board
    that integrates reviewed tasks only) picked while running goes to review with its pick, and
    its approval integrates. What the attempt's worker left uncommitted is committed on its
    branch first, as an approval does. A refused integration changes nothing and says why and
    how to try again (``again``; default: pick it again)."""
    race = kraces.check_pick(db, board, task_id, int(n))
    att = race["attempt"]
    own = att.get("task") or {}
    settings = kboards.get(db, board).get("settings") or {}
    view = {**race, "race_until": None, "branch_name": own.get("branch_name") or att["branch"],
            "workspace_kind": own.get("workspace_kind") or race.get("workspace_kind"),
            "workspace_path": own.get("workspace_path") or race.get("workspace_path"),
            "result": att.get("summary") or race.get("result")}
    running = race["status"] == states.RUNNING
    to_review = running and (bool(race.get("review_required")) or kbranches.integration_due(view, settings) == "left")
    if view.get("workspace_kind") == "worktree" and view.get("branch_name"):
        _commit_pending({**view, "id": own.get("id") or task_id}, None, None,
                        when="left uncommitted, as the race's pick saw it")

    def apply(integrated: bool) -> Row:
        return kraces.pick(db, board, task_id, int(n), integrated=integrated, to_review=to_review, actor=actor)

    if to_review or kbranches.integration_due(view, settings, approval=True) != "integrate":
        out = apply(False)
        if not to_review and view.get("workspace_kind") == "worktree" and view.get("branch_name"):
            kbranches.record_integration(db, board, task_id, "left", detail={"branch": view["branch_name"]},
                                         actor=actor)
            out = {**out, "integration": "left"}
        return out
    mode = str(settings.get("integrate"))
    done = _integrate_or_refuse(db, board, view, settings,
                                again=again or f"pick it again (`agentboard pick {task_id} {n}`)")
    if isinstance(done, str):
        raise PickRefused(f"attempt {n} of race {task_id} was not picked: the board integrates finished work "
                          f"({mode}), and its branch could not be integrated: {done}", done, mode)
    return _record(db, board, task_id, apply(True), done, mode, actor)


__all__ = ["PickRefused", "approve", "check_gates", "complete", "complete_verified", "pick", "review", "set_status",
           "to_done", "update"]
