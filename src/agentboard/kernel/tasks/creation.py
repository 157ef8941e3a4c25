"""Creating a task: its fields checked (``NewTask``), its row, event, links and first status."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Unpack

from ...domain import model, states, task_fields
from ...domain.errors import AgentboardError, Conflict, InvalidInput, NotFound
from ...domain.notify_targets import mask as mask_target
from ...domain.races import Entry, until_of
from ...domain.races import parse as parse_race
from ...domain.task_fields import NewTaskFields
from ...store.engine import EVENT_COLUMNS, Database, Row, Tx, dump_json
from ..attempts import check_profiles, open_race_in
from ..branches import check_worktree_task
from ..common import (
    default_assignee,
    task_out,
    usable_board,
)
from ..flow import (
    reopen_goal,
)
from ..host_access import check_name, checked_verify, placed
from ..notifications import auto_subscribe_in
from ..profiles import no_profile_warning, unknown_profile_warning

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
    #: a race: one attempt per entry (``kernel/races.py``); the task is assigned to the first
    race: tuple[Entry, ...] = ()
    race_until: str | None = None
    #: subscribe the ``notify_default`` targets (False: a race's attempt, followed through its race)
    subscribe_default: bool = True

    @classmethod
    def build(cls, board: str, title: str, *, actor: str | None = None, check_board: bool = True,
              **fields: Unpack[NewTaskFields]) -> NewTask:
        """Check and normalize what a caller gave :func:`create` through the one table of
        new-task fields (:mod:`agentboard.domain.task_fields`; raises ``InvalidInput``)."""
        given = task_fields.checked({"title": title, **fields})
        race = _race_of(given)
        ws_kind, ws_path = _model.workspace(given.get("workspace"))
        return cls(
            board=board,
            title=given["title"],
            body=given.get("body") or "",
            assignee=race.pop("assignee", given.get("assignee")),
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
            **race,
        )


def _race_of(given: dict[str, Any]) -> dict[str, Any]:
    """The race fields of a new task: its entries and when it ends (checked), with the first
    entry's profile as its assignee."""
    if not given.get("race"):
        if given.get("race_until"):
            raise InvalidInput("race_until needs race: P1,P2[:MODEL],…")
        return {}
    if given.get("triage"):
        raise InvalidInput("a race cannot start in triage; leave out triage")
    entries = parse_race(given["race"])
    if given.get("assignee") and given["assignee"] != entries[0].profile:
        raise InvalidInput(f"a race runs the profiles it names: leave out assignee {given['assignee']!r} (the "
                           f"race's task is assigned to its first entry, {entries[0].profile!r})")
    return {"race": entries, "race_until": until_of(given.get("race_until")), "assignee": entries[0].profile}


def _assignee_warning(tx: Tx, assignee: str | None, known: bool | None = None) -> dict[str, Any]:
    """``{"warnings": [...]}`` when a task is assigned to a name that is no profile (the
    dispatcher never starts it until one is added; a person may still do it). ``known``: the
    caller has looked the name up already."""
    if not assignee or known:
        return {}
    if known is None and tx.one("SELECT name FROM profiles WHERE name = :n", {"n": assignee}) is not None:
        return {}
    return {"warnings": [unknown_profile_warning(tx, assignee)]}  # with the profile a typo is close to


def _insert_params(new: NewTask, assignee: str | None, status: str, workspace_kind: str,
                   workspace_path: str | None, now: float) -> dict[str, Any]:
    """The parameters of :data:`_INSERT_TASK` for ``new`` (its id apart)."""
    return {
        "board": new.board, "title": new.title, "body": new.body, "assignee": assignee, "status": status,
        "priority": new.priority, "tenant": new.tenant, "goal_id": new.goal, "created_by": new.actor, "now": now,
        "workspace_kind": workspace_kind, "workspace_path": workspace_path, "branch_name": new.branch,
        "idem": new.idempotency_key, "skills": dump_json(list(new.skills)), "max_runtime": new.max_runtime,
        "max_retries": new.max_retries, "review": 1 if new.review else 0, "verify": dump_json(list(new.verify)),
        "model": new.model, "block_kind": None, "block_reason": None, "not_before": new.not_before,
    }


def _created_payload(new: NewTask, assignee: str | None, status: str) -> dict[str, Any]:
    """The ``created`` event's payload."""
    return {"assignee": assignee, "status": status, "parents": list(new.parents), "tenant": new.tenant,
            "title": new.title, **({"not_before": new.not_before} if new.not_before is not None else {})}


def _created_out(new: NewTask, task_id: str, assignee: str | None, status: str, workspace_kind: str,
                 workspace_path: str | None, now: float, warning: dict[str, Any]) -> Row:
    """The answer to a create: the task as written."""
    return {
        "id": task_id,
        "board": new.board,
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
        "skills": list(new.skills),
        "max_runtime_seconds": new.max_runtime,
        "max_retries": new.max_retries,
        "review_required": new.review,
        "verify": list(new.verify),
        "model": new.model,
        "current_run_id": None,
        "consecutive_failures": 0,
        "not_before": new.not_before,
        **warning,
    }


