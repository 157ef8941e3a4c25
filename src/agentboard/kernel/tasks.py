"""Task verbs: create, release, edit, assign, block, unblock, archive, restore, reopen, set_status."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Unpack

from ..domain import model, states, task_fields
from ..domain.errors import AgentboardError, Conflict, InvalidInput, NotFound
from ..domain.notify_targets import mask as mask_target
from ..domain.task_fields import NewTaskFields
from ..store.engine import EVENT_COLUMNS, Database, Row, Tx, dump_json
from . import budgets, hooks
from .branches import check_worktree_task
from .common import (
    default_assignee,
    get_task,
    pending_parents,
    ready_or_todo,
    task_out,
    usable_board,
)
from .flow import after_satisfied, demote_ready_children, promote_children, reopen_goal, settle_goal
from .host_access import checked_verify, decoded_verify, placed
from .links import cycle_path
from .notifications import auto_subscribe_in
from .runs import (
    Report,
    Verdict,
    complete_in,
    reclaim_in,
    request_review_in,
    return_to_queue,
    review_in,
    stale_error,
)

_model = model  # the module, where a parameter named ``model`` (a task's model) hides it

_INSERT_TASK = (
    "INSERT INTO tasks (id, board, title, body, assignee, status, priority, tenant, goal_id, "
    "created_by, created_at, updated_at, workspace_kind, workspace_path, branch_name, "
    "idempotency_key, skills, max_runtime_seconds, max_retries, review_required, verify, model, "
    "consecutive_failures, protocol_violations, rework_count, block_kind, block_reason, not_before) "
    "VALUES (:id, :board, :title, :body, :assignee, :status, :priority, :tenant, :goal_id, "
    ":created_by, :now, :now, :workspace_kind, :workspace_path, :branch_name, :idem, :skills, "
    ":max_runtime, :max_retries, :review, :verify, :model, 0, 0, 0, :block_kind, :block_reason, :not_before) "
    "ON CONFLICT (id) DO NOTHING"
)
#: PostgreSQL: the insert is not read back (a task id taken already — one chance in 2^32 — fails
#: the transaction with a unique violation, and the verb runs again with a new id)
_INSERT_TASK_PG = _INSERT_TASK[: _INSERT_TASK.index(" ON CONFLICT")]
#: PostgreSQL: the insert and its ``created`` event in one statement
_INSERT_TASK_WITH_EVENT_PG = (
    f"WITH i AS ({_INSERT_TASK_PG} RETURNING id) INSERT INTO task_events {EVENT_COLUMNS} "
    "SELECT :board, i.id, NULL, 'created', :payload, :created_by, :now FROM i"
)

#: the board a task is created on, and whether its assignee names a profile, in one read
_BOARD_FOR_CREATE = (
    "SELECT b.archived, EXISTS (SELECT 1 FROM profiles WHERE name = :a) AS assignee_known "
    "FROM boards b WHERE b.slug = :b"
)


@dataclass(frozen=True)
class NewTask:
    """A task to create, already checked and normalized (build it with :meth:`build`).

    A create that must run again (two creators racing on one idempotency key) re-runs
    :func:`create_in` with the same record, so both attempts insert exactly the same values.
    """

    board: str
    title: str
    body: str = ""
    assignee: str | None = None
    parents: tuple[str, ...] = ()
    tenant: str | None = None
    goal: str | None = None
    priority: int = 0
    triage: bool = False
    workspace_kind: str = "scratch"
    workspace_path: str | None = None
    branch: str | None = None
    idempotency_key: str | None = None
    max_runtime: int | None = None
    max_retries: int | None = None
    skills: tuple[str, ...] = ()
    review: bool = False
    verify: tuple[str, ...] = ()
    actor: str | None = None
    check_board: bool = True
    #: the task waits in todo until this time (epoch seconds)
    not_before: float | None = None
    #: the model the agent CLI runs this task with (None: the profile's)
    model: str | None = None

    @classmethod
    def build(cls, board: str, title: str, *, actor: str | None = None, check_board: bool = True,
              **fields: Unpack[NewTaskFields]) -> NewTask:
        """Check and normalize what a caller gave :func:`create` through the one table of
        new-task fields (:mod:`agentboard.domain.task_fields`; raises ``InvalidInput``)."""
        given = task_fields.checked({"title": title, **fields})
        ws_kind, ws_path = _model.workspace(given.get("workspace"))
        return cls(
            board=board,
            title=given["title"],
            body=given.get("body") or "",
            assignee=given.get("assignee"),
            parents=given.get("parents") or (),
            tenant=given.get("tenant"),
            goal=given.get("goal"),
            priority=given.get("priority") or 0,
            triage=bool(given.get("triage")),
            workspace_kind=ws_kind,
            workspace_path=ws_path,
            branch=given.get("branch"),
            idempotency_key=given.get("idempotency_key"),
            max_runtime=given.get("max_runtime"),
            max_retries=given.get("max_retries"),
            skills=given.get("skills") or (),
            review=bool(given.get("review")),
            verify=given.get("verify") or (),
            actor=actor,
            check_board=check_board,
            not_before=given.get("not_before"),
            model=given.get("model"),
        )


def _assignee_warning(tx: Tx, assignee: str | None, known: bool | None = None) -> dict[str, Any]:
    """``{"warnings": [...]}`` when a task is assigned to a name that is no profile (the
    dispatcher never starts it until one is added; a person may still do it). ``known``: the
    caller has looked the name up already."""
    if not assignee or known:
        return {}
    if known is None and tx.one("SELECT name FROM profiles WHERE name = :n", {"n": assignee}) is not None:
        return {}
    # (the did-you-mean of a typo is the CLI's: reading every profile here would cost a round trip)
    return {"warnings": [f"no profile named {assignee!r}: the dispatcher will not start this task until one is "
                         f"added (agentboard profiles add {assignee} --command ...); fine if a person does it"]}


def create_in(tx: Tx, new: NewTask) -> Row:
    """Create ``new`` inside the caller's transaction (or return the task already holding its
    idempotency key, with ``existing: True``)."""
    board = new.board
    known: bool | None = None  # whether new.assignee names a profile (None: not looked up)
    if new.check_board:
        row = usable_board(tx.one(_BOARD_FOR_CREATE, {"b": board, "a": new.assignee or ""}), board)
        known = bool(row["assignee_known"]) if new.assignee else None
    checked_verify(tx, board, new.verify)
    workspace_kind, workspace_path = placed(tx, board, new.workspace_kind, new.workspace_path)
    if workspace_kind == "worktree":
        check_worktree_task(tx, board, workspace_path)
    if new.idempotency_key:
        existing = tx.one(
            "SELECT * FROM tasks WHERE board = :b AND idempotency_key = :k AND status != 'archived'",
            {"b": board, "k": new.idempotency_key},
        )
        if existing is not None:
            out = task_out(existing)
            out["existing"] = True
            return out
    if new.goal:
        g = tx.one("SELECT status FROM goals WHERE id = :g AND board = :b", {"g": new.goal, "b": board})
        if g is None:
            raise NotFound(f"no goal {new.goal} on board {board!r}")
        goal_done = g["status"] in ("done", "verifying")
    else:
        goal_done = False
    pending: list[str] = []
    # PostgreSQL: a parent completing at the same time waits for this task to exist (and then
    # promotes it), instead of missing it
    share = " FOR SHARE" if tx.db.dialect == "postgresql" else ""
    for pid in new.parents:
        p = tx.one("SELECT status FROM tasks WHERE id = :id AND board = :b" + share, {"id": pid, "b": board})
        if p is None:
            other = tx.one("SELECT board FROM tasks WHERE id = :id", {"id": pid})
            if other is not None:
                raise InvalidInput(f"parent {pid} is on board {other['board']!r}: links across boards are refused")
            raise NotFound(f"no parent task {pid} on board {board!r}")
        if p["status"] not in states.SATISFIED:
            pending.append(pid)
    assignee = new.assignee
    if not assignee and not new.triage:
        assignee = default_assignee(tx, board)
    if new.triage:
        status = states.TRIAGE
    elif pending or not assignee or (new.not_before is not None and new.not_before > time.time()):
        status = states.TODO
    else:
        status = states.READY
    states.check("create", None, status)
    now = time.time()
    skills = list(new.skills)
    verify = list(new.verify)
    parents = list(new.parents)
    params: dict[str, Any] = {
        "board": board,
        "title": new.title,
        "body": new.body,
        "assignee": assignee,
        "status": status,
        "priority": new.priority,
        "tenant": new.tenant,
        "goal_id": new.goal,
        "created_by": new.actor,
        "now": now,
        "workspace_kind": workspace_kind,
        "workspace_path": workspace_path,
        "branch_name": new.branch,
        "idem": new.idempotency_key,
        "skills": dump_json(skills),
        "max_runtime": new.max_runtime,
        "max_retries": new.max_retries,
        "review": 1 if new.review else 0,
        "verify": dump_json(verify),
        "model": new.model,
        "block_kind": None,
        "block_reason": None,
        "not_before": new.not_before,
    }
    created = {"assignee": assignee, "status": status, "parents": parents, "tenant": new.tenant, "title": new.title,
               **({"not_before": new.not_before} if new.not_before is not None else {})}
    for _ in range(20):
        params["id"] = model.new_task_id()
        if tx.db.dialect == "postgresql":
            tx.execute(_INSERT_TASK_WITH_EVENT_PG, {**params, "payload": dump_json(created)})
            tx.events_written(board)
            break
        tx.execute(_INSERT_TASK, params)
        if tx.rowcount == 1:
            tx.event(board, params["id"], "created", created, actor=new.actor, at=now)
            break
    else:  # pragma: no cover - 20 collisions in a 2^32 space
        raise Conflict("could not allocate a task id; try again")
    task_id = params["id"]
    if goal_done:
        reopen_goal(tx, new.goal)
    if parents:
        tx.executemany(
            "INSERT INTO task_links (parent_id, child_id, board, created_at) VALUES (:p, :c, :b, :now)",
            [{"p": p, "c": task_id, "b": board, "now": now} for p in dict.fromkeys(parents)],
        )
    if tx.db.settings.notify_default:
        auto_subscribe_in(tx, board, task_id, [(t, mask_target(t)) for t in tx.db.settings.notify_default],
                          new.actor)
    return {
        "id": task_id,
        "board": board,
        "title": new.title,
        "body": new.body,
        "assignee": assignee,
        "status": status,
        "priority": new.priority,
        "tenant": new.tenant,
        "goal_id": new.goal,
        "created_by": new.actor,
        "created_at": now,
        "updated_at": now,
        "workspace_kind": workspace_kind,
        "workspace_path": workspace_path,
        "branch_name": new.branch,
        "idempotency_key": new.idempotency_key,
        "skills": skills,
        "max_runtime_seconds": new.max_runtime,
        "max_retries": new.max_retries,
        "review_required": new.review,
        "verify": verify,
        "model": new.model,
        "current_run_id": None,
        "consecutive_failures": 0,
        "not_before": new.not_before,
        **_assignee_warning(tx, assignee, known if assignee == new.assignee else None),
    }


def create(db: Database, board: str, title: str, *, actor: str | None = None, check_board: bool = True,
           **fields: Unpack[NewTaskFields]) -> Row:
    """Create a task; ready iff every parent is done and it has an assignee (and its
    ``not_before`` time, if any, has come). ``fields``: :data:`agentboard.domain.task_fields.FIELDS`."""
    return create_task(db, NewTask.build(board, title, actor=actor, check_board=check_board, **fields))


def create_task(db: Database, new: NewTask) -> Row:
    """Create the task ``new`` describes in one transaction.

    Two creators racing on one idempotency key: the loser's insert hits the unique index, and
    the same record runs once more, now finding (and returning) the winner's task.
    """
    try:
        return db.write(create_in, new)
    except AgentboardError:
        raise
    except Exception as exc:
        if new.idempotency_key and "unique" in str(exc).lower():
            return db.write(create_in, new)
        raise


# -- simple status verbs -----------------------------------------------------------------------


def _release(tx: Tx, board: str, task_id: str, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    target = ready_or_todo(tx, task_id, task["assignee"], board)
    states.check("release", task["status"], target, task_id)
    assignee = task["assignee"] or (default_assignee(tx, board) if target == states.READY else None)
    now = time.time()
    tx.execute(
        "UPDATE tasks SET status = :s, assignee = :a, updated_at = :now WHERE id = :id",
        {"s": target, "a": assignee, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "released", {"status": target}, actor=actor, at=now)
    task.update(status=target, assignee=assignee)
    return task_out(task)


def release(db: Database, board: str, task_id: str, *, actor: str | None = None) -> Row:
    return db.write(_release, board, task_id, actor)


def _close_open_run(tx: Tx, task: Row, outcome: str, now: float, *, summary: str | None = None, error: str | None = None) -> int | None:
    run_id = task.get("current_run_id")
    if run_id is None:
        return None
    tx.execute(
        "UPDATE task_runs SET status = 'closed', outcome = :o, ended_at = :now, "
        "summary = COALESCE(:s, summary), error = COALESCE(:e, error) WHERE id = :r AND status = 'open'",
        {"o": outcome, "now": now, "s": summary, "e": error, "r": run_id},
    )
    budgets.account_run_in(tx, int(run_id))
    return int(run_id)


_CLEAR_CLAIM = (
    "current_run_id = NULL, claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, "
    "worker_host = NULL"
)


def _block_reason(reason: str | None, kind: str) -> str:
    """A block's reason, checked (it must say what the task waits for) with its kind."""
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("a block needs a reason: say what the task is waiting for")
    if kind not in states.BLOCK_KINDS:
        raise InvalidInput(f"invalid block kind {kind!r}: use one of {', '.join(states.BLOCK_KINDS)}")
    model.body(reason, model.COMMENT_MAX, "reason")
    return reason