#: PostgreSQL: a plain task (see :func:`_plain`) created in one statement, a transaction of its
#: own: its board read (the insert happens only on a board that is not archived), whether its
#: assignee is a profile, the insert and its ``created`` event. No row, or ``created`` 0: nothing
#: was written, and the general path says why.
_CREATE_PLAIN_PG = (
    "WITH b AS (SELECT b.archived, EXISTS (SELECT 1 FROM profiles WHERE name = :assignee) AS assignee_known "
    "FROM boards b WHERE b.slug = :board), "
    "i AS (" + _INSERT_TASK_PG[: _INSERT_TASK_PG.index(" VALUES (")] + " SELECT :id, :board, :title, :body, "
    ":assignee, :status, CAST(:priority AS integer), :tenant, :goal_id, :created_by, CAST(:now AS double precision), "
    "CAST(:now AS double precision), :workspace_kind, :workspace_path, :branch_name, :idem, :skills, "
    "CAST(:max_runtime AS integer), CAST(:max_retries AS integer), CAST(:review AS integer), :verify, :model, 0, 0, "
    "0, :block_kind, :block_reason, CAST(:not_before AS double precision) FROM b WHERE b.archived = 0 RETURNING id), "
    f"e AS (INSERT INTO task_events {EVENT_COLUMNS} "
    "SELECT :board, i.id, NULL, 'created', :payload, :created_by, :now FROM i) "
    # an assignee that is no profile (a person, a typo): the profiles there are, for the warning
    "SELECT b.assignee_known, (SELECT COUNT(*) FROM i) AS created, CASE WHEN b.assignee_known THEN NULL "
    "ELSE (SELECT string_agg(name, ' ') FROM profiles) END AS profile_names FROM b"
)
#: the SQLSTATE of a unique violation: a task id taken already (one chance in 2^32)
_UNIQUE = "23505"


def _plain(db: Database, new: NewTask) -> bool:
    """Whether ``new`` needs nothing of a create but its board, its assignee's profile and the
    insert: ready with an assignee, in a scratch workspace, with no parents, goal, idempotency
    key, named check, start time, race or default subscriptions."""
    return (db.dialect == "postgresql" and new.check_board and bool(new.assignee) and not new.triage
            and not new.parents and not new.goal and not new.idempotency_key and not new.race
            and new.not_before is None and new.workspace_kind == "scratch" and not new.workspace_path
            and not any(check_name(v) for v in new.verify)
            and not (db.settings.notify_default and new.subscribe_default))


def _create_plain_pg(db: Database, new: NewTask) -> Row | None:
    """A plain task created in one round trip (:data:`_CREATE_PLAIN_PG`); None, with nothing
    written, when the general path must do it."""
    now = time.time()
    assignee = new.assignee
    status = states.READY
    params = _insert_params(new, assignee, status, "scratch", None, now)
    params["id"] = model.new_task_id()
    params["payload"] = dump_json(_created_payload(new, assignee, status))
    rows = db.write_one(_CREATE_PLAIN_PG, params, verb=create_in, declined=_UNIQUE)
    if not rows or not rows[0]["created"]:
        return None
    db.signal({new.board})
    known = bool(rows[0]["assignee_known"])
    # (profile names hold no space: ``domain.model.profile_name``)
    names = str(rows[0]["profile_names"] or "").split()
    warning = {} if known or not assignee else {"warnings": [no_profile_warning(assignee, names)]}
    return _created_out(new, params["id"], assignee, status, "scratch", None, now, warning)


def create_in(tx: Tx, new: NewTask) -> Row:
    """Create ``new`` inside the caller's transaction (or return the task already holding its
    idempotency key, with ``existing: True``)."""
    board = new.board
    if new.race:
        check_profiles(tx, new.race)
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
    parents = list(new.parents)
    params = _insert_params(new, assignee, status, workspace_kind, workspace_path, now)
    created = _created_payload(new, assignee, status)
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
    if tx.db.settings.notify_default and new.subscribe_default:
        auto_subscribe_in(tx, board, task_id, [(t, mask_target(t)) for t in tx.db.settings.notify_default],
                          new.actor)
    out = _created_out(new, task_id, assignee, status, workspace_kind, workspace_path, now,
                       _assignee_warning(tx, assignee, known if assignee == new.assignee else None))
    if new.race:
        return open_race_in(tx, out, new.race, new.race_until, new.actor)
    return out


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
    if _plain(db, new):
        done = _create_plain_pg(db, new)
        if done is not None:
            return done
    try:
        return db.write(create_in, new)
    except AgentboardError:
        raise
    except Exception as exc:
        if new.idempotency_key and "unique" in str(exc).lower():
            return db.write(create_in, new)
        raise