def _block(tx: Tx, board: str, task_id: str, reason: str, kind: str, run_id: int | None, actor: str | None,
           on: str | None = None, until: float | None = None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    if run_id is not None and task["current_run_id"] != run_id:
        raise stale_error(task, run_id)
    if kind == "dependency" and on:
        return _wait(tx, board, task, reason, on, actor)
    states.check("block", task["status"], states.BLOCKED, task_id)
    now = time.time()
    closed = None
    if task["status"] == states.RUNNING:
        # a run stopped by a rate limit keeps that as its outcome; the run keeps the whole text
        closed = _close_open_run(tx, task, "rate_limited" if kind == "rate_limited" else "blocked", now,
                                 summary=reason)
    full, reason = reason, model.reason_line(reason) or reason  # the task's reason is one line
    tx.execute(
        f"UPDATE tasks SET status = 'blocked', block_kind = :k, block_reason = :r, block_on = NULL, {_CLEAR_CLAIM}, "
        "cooldown_until = :u, updated_at = :now WHERE id = :id",
        {"k": kind, "r": reason, "u": until, "now": now, "id": task_id},
    )
    payload: dict[str, Any] = {"reason": reason, "kind": kind}
    if full != reason:
        payload["detail"] = full
    if until is not None:
        payload["until"] = until
    tx.event(board, task_id, "blocked", payload, run_id=closed, actor=actor, at=now)
    task.update(status=states.BLOCKED, block_kind=kind, block_reason=reason, current_run_id=None, block_on=None,
                cooldown_until=until)
    task = hooks.blocked(tx, board, task, kind, reason, actor)
    return task_out(task)


def _wait(tx: Tx, board: str, task: Row, reason: str, on: str, actor: str | None) -> Row:
    """A ``dependency`` block: ``task`` waits in todo, as a child of ``on``, and resumes by itself
    (promoted to ready) when ``on`` is done."""
    task_id = task["id"]
    other = tx.one("SELECT id, board, status FROM tasks WHERE id = :id", {"id": on})
    if other is None or other["board"] != board:
        raise NotFound(f"no task {on} on board {board!r} to wait for")
    if on == task_id:
        raise InvalidInput(f"a task cannot wait for itself ({task_id})")
    path = cycle_path(tx, on, task_id)
    if path:
        raise Conflict(f"{task_id} cannot wait for {on}: {' → '.join(path + [task_id])} would be a cycle")
    states.check("wait", task["status"], states.TODO, task_id)
    now = time.time()
    closed = None
    if task["status"] == states.RUNNING:
        closed = _close_open_run(tx, task, "blocked", now, summary=reason)
    tx.execute(
        "INSERT INTO task_links (parent_id, child_id, board, created_at) VALUES (:p, :c, :b, :now) "
        "ON CONFLICT (parent_id, child_id) DO NOTHING",
        {"p": on, "c": task_id, "b": board, "now": now},
    )
    tx.execute(
        f"UPDATE tasks SET status = 'todo', block_kind = 'dependency', block_reason = :r, block_on = :on, {_CLEAR_CLAIM}, "
        "updated_at = :now WHERE id = :id",
        {"r": reason, "on": on, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "blocked", {"reason": reason, "kind": "dependency", "on": on, "status": states.TODO},
             run_id=closed, actor=actor, at=now)
    task.update(status=states.TODO, block_kind="dependency", block_reason=reason, block_on=on, current_run_id=None)
    if other["status"] in states.SATISFIED:  # nothing to wait for: it resumes at once
        promote_children(tx, board, on, actor)
        task = get_task(tx, board, task_id)
    hooks.blocked(tx, board, task, "dependency", reason, actor)
    return task_out(task)


def block(
    db: Database,
    board: str,
    task_id: str,
    reason: str,
    *,
    kind: str = "manual",
    run_id: int | None = None,
    on: str | None = None,
    actor: str | None = None,
    until: float | None = None,
) -> Row:
    """Block a task with a reason and a kind. ``kind="dependency"`` with ``on=TASK_ID``: the task
    waits in todo and resumes by itself when that task is done. ``until`` (epoch seconds): when a
    timed kind (``rate_limited``) ends; the dispatcher unblocks the task then, by itself."""
    reason = _block_reason(reason, kind)
    on = (on or "").strip() or None
    if on and kind != "dependency":
        raise InvalidInput("--on names the task a dependency waits for: use it with --kind dependency")
    if until is not None and kind not in states.TIMED_BLOCK_KINDS:
        raise InvalidInput(f"only a {' or '.join(sorted(states.TIMED_BLOCK_KINDS))} block ends at a set time")
    return db.write(_block, board, task_id, reason, kind, run_id, actor, on, until)


def _unblock(tx: Tx, board: str, task_id: str, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    target = ready_or_todo(tx, task_id, task["assignee"], board)
    states.check("unblock", task["status"], target, task_id)
    assignee = task["assignee"] or (default_assignee(tx, board) if target == states.READY else None)
    now = time.time()
    tx.execute(
        "UPDATE tasks SET status = :s, assignee = :a, block_kind = NULL, block_reason = NULL, block_on = NULL, "
        "block_to = NULL, consecutive_failures = 0, protocol_violations = 0, cooldown_until = NULL, updated_at = :now "
        "WHERE id = :id",
        {"s": target, "a": assignee, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "unblocked", {"status": target}, actor=actor, at=now)
    task.update(status=target, block_kind=None, block_reason=None, consecutive_failures=0)
    return task_out(task)


def unblock(db: Database, board: str, task_id: str, *, actor: str | None = None) -> Row:
    return db.write(_unblock, board, task_id, actor)


def unblock_in(tx: Tx, board: str, task_id: str, *, actor: str | None = None) -> Row:
    """:func:`unblock` inside the caller's transaction."""
    return _unblock(tx, board, task_id, actor)


def _archive(tx: Tx, board: str, task_id: str, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    states.check("archive", task["status"], states.ARCHIVED, task_id)
    now = time.time()
    closed = _close_open_run(tx, task, "reclaimed", now, error="archived while running")
    tx.execute(
        f"UPDATE tasks SET status = 'archived', {_CLEAR_CLAIM}, updated_at = :now WHERE id = :id",
        {"now": now, "id": task_id},
    )
    tx.event(board, task_id, "archived", {"from": task["status"], "closed_run": closed}, run_id=closed, actor=actor, at=now)
    task.update(status=states.ARCHIVED, current_run_id=None)
    after_satisfied(tx, board, task, actor)
    return task_out(task)


def archive(db: Database, board: str, task_id: str, *, actor: str | None = None) -> Row:
    return db.write(_archive, board, task_id, actor)


def _restore(tx: Tx, board: str, task_id: str, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    target = ready_or_todo(tx, task_id, task["assignee"], board)
    states.check("restore", task["status"], target, task_id)
    if task["idempotency_key"]:
        clash = tx.one(
            "SELECT id FROM tasks WHERE board = :b AND idempotency_key = :k AND status != 'archived'",
            {"b": board, "k": task["idempotency_key"]},
        )
        if clash:
            raise Conflict(
                f"task {clash['id']} already uses idempotency key {task['idempotency_key']!r}; archive it first"
            )
    now = time.time()
    tx.execute(
        "UPDATE tasks SET status = :s, updated_at = :now WHERE id = :id",
        {"s": target, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "restored", {"status": target}, actor=actor, at=now)
    demote_ready_children(tx, board, task_id, actor)
    reopen_goal(tx, task["goal_id"])
    task.update(status=target)
    return task_out(task)


def restore(db: Database, board: str, task_id: str, *, actor: str | None = None) -> Row:
    return db.write(_restore, board, task_id, actor)


def _reopen(tx: Tx, board: str, task_id: str, reason: str | None, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    target = ready_or_todo(tx, task_id, task["assignee"], board)
    states.check("reopen", task["status"], target, task_id)
    now = time.time()
    tx.execute(
        "UPDATE tasks SET status = :s, completed_at = NULL, updated_at = :now WHERE id = :id",
        {"s": target, "now": now, "id": task_id},
    )
    demoted = demote_ready_children(tx, board, task_id, actor)
    tx.event(board, task_id, "reopened", {"status": target, "reason": reason, "demoted": demoted}, actor=actor, at=now)
    reopen_goal(tx, task["goal_id"])
    task.update(status=target, completed_at=None)
    return task_out(task)


def reopen(db: Database, board: str, task_id: str, *, reason: str | None = None, actor: str | None = None) -> Row:
    return db.write(_reopen, board, task_id, reason, actor)


# -- assign and edit ---------------------------------------------------------------------------


def _assign(tx: Tx, board: str, task_id: str, assignee: str | None, reclaim: bool, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    if task["status"] == states.RUNNING:
        if not reclaim:
            raise Conflict(
                f"task {task_id} is running; reclaim it first (agentboard assign {task_id} "
                f"{assignee or 'none'} --reclaim)"
            )
        return_to_queue(tx, board, task, "reclaimed", error="reassigned", count_failure=False, actor=actor, run_id=None)
        task = get_task(tx, board, task_id)
    status = task["status"]
    if status in (states.TODO, states.READY):
        target = ready_or_todo(tx, task_id, assignee, board) if assignee else states.TODO
        if not assignee and target == states.TODO and default_assignee(tx, board) and not pending_parents(tx, task_id):
            target = states.TODO
    else:
        target = status
    states.check("assign", status, target, task_id)
    now = time.time()
    tx.execute(
        "UPDATE tasks SET assignee = :a, status = :s, updated_at = :now WHERE id = :id",
        {"a": assignee, "s": target, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "assigned", {"assignee": assignee, "previous": task["assignee"], "status": target}, actor=actor, at=now)
    task.update(assignee=assignee, status=target)
    return task_out(task)


def _assignee(name: str | None) -> str | None:
    """A profile name to assign, or None for "none", "-" or an empty name (unassign)."""
    if name is not None and name.strip().lower() in ("", "none", "-"):
        return None
    return model.profile_name(name) if name is not None else None


def assign(
    db: Database, board: str, task_id: str, assignee: str | None, *, reclaim: bool = False, actor: str | None = None
) -> Row:
    return db.write(_assign, board, task_id, _assignee(assignee), reclaim, actor)


_EDITABLE = ("title", "body", "priority", "tenant", "result", "max_runtime_seconds", "max_retries", "review_required", "verify", "skills", "branch_name", "goal_id", "model")


def _edit(tx: Tx, board: str, task_id: str, changes: dict[str, Any], actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    states.check("edit", task["status"], task["status"], task_id)
    if "verify" in changes:
        checked_verify(tx, board, decoded_verify(changes["verify"]))
    if "goal_id" in changes and changes["goal_id"]:
        if tx.one("SELECT id FROM goals WHERE id = :g AND board = :b", {"g": changes["goal_id"], "b": board}) is None:
            raise NotFound(f"no goal {changes['goal_id']} on board {board!r}")
    changed = {k: v for k, v in changes.items() if task.get(k) != v}
    if not changed:
        return task_out(task)
    now = time.time()
    sets = ", ".join(f"{k} = :{k}" for k in changed)
    params = dict(changed)
    params.update(id=task_id, now=now)
    tx.execute(f"UPDATE tasks SET {sets}, updated_at = :now WHERE id = :id", params)
    if "priority" in changed:
        tx.event(board, task_id, "reprioritized", {"priority": changed["priority"], "previous": task["priority"]}, actor=actor, at=now)
    others = [k for k in changed if k != "priority"]
    if others:
        tx.event(board, task_id, "edited", {"fields": others}, actor=actor, at=now)
    if "goal_id" in changed:
        # the task moved between goals: the new one may reopen, the old one may settle
        if task["status"] not in states.SATISFIED:
            reopen_goal(tx, changed["goal_id"])
        settle_goal(tx, board, task.get("goal_id"), actor)
    task.update(changed)
    return task_out(task)


def edit(db: Database, board: str, task_id: str, *, actor: str | None = None, **fields: Any) -> Row:
    """Change a task's fields (see ``_EDITABLE``); a field given as None is left as it is."""
    return db.write(_edit, board, task_id, _edit_changes(fields), actor)


def _edit_changes(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The column values an edit writes, checked and normalized (raises ``InvalidInput``)."""
    changes: dict[str, Any] = {}
    for key, value in fields.items():
        if value is None:
            continue
        if key not in _EDITABLE:
            raise InvalidInput(f"cannot edit field {key!r}; editable: {', '.join(_EDITABLE)}")
        if key == "title":
            value = model.title(value)
        elif key == "body":
            value = model.body(value)
        elif key == "priority":
            value = model.priority(value)
        elif key == "max_runtime_seconds":
            value = model.duration(value)
        elif key == "review_required":
            value = 1 if value else 0
        elif key in ("verify", "skills"):
            value = dump_json(list(value))
        elif key == "result":
            value = str(value).strip().splitlines()[0][:500] if str(value).strip() else None
        elif key == "branch_name":
            value = _model.branch_name(str(value)) if str(value).strip() else None
        elif key == "model":
            value = _model.model_name(str(value))  # an empty value clears it: the profile's model
        elif key in ("tenant", "goal_id") and value == "":
            value = None  # an empty value clears the field
        changes[key] = value
    if not changes:
        raise InvalidInput("nothing to change: give at least one field to edit")
    return changes


# -- the dashboard's status drag -----------------------------------------------------------------


def set_status(db: Database, board: str, task_id: str, status: str, *, reason: str | None = None,
               actor: str | None = None, integrated: bool = False) -> Row:
    """Map a requested status to the verb that reaches it; never a raw column write.

    One transaction: a refused move changes nothing. A move to done that integrates the task's
    branch needs ``integrated=True``: surfaces call ``dispatch.finish.set_status``, which runs
    the gates and the integration first.
    """
    _check_status(status)
    return db.write(_set_status, board, task_id, status, reason, actor, integrated)


def _check_status(status: str) -> None:
    if status not in states.STATUSES:
        raise InvalidInput(f"unknown status {status!r}; use one of {', '.join(states.STATUSES)}")


def _set_status(tx: Tx, board: str, task_id: str, status: str, reason: str | None, actor: str | None,
                integrated: bool = False) -> Row:
    current = get_task(tx, board, task_id, lock=True)
    cur = current["status"]
    if cur == status:
        return task_out(current)
    if status == states.RUNNING:
        raise Conflict("a task cannot be moved to running by hand; the dispatcher starts it when it is ready")
    if status == states.ARCHIVED:
        return _archive(tx, board, task_id, actor)
    if status == states.BLOCKED:
        why = _block_reason(reason or f"blocked by {actor or 'a person'}", "manual")
        return _block(tx, board, task_id, why, "manual", None, actor)
    if status == states.DONE:
        if cur == states.REVIEW:
            return review_in(tx, board, task_id, Verdict.build("approved", actor=actor), actor=actor,
                             integrated=integrated)
        return complete_in(tx, board, task_id, Report(), actor=actor, integrated=integrated)
    if status == states.REVIEW:
        if cur != states.RUNNING:
            raise Conflict(f"only a running task can be handed to review (task {task_id} is {cur})")
        return request_review_in(tx, board, task_id, actor=actor)
    if status == states.TRIAGE:
        raise Conflict(f"cannot move task {task_id} back to triage")
    if status == states.READY:
        # refuse before any verb runs
        pending = pending_parents(tx, task_id)
        if pending:
            raise Conflict(f"task {task_id} has parents that are not done: {', '.join(pending)}")
        if not current.get("assignee") and not default_assignee(tx, board):
            raise Conflict(f"task {task_id} has no assignee; assign a profile to make it ready")
    # ready / todo
    if cur == states.ARCHIVED:
        out = _restore(tx, board, task_id, actor)
    elif cur == states.DONE:
        out = _reopen(tx, board, task_id, None, actor)
    elif cur == states.BLOCKED:
        out = _unblock(tx, board, task_id, actor)
    elif cur == states.TRIAGE:
        out = _release(tx, board, task_id, actor)
    elif cur == states.RUNNING:
        out = reclaim_in(tx, board, task_id, actor=actor)
    elif cur == states.REVIEW:
        verdict = Verdict.build("changes_requested", reason or "sent back to the queue", actor=actor)
        out = review_in(tx, board, task_id, verdict, actor=actor)
    else:
        out = _move_todo_ready(tx, board, task_id, status, actor)
    if status == states.READY and out["status"] != states.READY:
        # the verb landed in todo: refuse, and the transaction leaves the task as it was
        pending = pending_parents(tx, task_id)
        if pending:
            raise Conflict(f"task {task_id} has parents that are not done: {', '.join(pending)}")
        if not out.get("assignee"):
            raise Conflict(f"task {task_id} has no assignee; assign a profile to make it ready")
    if status == states.TODO and out["status"] == states.READY:
        # the verb let the task land in ready (its parents are done): a person asked for todo
        out = _move_todo_ready(tx, board, task_id, states.TODO, actor)
    return out


def _refuse_integration(tx: Tx, board: str, task_id: str, reason: str, run_id: int, detail: dict[str, Any],
                        actor: str | None) -> Row:
    out = _block(tx, board, task_id, reason, "needs_input", run_id, actor)
    tx.execute("UPDATE tasks SET integration = 'refused', last_outcome = 'integration_refused' WHERE id = :id",
               {"id": task_id})
    tx.event(board, task_id, "integration_refused", {"reason": reason, **detail}, run_id=run_id, actor=actor)
    out["integration"] = "refused"
    return out


def refuse_integration(db: Database, board: str, task_id: str, reason: str, *, run_id: int,
                       detail: dict[str, Any] | None = None, actor: str | None = None) -> Row:
    """A worker's run on a task without review succeeded (and was verified), but its branch
    could not be integrated into the board's base branch: the run closes, the task is blocked
    ``needs_input`` with the reason (an ``integration_refused`` event), and nothing in git changed."""
    why = _block_reason(reason, "needs_input")
    return db.write(_refuse_integration, board, task_id, why, run_id, dict(detail or {}), actor)


# -- the dashboard's edit: fields, assignee and status together ----------------------------------


def update(
    db: Database,
    board: str,
    task_id: str,
    *,
    fields: Mapping[str, Any] | None = None,
    assign: bool = False,
    assignee: str | None = None,
    status: str | None = None,
    reason: str | None = None,
    actor: str | None = None,
    integrated: bool = False,
) -> Row:
    """Edit ``fields``, then (with ``assign=True``) set the assignee (None unassigns), then move
    to ``status`` — all in one transaction, so a refused step (say the status move) leaves none
    of the others behind. Returns the task as the last step left it. ``integrated``: as for
    :func:`set_status`.
    """
    changes = _edit_changes(fields) if fields else {}
    name = _assignee(assignee) if assign else None
    if status is not None:
        _check_status(status)
    if not (changes or assign or status is not None):
        raise InvalidInput("nothing to change: give fields to edit, an assignee or a status")

    def _update(tx: Tx) -> Row:
        task = get_task(tx, board, task_id, lock=True)
        if changes:
            task = _edit(tx, board, task_id, changes, actor)
        if assign:
            task = _assign(tx, board, task_id, name, False, actor)
        if status is not None:
            task = _set_status(tx, board, task_id, status, reason, actor, integrated)
        return task_out(task)

    return db.write(_update)


def _move_todo_ready(tx: Tx, board: str, task_id: str, status: str, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    cur = task["status"]
    if status == states.READY:
        pending = pending_parents(tx, task_id)
        if pending:
            raise Conflict(f"task {task_id} has parents that are not done: {', '.join(pending)}")
        assignee = task["assignee"] or default_assignee(tx, board)
        if not assignee:
            raise Conflict(f"task {task_id} has no assignee; assign a profile to make it ready")
        verb = "promote"
    else:
        assignee = task["assignee"]
        verb = "demote"
    states.check(verb, cur, status, task_id)
    now = time.time()
    tx.execute(
        "UPDATE tasks SET status = :s, assignee = :a, updated_at = :now WHERE id = :id",
        {"s": status, "a": assignee, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "status", {"from": cur, "to": status}, actor=actor, at=now)
    task.update(status=status, assignee=assignee)
    return task_out(task)


# -- bulk ----------------------------------------------------------------------------------------


def bulk(fn: Callable[..., Row], db: Database, board: str, ids: Iterable[str], *args: Any, **kwargs: Any) -> list[Row]:
    """Apply one verb to several tasks; per-id failures never abort the others."""
    results: list[Row] = []
    for task_id in ids:
        try:
            task = fn(db, board, task_id, *args, **kwargs)
            results.append({"id": task_id, "ok": True, "status": task.get("status"), "task": task})
        except AgentboardError as exc:
            results.append({"id": task_id, "ok": False, "error": {"code": exc.code, "message": exc.message}})
    return results


#: the verbs in a caller's transaction (the supervisor's tools combine them with their checks)
release_in = _release
archive_in = _archive
block_in = _block
block_reason = _block_reason

__all__ = [
    "NewTask", "archive_in", "block_in", "block_reason", "release_in", "archive", "assign", "block", "bulk", "create", "create_in", "create_task", "edit",
    "refuse_integration", "release", "reopen", "restore", "set_status", "unblock", "update",
]
