"""Read models and batch verbs the dispatcher needs (each one transaction, O(running + batch)).

Over 600 lines on purpose: every statement a dispatcher pass runs, kept in one place so the
pass's cost can be read (and its indexes checked) in one file.

- :func:`pass_snapshot` — boards, profiles, running tasks and cooldown ends in one read.
- :func:`resume_timed_blocks` — tasks blocked for a rate limit go back to the queue when their
  cool-down ends, their failure counts kept.
- :func:`ready_batch` — the next ready tasks by priority then age, with the facts the respawn
  guards need.
- :func:`claim_batch` — claim several chosen ready tasks in one transaction
  (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so competing dispatchers skip each other's rows).
- :func:`record_spawns` — record the workers started in one pass (pid, host, log, workspace) in
  one transaction, a ``spawned`` event each.
- :func:`complete_runs` — complete several tasks whose workers exited with a plain successful
  result in one transaction.
- :func:`promote_pending` — the promotion safety net: todo tasks whose parents are all done.
- :func:`task`, :func:`sent_to_review_by` — what handling a worker's exit reads.
- :func:`gc_statuses`, :func:`finished_worktree_tasks`, :func:`running_task_ids` — what ``gc``
  reads before removing workspaces and logs.
- :func:`board_with_workdir` — which board already owns a target directory.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from ..domain import model, states
from ..domain.errors import AgentboardError, Conflict, InvalidInput, StaleRun
from ..store.engine import CLAIMABLE, WAITING, Database, Row, Tx, dump_json, in_list, values_list
from . import budgets
from .common import board_settings, default_assignee, get_task, ready_or_todo, task_out
from .races import under_way_later
from .runs import REVIEW_CLAIM, Report, claim_in, claim_ttl, complete_in, stale_error, usage_params
from .runs.claims import STILL_READY, claimed_payload, still_ready
from .schedules import next_due_later
from .supervision.sweep import due_work_later
from .tokens import create_run_tokens_in
from .worker_protocol import PrepareInputs, prepare_inputs_many_in

_RUNNING = (
    "SELECT t.id, t.board, t.assignee, t.current_run_id, t.worker_pid, t.worker_host, t.claim_expires, t.claim_lock, "
    "t.last_heartbeat_at, t.max_runtime_seconds, t.workspace_kind, t.workspace_path, t.branch_name, "
    "r.started_at AS run_started_at, r.log_path, r.profile, r.workspace_path AS run_workspace, "
    # a report held until the worker exits (its worker is stopped if it goes on: ``dispatch.reaping``)
    "r.pending_report IS NOT NULL AS reported, "
    # what the inbox files of the host's workers need (``protocol.inbox``), through the comments'
    # (task, id) index
    "(SELECT MAX(c.id) FROM task_comments c WHERE c.task_id = t.id) AS newest_comment "
    "FROM tasks t LEFT JOIN task_runs r ON r.id = t.current_run_id WHERE t.status = 'running' "
    "AND t.race_until IS NULL"  # a race's own task runs no worker: its attempts do (kernel.races)
)


#: a host's own running tasks, and those no host recorded yet: two statements, each found by its
#: key in the index of running tasks by host. As one (``worker_host = :h OR worker_host IS
#: NULL``) the planner, with statistics from a quiet spell, read every running task of every host
#: through that index and dropped the others' (``tests/postgres/test_quiet_statistics.py``)
RUNNING_OWN_SQL = _RUNNING + " AND t.worker_host = :h"
RUNNING_UNRECORDED_SQL = _RUNNING + " AND t.worker_host IS NULL"
#: other hosts' running tasks whose claim has lapsed (the index's second column, in the index)
RUNNING_LAPSED_SQL = _RUNNING + " AND t.claim_expires < :now AND t.worker_host <> :h"
#: the earliest claim of another host (not ``:h``) still to lapse (at ``:now`` or later): each host
#: with running tasks found by one look into their index past the one before, then one look at
#: its earliest claim. The minimum over every other host's claims read each of them (every pass
#: of every host, O(the fleet's workers); in a burst, with each entry's row to check as well)
NEXT_LAPSE_SQL = (
    "WITH RECURSIVE hosts(h) AS ("
    "SELECT (SELECT worker_host FROM tasks WHERE status = 'running' AND worker_host IS NOT NULL "
    "ORDER BY worker_host LIMIT 1) "
    "UNION ALL SELECT (SELECT t.worker_host FROM tasks t WHERE t.status = 'running' AND t.worker_host > hosts.h "
    "ORDER BY t.worker_host LIMIT 1) FROM hosts WHERE hosts.h IS NOT NULL) "
    "SELECT MIN((SELECT t.claim_expires FROM tasks t WHERE t.status = 'running' AND t.worker_host = hosts.h "
    "AND t.claim_expires >= :now ORDER BY t.claim_expires LIMIT 1)) AS at "
    "FROM hosts WHERE hosts.h IS NOT NULL AND hosts.h <> :h"
)


@dataclass(frozen=True)
class PassSnapshot:
    """What a dispatcher pass starts from (see :func:`pass_snapshot`)."""

    #: boards not archived, by slug
    boards: list[Row]
    profiles: list[Row]
    #: the running tasks to look at, with their current run (``run_started_at``, ``log_path``,
    #: ``profile``, ``run_workspace``, ``reported``: a report held until its worker exits) and
    #: worker and claim: every one, or with a ``host`` only that host's (and those with no host)
    #: and other hosts' whose claim has lapsed
    running: list[Row]
    #: per board, the earliest end of a ready task's cooldown
    cooldowns: dict[str, float]
    #: every open review run (see :func:`review_candidates`) with its task's board
    reviewing: list[Row] = field(default_factory=list)
    #: per board, the earliest end of a timed block (``rate_limited``), past ones included
    timed_blocks: dict[str, float] = field(default_factory=dict)
    #: running tasks of every host per (board, assignee): what the caps count
    load: list[Row] = field(default_factory=list)
    #: with a ``host``: the earliest claim expiry still ahead among other hosts' running tasks
    #: (when a pass is next due to look for a lapsed claim), None when there is none
    next_lapse: float | None = None
    #: when the schedules next have something to do (``schedules.next_due_later``, past times
    #: included): a pass ticks them only once it has come
    timers_at: float | None = None
    #: the races under way, their task ids by board (``races.under_way_later``)
    races: dict[str, list[str]] = field(default_factory=dict)
    #: the supervisors' due work by board (``supervision.due_work``)
    supervision: dict[str, Row] = field(default_factory=dict)
    #: some budget was found spent in its window, or has a runtime limit (the runs under way
    #: spend it as they go): ``budgets.running_over`` has work
    budgets_spent: bool = True


#: per board, the earliest end of a ready task's cooldown after ``:now`` (through
#: ``ix_tasks_cooldown``: only the ready tasks with a cooldown, never every ready task)
COOLDOWNS_SQL = ("SELECT board, MIN(cooldown_until) AS until FROM tasks WHERE status = 'ready' "
                 "AND cooldown_until > :now GROUP BY board")
#: per board, the earliest end of a timed block (through ``ix_tasks_timed_block``: only the
#: rate-limited tasks, never the whole table)
TIMED_BLOCKS_SQL = ("SELECT board, MIN(cooldown_until) AS until FROM tasks WHERE status = 'blocked' "
                    "AND block_kind = 'rate_limited' GROUP BY board")


#: whether any cap needs every host's running tasks counted: a profile's ``max_concurrency``, a
#: board's ``max_parallel`` setting, or a board's shared folder (one writer at a time when it is
#: not a git repository, which only the dispatcher can tell; any folder counts here)
CAPPED_SQL = (
    "SELECT 1 FROM profiles WHERE max_concurrency IS NOT NULL UNION ALL "
    "SELECT 1 FROM boards WHERE archived = 0 AND (default_workdir IS NOT NULL OR settings LIKE :capped)"
)
#: the parameters of :data:`CAPPED_SQL` (and so of :func:`load_sql`)
CAPPED_PARAMS = {"capped": "%max_parallel%"}


def load_sql(dialect: str) -> str:
    """Every host's running tasks counted per (board, assignee), for the caps, and only where a
    cap exists (:data:`CAPPED_SQL`, read once per statement; its parameters are
    :data:`CAPPED_PARAMS`): without one a pass reads no other host's running tasks. Through the
    partial index of running tasks: SQLite's planner would otherwise read the whole status index
    for the order of its ``GROUP BY`` (10 ms a pass at 100,000 done tasks), so there the index
    is named."""
    hint = " INDEXED BY ix_tasks_running" if dialect == "sqlite" else ""
    return (f"SELECT board, assignee, COUNT(*) AS n FROM tasks{hint} WHERE status = 'running' "
            f"AND EXISTS ({CAPPED_SQL}) GROUP BY board, assignee")


def pass_snapshot(db: Database, now: float | None = None, host: str | None = None) -> PassSnapshot:
    """What a dispatcher pass starts from, in one read: the boards (not archived), the profiles,
    the running tasks with their current run and, per board, the earliest end of a ready task's
    cooldown after ``now``; and whether the schedules, races, supervisors and spent budgets have
    anything to do (so a pass with none of them reads nothing more for them).

    ``host``: only that host's running tasks (and those no host recorded yet: on SQLite its own,
    or a spawn under way), through the partial index of running tasks by host, plus other
    hosts' whose claim has lapsed (through the partial index of running claims by expiry) and the
    earliest claim of theirs still to lapse (the pass is due again then); the caps get every host's as counts per (board, assignee). A pass then costs O(its own workers),
    not O(every worker of the fleet)."""
    at = time.time() if now is None else now

    def _r(tx: Tx) -> PassSnapshot:
        # every statement is sent before any is read: one round trip on PostgreSQL
        later = tx.later
        boards = later("SELECT * FROM boards WHERE archived = 0 ORDER BY slug")
        profiles = later("SELECT * FROM profiles")
        running = ([later(_RUNNING)] if host is None else
                   [later(RUNNING_OWN_SQL, {"h": host}), later(RUNNING_UNRECORDED_SQL),
                    later(RUNNING_LAPSED_SQL, {"h": host, "now": at})])
        load = later(load_sql(tx.db.dialect), CAPPED_PARAMS) if host is not None else list
        cooldowns = later(COOLDOWNS_SQL, {"now": at})
        reviewing = later(_REVIEWING, {"rv": REVIEW_CLAIM + "%"})
        timed = later(TIMED_BLOCKS_SQL)
        next_lapse = later(NEXT_LAPSE_SQL, {"h": host, "now": at}) if host else list
        timers, races, supervision = next_due_later(tx), under_way_later(tx), due_work_later(tx)
        spent = later("SELECT 1 AS x FROM budgets WHERE exhausted_window IS NOT NULL OR max_runtime IS NOT NULL "
                      "LIMIT 1")
        lapse = next_lapse()
        return PassSnapshot(
            boards=boards(),
            profiles=profiles(),
            running=[r for rows in running for r in rows()],
            load=load(),
            cooldowns={r["board"]: float(r["until"]) for r in cooldowns() if r["until"] is not None},
            reviewing=reviewing(),
            timed_blocks={r["board"]: float(r["until"]) for r in timed() if r["until"] is not None},
            next_lapse=float(lapse[0]["at"]) if lapse and lapse[0]["at"] is not None else None,
            timers_at=timers(),
            races=races(),
            supervision=supervision(),
            budgets_spent=bool(spent()),
        )
    return db.read_pipelined(_r)


@dataclass(frozen=True)
class Glance:
    """What tells a woken dispatcher whether a pass could do anything (see :func:`glance`)."""

    #: a ready task whose cooldown is over exists (on any board): work for a host with room
    ready: bool
    #: a running task's claim has lapsed (any host's): a pass reclaims it
    lapsed: bool
    #: this host's running tasks: how many, the sum of their current run ids, and how many
    #: comments they have (a change in any is a pass: a task cancelled, done, or a message)
    mine: tuple[int, int, int]
    #: the tasks a pass acts on with no worker of its own (in review or triage, races under
    #: way): how many, and the latest change to one (a change is a pass: a review to start, a
    #: race archived, a triage task to decompose)
    waiting: tuple[int, float] = (0, 0.0)


def glance_sql(*, unrecorded: bool = False) -> str:
    """The statement of :func:`glance` (parameters ``h``, the host, and ``now``): every part
    read through an index, never the whole of ``tasks``; this host's running tasks and the
    waiting ones read once each."""
    mine = "status = 'running' AND (worker_host = :h" + (" OR worker_host IS NULL)" if unrecorded else ")")
    return (
        # in the claim index's order, so its entries are read, not the table (where the ready
        # tasks, the newest, come after every finished one)
        f"SELECT COALESCE((SELECT 1 FROM tasks WHERE {CLAIMABLE} AND (cooldown_until IS NULL OR "
        "cooldown_until <= :now) ORDER BY board, assignee, priority DESC, created_at, id LIMIT 1), 0) AS ready, "
        "CASE WHEN EXISTS (SELECT 1 FROM tasks WHERE status = 'running' AND claim_expires < :now) "
        "THEN 1 ELSE 0 END AS lapsed, m.n, m.runs, m.comments, w.waiting, w.waiting_at "
        "FROM (SELECT COUNT(*) AS n, COALESCE(SUM(t.current_run_id), 0) AS runs, "
        "COALESCE(SUM((SELECT COUNT(*) FROM task_comments c WHERE c.task_id = t.id)), 0) AS comments "
        f"FROM tasks t WHERE {mine}) m, "
        # reviews, triage and races: their own partial index (ix_tasks_waiting)
        f"(SELECT COUNT(*) AS waiting, MAX(updated_at) AS waiting_at FROM tasks WHERE {WAITING}) w")


def glance(db: Database, host: str, now: float | None = None, *, unrecorded: bool = False) -> Glance:
    """One small read through the indexes of ready and running tasks, instead of a pass's
    full read: whether there is work to start, a lapsed claim, a fingerprint of this host's
    running tasks and one of the tasks a pass acts on without a worker (reviews, triage, races).
    ``unrecorded``: running tasks with no host count as this host's (SQLite)."""
    at = time.time() if now is None else now
    sql = glance_sql(unrecorded=unrecorded)

    def _r(tx: Tx) -> Glance:
        row = tx.one(sql, {"h": host, "now": at}) or {}
        return Glance(bool(row.get("ready")), bool(row.get("lapsed")),
                      (int(row.get("n") or 0), int(row.get("runs") or 0), int(row.get("comments") or 0)),
                      (int(row.get("waiting") or 0), float(row.get("waiting_at") or 0.0)))
    return db.read(_r)


def extend_claims(db: Database, items: list[tuple[str, str, int]], ttl: int | None = None) -> set[int]:
    """Renew the claims of several running tasks of one host in one transaction: ``items`` are
    ``(board, task id, run id)``; a task is renewed only while that run is its current one. A
    ``claim_extended`` event each, but the commit wakes no dispatcher (a renewal changes nothing
    another host would act on). Returns the run ids renewed."""
    if not items:
        return set()
    from .runs.claims import claim_ttl

    def _w(tx: Tx) -> set[int]:
        now = time.time()
        exp = now + claim_ttl(tx, ttl)
        params: dict[str, Any] = {"exp": exp}
        ids = in_list("t", [t for _, t, _ in items], params)
        runs = in_list("r", [r for _, _, r in items], params)
        # a run id belongs to one task, so (id, current_run_id) among the pairs is the pair itself
        done = {int(r["current_run_id"]) for r in tx.all(
            f"UPDATE tasks SET claim_expires = :exp WHERE status = 'running' AND id IN {ids} "
            f"AND current_run_id IN {runs} RETURNING current_run_id", params)}
        if not done:
            return done
        p2: dict[str, Any] = {"exp": exp}
        tx.execute("UPDATE task_runs SET claim_expires = :exp WHERE id IN " + in_list("r", sorted(done), p2), p2)
        for board, task_id, run_id in items:
            if run_id in done:
                tx.event(board, task_id, "claim_extended", {"until": exp}, run_id=run_id, actor="dispatcher", at=now)
        tx.wrote_events = False  # followers read them with the next change; no host is woken
        return done
    return db.write(_w)


def resume_timed_blocks(db: Database, boards: list[str], now: float | None = None) -> list[Row]:
    """Resume, in one transaction, the tasks of ``boards`` whose timed block (``rate_limited``)
    has ended: they go back to ready (or todo), an ``unblocked`` event each (``resumed``: the
    kind of block that ended). Unlike a person's unblock, the task keeps its failure counts
    (``consecutive_failures``, ``protocol_violations``): a rate limit is not a failure, nor does
    it wipe out the failures before it, so an agent alternating crashes and rate limits still
    reaches its failure limit."""
    at = time.time() if now is None else now
    if not boards:
        return []

    def _w(tx: Tx) -> list[Row]:
        params: dict[str, Any] = {"now": at}
        rows = tx.all(
            "SELECT id, board FROM tasks WHERE status = 'blocked' AND block_kind = 'rate_limited' "
            "AND cooldown_until <= :now AND board IN " + in_list("b", boards, params) + " ORDER BY id",
            params)
        return [_resume_timed_in(tx, r["board"], r["id"]) for r in rows]
    return db.write(_w)


def _resume_timed_in(tx: Tx, board: str, task_id: str) -> Row:
    """One task's timed block ended: back to ready (or todo), its failure counts kept."""
    task = get_task(tx, board, task_id, lock=True)
    target = ready_or_todo(tx, task_id, task["assignee"], board)
    states.check("unblock", task["status"], target, task_id)
    assignee = task["assignee"] or (default_assignee(tx, board) if target == states.READY else None)
    now = time.time()
    tx.execute(
        "UPDATE tasks SET status = :s, assignee = :a, block_kind = NULL, block_reason = NULL, block_on = NULL, "
        "block_to = NULL, cooldown_until = NULL, updated_at = :now WHERE id = :id",
        {"s": target, "a": assignee, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "unblocked",
             {"status": target, "resumed": task["block_kind"],
              "failures": int(task.get("consecutive_failures") or 0)}, actor="dispatcher", at=now)
    task.update(status=target, assignee=assignee, block_kind=None, block_reason=None, block_on=None,
                block_to=None, cooldown_until=None)
    return task_out(task)


def limit_in_statement(limit: int) -> int:
    """The ``LIMIT`` a read of ``limit`` rows writes into its statement: ``limit`` rounded up to
    three significant bits (at most a quarter more rows; 1 to 8 exactly). Bound as a parameter,
    PostgreSQL prices a ``LIMIT`` at a tenth of the rows, so on a long queue the plan made for
    any limit looked dearer than one made for the value at hand and every read was planned anew
    (as the claim's was, ``runs.claims``); written in, a pass's varying room makes a handful of
    statements, each planned once per connection."""
    shift = max(int(limit).bit_length() - 3, 0)
    return -(-int(limit) >> shift) << shift


def ready_batch(db: Database, board: str, limit: int, *, after: Row | None = None,
                skip: list[str] | None = None) -> list[Row]:
    """Ready tasks out of cooldown, highest priority first, then oldest: the first ``limit``, or
    the ``limit`` that follow ``after`` (a row of the page before) in that order; ``skip``:
    assignees whose tasks are left out (a pass that found their profile full or unusable)."""
    if limit <= 0:
        return []

    def _r(tx: Tx) -> list[Row]:
        params: dict[str, Any] = {"b": board, "now": time.time()}
        more = ""
        if after is not None:
            more += (" AND (t.priority < :ap OR (t.priority = :ap AND (t.created_at > :ac "
                     "OR (t.created_at = :ac AND t.id > :ai))))")
            params.update(ap=after["priority"], ac=after["created_at"], ai=after["id"])
        if skip:
            more += " AND (t.assignee IS NULL OR t.assignee NOT IN " + in_list("s", sorted(skip), params) + ")"
        rows = tx.all(
            "SELECT t.id, t.board, t.title, t.assignee, t.priority, t.created_at, t.updated_at, t.completed_at, "
            "t.consecutive_failures, t.last_failure_error, t.last_outcome, t.workspace_kind, "
            "t.workspace_path, t.branch_name, t.max_runtime_seconds, t.tenant, t.purpose, t.model, t.goal_id, "
            "(SELECT MAX(c.created_at) FROM task_comments c WHERE c.task_id = t.id) AS last_comment_at, "
            "(SELECT MAX(r.id) FROM task_runs r WHERE r.task_id = t.id) AS last_run_id "
            "FROM tasks t WHERE t.board = :b AND t.status = 'ready' AND t.race_until IS NULL "
            f"AND (t.cooldown_until IS NULL OR t.cooldown_until <= :now){more} "
            f"ORDER BY t.priority DESC, t.created_at, t.id LIMIT {limit_in_statement(limit)}",
            params,
        )[:limit]
        if rows and any(not r["assignee"] for r in rows):
            fallback = default_assignee(tx, board)
            for r in rows:
                if not r["assignee"]:
                    r["default_assignee"] = fallback
        return rows
    return db.read(_r)


def folders_in_use(db: Database, folders: list[str]) -> dict[str, tuple[str, int | None]]:
    """Which of ``folders`` (shared ``dir:`` workspaces, normalized paths) an open run works in:
    folder → (task id, run id). An open run of a ``dir:`` task (a worker's or a review run)
    counts from the moment it opens, before its spawn records where it runs; any other open run
    (one in a board's shared target directory) by the workspace its spawn recorded. Reads only
    running tasks and tasks in review (what a pass reads anyway)."""
    if not folders:
        return {}
    wanted = set(folders)

    def _r(tx: Tx) -> dict[str, tuple[str, int | None]]:
        out: dict[str, tuple[str, int | None]] = {}
        for status in ("running", "review"):
            for row in tx.all(
                    "SELECT t.id, t.workspace_kind, t.workspace_path, r.id AS run_id, r.workspace_path AS run_ws "
                    "FROM tasks t JOIN task_runs r ON r.task_id = t.id AND r.status = 'open' "
                    f"WHERE t.status = '{status}'", {}):
                for where in (row["run_ws"], row["workspace_path"] if row["workspace_kind"] == "dir" else None):
                    if where and os.path.normpath(where) in wanted:
                        out.setdefault(os.path.normpath(where), (row["id"], row["run_id"]))
        return out
    return db.read(_r)


#: how a run that lost its agent's network starts its error (:func:`network_failures` counts them)
NETWORK_ERROR = "network failure"


def network_failures(db: Database, task_id: str, limit: int = 50) -> int:
    """How many of the task's last closed runs in a row ended with a network failure."""
    def _r(tx: Tx) -> int:
        rows = tx.all("SELECT error FROM task_runs WHERE task_id = :t AND status = 'closed' ORDER BY id DESC LIMIT :n",
                      {"t": task_id, "n": limit})
        count = 0
        for r in rows:
            if not str(r["error"] or "").startswith(NETWORK_ERROR):
                break
            count += 1
        return count
    return db.read(_r)


def budget_refusals_in(tx: Tx, rows: list[Row]) -> dict[str, str]:
    """Of ready tasks about to be claimed together, those the budget gate would block, with
    why (what a dry run says; nothing is written)."""
    if not rows or tx.scalar("SELECT 1 FROM budgets LIMIT 1") is None:
        return {}
    ok: list[Row] = []
    out: dict[str, str] = {}
    for r in rows:
        why = budgets.gate_in(tx, r, also=ok)
        if why is None:
            ok.append(r)
        else:
            out[str(r["id"])] = why
    return out


def last_runs(db: Database, run_ids: list[int]) -> dict[int, Row]:
    """Pid, host, outcome and times of the given runs (for stopping a previous worker)."""
    ids = [int(r) for r in run_ids if r is not None]
    if not ids:
        return {}
    def _r(tx: Tx) -> dict[int, Row]:
        params: dict[str, Any] = {}
        rows = tx.all(
            "SELECT id, task_id, board, status, outcome, worker_pid, worker_host, started_at, ended_at, error, "
            "metadata FROM task_runs WHERE id IN " + in_list("r", ids, params),
            params,
        )
        return {int(r["id"]): r for r in rows}
    return db.read(_r)


def recent_comments(db: Database, task_id: str, since: float) -> list[Row]:
    def _r(tx: Tx) -> list[Row]:
        return tx.all(
            "SELECT author, body, created_at FROM task_comments WHERE task_id = :t AND created_at >= :s "
            "ORDER BY id DESC LIMIT 30",
            {"t": task_id, "s": since},
        )
    return db.read(_r)


def last_event_of(db: Database, task_id: str, kind: str) -> Row | None:
    def _r(tx: Tx) -> Row | None:
        return tx.one(
            "SELECT actor, created_at, payload FROM task_events WHERE task_id = :t AND kind = :k "
            "ORDER BY id DESC LIMIT 1",
            {"t": task_id, "k": kind},
        )
    return db.read(_r)


#: what starting a claimed task's worker needs (read in the claim's transaction, so it is current)
_CLAIMED_FIELDS = "t.id, t.board, t.title, t.assignee, t.tenant, t.workspace_kind, t.workspace_path, t.branch_name"


def claim_candidates_sql(ids: str, *, limited: bool, dialect: str) -> str:
    """The read that locks a claim's chosen tasks (``ids``: their parenthesized list of
    parameters; ``limited``: only the first ``:lim`` still ready, by priority then age) with
    what their workers' start needs and whether a parent is pending. The tasks are found by key
    whatever the planner's statistics say of the ready queue or the board (:data:`STILL_READY`;
    no board in the statement: the caller drops a row of another board, which a task moved
    since it was chosen would be)."""
    sql = ("SELECT " + _CLAIMED_FIELDS + ", t.goal_id, t.purpose, t.current_run_id, t.parents_override = 0 AND EXISTS ("
           " SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id"
           " WHERE l.child_id = t.id AND p.status NOT IN ('done', 'archived')) AS pending "
           f"FROM tasks t WHERE {still_ready('t')} AND t.race_until IS NULL AND t.id IN " + ids)
    if limited:
        sql += " ORDER BY t.priority DESC, t.created_at, t.id LIMIT :lim"
    if dialect == "postgresql":
        sql += " FOR UPDATE OF t SKIP LOCKED"
    return sql


#: a claimed group's compare-and-swap, its tasks found by key (:data:`STILL_READY`); ``{values}``
#: is its ``(task id, run id)`` list. One statement opens ``tasks`` and its indexes once, where one
#: per task opened them for each: a fifth of the time for a group of 64 on PostgreSQL
CLAIM_SWAP_MANY_SQL = (
    "UPDATE tasks SET status = 'running', current_run_id = v.column2, claim_lock = :lock, "
    "claim_expires = :exp, worker_pid = NULL, worker_host = :host, last_heartbeat_at = :now, "
    "started_at = COALESCE(started_at, :now), updated_at = :now FROM (VALUES {values}) v "
    f"WHERE tasks.id = v.column1 AND tasks.{STILL_READY} AND tasks.current_run_id IS NULL"
)


def _claim_batch(tx: Tx, board: str, ids: list[str], ttl: int | None, host: str | None, actor: str | None,
                 limit: int | None = None, refused: dict[str, str] | None = None) -> list[Row]:
    """Set-based claim: one read, one multi-row insert of the runs, one batched update of the
    tasks and a ``claimed`` event each — the same rows and events :func:`runs.claim` writes.
    A task with a parent not done (demoted) or an unexpected current run takes the one-by-one
    path of ``runs.claim_in``. ``limit``: only the first that many of ``ids`` still ready and not
    being claimed by another transaction, by priority then age (the ready queue's order).
    ``refused``: filled with the tasks a budget blocked instead (task id → why)."""
    if not ids:
        return []
    params: dict[str, Any] = {}
    sql = claim_candidates_sql(in_list("i", ids, params), limited=limit is not None, dialect=tx.db.dialect)
    if limit is not None:
        params["lim"] = int(limit)
    found = [r for r in tx.all(sql, params) if r["board"] == board]
    # the budgets: a task whose scope cannot afford one more run is blocked, not claimed
    allowed = {r["id"] for r in budgets.gate_batch_in(tx, [r for r in found if not r["pending"]], actor=actor,
                                                            refused=refused)}
    free = {r["id"]: r for r in found if r["pending"] or r["id"] in allowed}
    fast = [free[i] for i in ids if i in free and not free[i]["pending"] and free[i]["current_run_id"] is None]
    slow = [i for i in ids if i in free and (free[i]["pending"] or free[i]["current_run_id"] is not None)]
    out: dict[str, Row] = {}
    if fast:
        now = time.time()
        expires = now + claim_ttl(tx, ttl)
        lock = f"{host or ''}::{now}"
        values, vp = [], {"b": board, "exp": expires, "host": host, "now": now, "lock": lock}
        for n, row in enumerate(fast):
            vp.update({f"i{n}": row["id"], f"p{n}": row["assignee"]})
            values.append(f"(:i{n}, :p{n})")
        # the runs' attempt numbers by one subquery over a list of (task, profile): planned once
        # whatever the group's size (a subquery in each row of a VALUES list is planned once per
        # row: 5 ms to plan a group of 64 on PostgreSQL, where this takes 0.25)
        made = tx.all(
            "INSERT INTO task_runs (task_id, board, profile, attempt, status, claim_lock, claim_expires, "
            "worker_pid, worker_host, started_at, last_heartbeat_at, synthetic) "
            "SELECT v.column1, :b, v.column2, (SELECT COALESCE(MAX(r.attempt), 0) + 1 FROM task_runs r "
            "WHERE r.task_id = v.column1), 'open', :lock, :exp, NULL, :host, :now, :now, 0 FROM (VALUES "
            + ", ".join(values) + ") v RETURNING id, task_id", vp)
        run_of = {r["task_id"]: int(r["id"]) for r in made}
        sp: dict[str, Any] = {"lock": lock, "exp": expires, "host": host, "now": now}
        swap = values_list("s", [(row["id"], run_of[row["id"]]) for row in fast], sp)
        tx.execute(CLAIM_SWAP_MANY_SQL.format(values=swap), sp)
        if tx.rowcount != len(fast):  # pragma: no cover - the rows are locked (write lock, FOR UPDATE)
            raise Conflict(f"{len(fast) - max(tx.rowcount, 0)} of {len(fast)} tasks were claimed by someone else")
        tx.events(board, [(row["id"], "claimed", claimed_payload(host, row["assignee"]), run_of[row["id"]], actor, now)
                          for row in fast])
        for row in fast:
            out[row["id"]] = {"claimed": True, "id": row["id"], "run_id": run_of[row["id"]], "claim_lock": lock,
                              "claim_expires": expires, "assignee": row["assignee"], "status": "running"}
    for task_id in slow:
        res = claim_in(tx, board, task_id, ttl=ttl, host=host, actor=actor)
        if res["claimed"]:
            out[task_id] = res
    result = []
    for task_id in ids:  # keep the caller's order (priority, then age)
        if task_id in out:
            task = {k: v for k, v in free[task_id].items() if k not in ("pending", "current_run_id", "supervised")}
            result.append({**out[task_id], "task": task})
    # claims alone give no other host's dispatcher anything to do (a budget's block or the
    # one-by-one path, which may demote a task, still wake them)
    tx.wakes_hosts = bool(slow) or len(allowed) < sum(1 for r in found if not r["pending"])
    return result


def claim_batch(
    db: Database, board: str, task_ids: list[str], *, ttl: int | None = None, host: str | None = None,
    actor: str | None = "dispatcher", limit: int | None = None,
) -> list[Row]:
    """Claim the given ready tasks in one transaction; tasks someone else holds are skipped.

    ``limit``: claim at most that many, the first still ready by priority then age; on
    PostgreSQL rows another transaction is claiming right now are passed over (``SKIP
    LOCKED``), so hosts claiming from the same candidates at once take different tasks.
    Each claimed item has ``run_id`` and ``task`` (the fields a worker's start needs).
    """
    return db.write(_claim_batch, board, list(task_ids), ttl, host, actor, limit)


@dataclass(frozen=True)
class ClaimedToStart:
    """What :func:`claim_to_start` took: the claimed tasks (as :func:`claim_batch` answers), a run
    token for each (when asked for) and what each worker's files need, by task id; and the tasks
    a budget blocked instead of letting them be claimed (task id → why)."""

    claimed: list[Row]
    tokens: dict[int, str]
    inputs: dict[str, PrepareInputs | AgentboardError]
    refused: dict[str, str] = field(default_factory=dict)


def claim_to_start(
    db: Database, board: str, task_ids: list[str], *, ttl: int | None = None, host: str | None = None,
    actor: str | None = "dispatcher", limit: int | None = None, tokens: bool = False, wiki_on: bool = False,
) -> ClaimedToStart:
    """:func:`claim_batch`, and in the same transaction the claimed runs' tokens (``tokens``:
    ``kernel.tokens.create_run_tokens``) and what their workers' files need
    (``worker_protocol.prepare_inputs_many``): what a dispatcher needs before it starts the
    workers, in one round of the database instead of three."""
    def _w(tx: Tx) -> ClaimedToStart:
        refused: dict[str, str] = {}
        claimed = _claim_batch(tx, board, list(task_ids), ttl, host, actor, limit, refused)
        if not claimed:
            return ClaimedToStart([], {}, {}, refused)
        runs = [(c["id"], int(c["run_id"])) for c in claimed]
        issued = create_run_tokens_in(tx, board, runs) if tokens else {}
        return ClaimedToStart(claimed, issued, prepare_inputs_many_in(tx, board, [c["id"] for c in claimed],
                                                                      wiki_on=wiki_on), refused)
    return db.write(_w)


def _keep_reported_workspace(tx: Tx, it: dict[str, Any]) -> None:
    """A worker that reported (review, or a block) before its spawn was recorded: its run is
    closed, but its work is in the workspace the spawn made, so the task keeps that workspace's
    facts (kind, path, branch, base) — the approval of a task in review integrates its branch."""
    tx.execute(
        "UPDATE tasks SET workspace_path = COALESCE(:ws, workspace_path), workspace_kind = COALESCE(:wk, workspace_kind), "
        "branch_name = COALESCE(:br, branch_name), base_branch = COALESCE(:bb, base_branch) "
        "WHERE id = :id AND current_run_id IS NULL AND EXISTS (SELECT 1 FROM task_runs r WHERE r.id = :r "
        "AND r.task_id = :id AND r.status = 'closed' AND r.outcome IN ('review_requested', 'completed', 'blocked')) "
        "AND NOT EXISTS (SELECT 1 FROM task_runs n WHERE n.task_id = :id AND n.id > :r)",
        {"ws": it.get("workspace"), "wk": it.get("workspace_kind"), "br": it.get("branch"),
         "bb": it.get("base_branch"), "id": it["task_id"], "r": int(it["run_id"])})


def _record_spawns(tx: Tx, board: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set-based ``runs.record_spawn`` for several workers: the same rows and events, with a
    compare-and-swap on each task's current run (a stale item writes nothing)."""
    params: dict[str, Any] = {}
    # by id alone (the board is checked here): the primary key whatever the planner's statistics say
    sql = ("SELECT id, board, current_run_id FROM tasks WHERE id IN "
           + in_list("i", [it["task_id"] for it in items], params))
    if tx.db.dialect == "postgresql":
        sql += " FOR UPDATE"
    current = {r["id"]: r["current_run_id"] for r in tx.all(sql, params) if r["board"] == board}
    ok = [it for it in items if current.get(it["task_id"]) == int(it["run_id"])]
    stale = []
    for it in items:
        if current.get(it["task_id"]) != int(it["run_id"]):
            _keep_reported_workspace(tx, it)
            task = tx.one("SELECT id, status, current_run_id FROM tasks WHERE id = :t", {"t": it["task_id"]})
            error = (str(stale_error(task, int(it["run_id"]))) if task is not None
                     else f"task {it['task_id']} no longer exists")
            stale.append({**it, "error": error})
    if not ok:
        return stale
    now = time.time()
    rows = [{"pid": int(it["pid"]), "host": it.get("host"), "ws": it.get("workspace"), "log": it.get("log_path"),
             "wk": it.get("workspace_kind"), "br": it.get("branch"), "bb": it.get("base_branch"),
             "now": now, "id": it["task_id"], "r": int(it["run_id"])} for it in ok]
    # one statement for the group's tasks and one for its runs (see :data:`CLAIM_SWAP_MANY_SQL`)
    tp: dict[str, Any] = {"now": now}
    values = values_list("w", [(r["id"], r["r"], r["pid"], r["host"], r["ws"], r["wk"], r["br"], r["bb"])
                               for r in rows], tp)
    tx.execute(
        "UPDATE tasks SET worker_pid = v.column3, worker_host = COALESCE(v.column4, worker_host), "
        "workspace_path = COALESCE(v.column5, workspace_path), workspace_kind = COALESCE(v.column6, workspace_kind), "
        "branch_name = COALESCE(v.column7, branch_name), base_branch = COALESCE(v.column8, base_branch), "
        f"updated_at = :now FROM (VALUES {values}) v WHERE tasks.id = v.column1 AND tasks.current_run_id = v.column2",
        tp)
    rp: dict[str, Any] = {}
    values = values_list("w", [(r["r"], r["pid"], r["host"], r["log"], r["ws"]) for r in rows], rp)
    tx.execute(
        "UPDATE task_runs SET worker_pid = v.column2, worker_host = COALESCE(v.column3, worker_host), "
        f"log_path = v.column4, workspace_path = v.column5 FROM (VALUES {values}) v WHERE task_runs.id = v.column1",
        rp)
    spawned = []
    for it in ok:
        payload = {"pid": int(it["pid"]), "host": it.get("host"), "log": it.get("log_path"),
                   "workspace": it.get("workspace")}
        payload.update(it.get("extra") or {})
        # the event's time is the process's start (``started``, when the caller knows it): the
        # record follows it by the rest of its group's starts, and a later group's by the claim
        # of the group after it
        at = min(float(it["started"]), now) if it.get("started") else now
        spawned.append((it["task_id"], "spawned", payload, int(it["run_id"]), "dispatcher", at))
    tx.events(board, spawned)
    tx.wakes_hosts = bool(stale)  # a worker recorded gives no other host anything to do
    return stale


def record_spawns(db: Database, board: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Record several started workers in one transaction (a ``spawned`` event each).

    Each item: ``task_id``, ``run_id``, ``pid`` and optionally ``host``, ``log_path``,
    ``workspace``, ``workspace_kind``, ``branch``, ``base_branch`` (stored on the task),
    ``extra`` (merged into the event payload), ``started`` (the process's start, epoch seconds:
    the event's time; else the record's). Returns the items whose run is no
    longer current (reclaimed between the claim and the spawn), each with an ``error``; their
    workers must be stopped.
    """
    if not items:
        return []
    return db.write(_record_spawns, board, list(items))


def _complete_runs(tx: Tx, board: str, items: list[dict[str, Any]]) -> dict[int, str]:
    out: dict[int, str] = {}
    for it in items:
        try:
            report = Report(summary=it.get("summary"), metadata=it.get("metadata"), usage=it.get("usage"))
            complete_in(tx, board, it["task_id"], report, run_id=int(it["run_id"]), actor=it.get("actor"),
                        verified=True, exit_code=it.get("exit_code"))
        except StaleRun:  # raised before anything is written for this item
            out[int(it["run_id"])] = "stale"
        else:
            out[int(it["run_id"])] = "completed"
    return out


def complete_runs(db: Database, board: str, items: list[dict[str, Any]]) -> dict[int, str]:
    """Complete several running tasks on their runs in one transaction (the dispatcher, after
    their workers exited with a plain successful result): per item exactly what
    ``runs.complete(..., run_id=, verified=True, exit_code=)`` does, with its events.

    Each item: ``task_id``, ``run_id``, ``summary`` and optionally ``metadata``, ``usage``,
    ``actor``, ``exit_code``. Returns ``{run id: "completed" | "stale" | "invalid"}``; an invalid
    item (summary, metadata or usage refused) is not applied, so the caller can report it the
    one-by-one way.
    """
    status: dict[int, str] = {}
    valid = []
    for it in items:
        try:
            summary = it.get("summary")
            if summary is not None:
                summary = model.body(summary, model.SUMMARY_MAX, "summary").strip() or None
            metadata = it.get("metadata")
            if metadata is not None and (not isinstance(metadata, dict) or len(dump_json(metadata)) > model.METADATA_MAX):
                raise InvalidInput("metadata")
            usage_params(it.get("usage"))
        except InvalidInput:
            status[int(it["run_id"])] = "invalid"
            continue
        valid.append({**it, "summary": summary})
    if valid:
        status.update(db.write(_complete_runs, board, valid))
    return status


def _promote_pending(tx: Tx, board: str, limit: int) -> list[str]:
    rows = tx.all(
        "SELECT t.id, t.assignee FROM tasks t WHERE t.board = :b AND t.status = 'todo' "
        "AND (t.not_before IS NULL OR t.not_before <= :now) AND COALESCE(t.block_kind, '') <> 'held' "
        "AND NOT EXISTS ("
        " SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id "
        " WHERE l.child_id = t.id AND p.status NOT IN ('done', 'archived')) "
        "ORDER BY t.priority DESC, t.created_at LIMIT :n",
        {"b": board, "n": limit, "now": time.time()},
    )
    if not rows:
        return []
    fallback = default_assignee(tx, board)
    now = time.time()
    out = []
    for row in rows:
        assignee = row["assignee"] or fallback
        if not assignee:
            continue
        tx.execute(
            "UPDATE tasks SET status = 'ready', assignee = :a, updated_at = :now WHERE id = :id AND status = 'todo'",
            {"a": assignee, "now": now, "id": row["id"]},
        )
        if tx.rowcount:
            tx.event(board, row["id"], "promoted", {"by": "dispatcher", "safety_net": True}, actor="dispatcher", at=now)
            out.append(row["id"])
    return out


def promote_pending(db: Database, board: str, *, limit: int = 200) -> list[str]:
    """Safety net: promote todo tasks whose parents are all done and that have an assignee (but
    for those a person holds there, ``states.HELD``)."""
    def _has_any(tx: Tx) -> bool:
        sql = (
            "SELECT 1 AS x FROM tasks t WHERE t.board = :b AND t.status = 'todo' "
            "AND COALESCE(t.block_kind, '') <> 'held' AND NOT EXISTS ("
            " SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id "
            " WHERE l.child_id = t.id AND p.status NOT IN ('done', 'archived'))"
        )
        if not default_assignee(tx, board):
            sql += " AND t.assignee IS NOT NULL"
        return tx.one(sql + " LIMIT 1", {"b": board}) is not None
    if not db.read(_has_any):
        return []
    return db.write(_promote_pending, board, limit)


# -- review runs ----------------------------------------------------------------------------------

_REVIEWING = (
    "SELECT r.id, r.task_id, t.board, r.profile, r.worker_pid, r.worker_host, r.started_at, r.claim_expires, "
    "r.log_path, r.workspace_path, r.metadata FROM tasks t JOIN task_runs r ON r.task_id = t.id "
    "WHERE t.status = 'review' AND r.status = 'open' AND r.claim_lock LIKE :rv"
)


def review_candidates(db: Database, board: str, limit: int) -> list[Row]:
    """Tasks of ``board`` in review that a reviewer should look at: sent to review by a run
    (``entry_run``, with that run's ``worker_profile``), no open run, and no
    ``review_unavailable`` since. Each row also counts the review runs that ended since that
    entry without a verdict (``failed_reviews``; a reviewer's rate limit is none) and gives the
    last one's ``last_error``, ``last_outcome``, ``last_metadata`` and ``last_ended_at``."""
    def _r(tx: Tx) -> list[Row]:
        return tx.all(
            "SELECT t.id, t.board, t.title, t.assignee, t.tenant, t.workspace_kind, t.workspace_path, "
            "t.branch_name, t.base_branch, t.max_retries, e.run_id AS entry_run, "
            "(SELECT w.profile FROM task_runs w WHERE w.id = e.run_id) AS worker_profile, "
            "(SELECT COUNT(*) FROM task_runs f WHERE f.task_id = t.id AND f.claim_lock LIKE :rv "
            " AND f.id > COALESCE(e.run_id, 0) AND COALESCE(f.outcome, '') <> 'rate_limited') AS failed_reviews, "
            "l.error AS last_error, l.outcome AS last_outcome, l.metadata AS last_metadata, "
            "l.ended_at AS last_ended_at "
            "FROM tasks t JOIN task_events e ON e.id = (SELECT MAX(x.id) FROM task_events x "
            " WHERE x.task_id = t.id AND x.kind = 'review_requested') "
            "LEFT JOIN task_runs l ON l.id = (SELECT MAX(f.id) FROM task_runs f WHERE f.task_id = t.id "
            " AND f.claim_lock LIKE :rv2 AND f.id > COALESCE(e.run_id, 0)) "
            "WHERE t.board = :b AND t.status = 'review' "
            "AND NOT EXISTS (SELECT 1 FROM task_runs o WHERE o.task_id = t.id AND o.status = 'open') "
            "AND NOT EXISTS (SELECT 1 FROM task_events u WHERE u.task_id = t.id "
            " AND u.kind = 'review_unavailable' AND u.id > e.id) "
            "ORDER BY t.priority DESC, t.updated_at, t.id LIMIT :n",
            {"b": board, "n": limit, "rv": REVIEW_CLAIM + "%", "rv2": REVIEW_CLAIM + "%"})
    return db.read(_r)


def review_facts(db: Database, board: str) -> tuple[Row, dict[str, Row]]:
    """What choosing a board's reviewer reads: the board's settings and the profiles (by name)."""
    def _r(tx: Tx) -> tuple[Row, dict[str, Row]]:
        return (board_settings(tx, board),
                {p["name"]: p for p in tx.all("SELECT name, enabled, model FROM profiles")})
    return db.read(_r)


def record_review_spawn(db: Database, board: str, task_id: str, run_id: int, *, pid: int, host: str | None,
                        log_path: str, workspace: str, extra: dict[str, Any]) -> bool:
    """Record the started worker of review run ``run_id`` (a ``spawned`` event with
    ``review_run: true``); False when the run was closed meanwhile (the worker must be stopped)."""
    def _w(tx: Tx) -> bool:
        tx.execute("UPDATE task_runs SET worker_pid = :pid, worker_host = COALESCE(:host, worker_host), "
                   "log_path = :log, workspace_path = :ws WHERE id = :r AND status = 'open'",
                   {"pid": pid, "host": host, "log": log_path, "ws": workspace, "r": run_id})
        if tx.rowcount != 1:
            return False
        tx.event(board, task_id, "spawned", {"pid": pid, "host": host, "log": log_path, "workspace": workspace,
                                              "review_run": True, **extra}, run_id=run_id, actor="dispatcher")
        return True
    return db.write(_w)


# -- reads for exit handling, gc and board targets ----------------------------------------------


def task(db: Database, board: str, task_id: str) -> Row:
    """The task as :func:`common.task_out` gives it (NotFound when ``board`` has no such task)."""
    return db.read(lambda tx: task_out(get_task(tx, board, task_id)))


def sent_to_review_by(db: Database, board: str, task_id: str, run_id: int) -> bool:
    """True when the task is in review because of run ``run_id``: that run asked for review and
    is the task's last closed run (not a later one)."""
    def _r(tx: Tx) -> Row | None:
        return tx.one(
            "SELECT t.status, r.outcome, (SELECT MAX(x.id) FROM task_runs x WHERE x.task_id = t.id "
            "AND x.status = 'closed') AS last_closed FROM tasks t JOIN task_runs r ON r.id = :r "
            "WHERE t.id = :t AND t.board = :b", {"t": task_id, "b": board, "r": run_id})
    st = db.read(_r)
    return (st is not None and st["status"] == "review" and st["outcome"] == "review_requested"
            and int(st["last_closed"] or 0) == run_id)


def gc_statuses(db: Database, task_ids: list[str]) -> tuple[dict[str, str], set[str]]:
    """The status of each given task, and those of them with a child still active (a child may
    still read their workspace)."""
    if not task_ids:
        return {}, set()

    def _r(tx: Tx) -> tuple[dict[str, str], set[str]]:
        status: dict[str, str] = {}
        busy: set[str] = set()
        for i in range(0, len(task_ids), 500):
            chunk = task_ids[i:i + 500]
            p: dict[str, Any] = {}
            for row in tx.all("SELECT id, status FROM tasks WHERE id IN " + in_list("i", chunk, p), p):
                status[row["id"]] = row["status"]
            p = {}
            for row in tx.all(
                "SELECT DISTINCT l.parent_id FROM task_links l JOIN tasks c ON c.id = l.child_id "
                "WHERE c.status NOT IN ('done', 'archived') AND l.parent_id IN " + in_list("i", chunk, p), p):
                busy.add(row["parent_id"])
        return status, busy
    return db.read(_r)


def finished_worktree_tasks(db: Database, board: str) -> list[Row]:
    """Done and archived tasks of ``board`` whose workspace is a ``.worktrees/`` checkout
    (id, status, workspace_path)."""
    return db.read(lambda tx: tx.all(
        "SELECT id, status, workspace_path FROM tasks WHERE board = :b AND workspace_kind != 'dir' "
        "AND workspace_path LIKE :wt AND status IN ('done', 'archived')", {"b": board, "wt": "%/.worktrees/%"}))


def running_task_ids(db: Database, board: str) -> set[str]:
    """Ids of the running tasks of ``board``."""
    return {r["id"] for r in db.read(lambda tx: tx.all(
        "SELECT id FROM tasks WHERE board = :b AND status = 'running'", {"b": board}))}


def board_with_workdir(db: Database, path: str, other_than: str | None = None) -> str | None:
    """The slug of the board (not archived, not ``other_than``) whose target directory is ``path``."""
    row = db.read(lambda tx: tx.one(
        "SELECT slug FROM boards WHERE default_workdir = :w AND archived = 0 AND slug != :b",
        {"w": path, "b": other_than or ""}))
    return str(row["slug"]) if row else None


__all__ = [
    "CLAIM_SWAP_MANY_SQL", "COOLDOWNS_SQL", "RUNNING_LAPSED_SQL", "RUNNING_OWN_SQL", "RUNNING_UNRECORDED_SQL",
    "TIMED_BLOCKS_SQL", "claim_candidates_sql", "ClaimedToStart", "Glance", "load_sql", "PassSnapshot", "glance", "board_with_workdir", "claim_batch", "claim_to_start", "complete_runs", "finished_worktree_tasks", "gc_statuses", "limit_in_statement",
    "extend_claims", "last_event_of", "last_runs", "pass_snapshot", "promote_pending", "ready_batch", "recent_comments",
    "record_review_spawn", "record_spawns", "review_candidates", "review_facts", "running_task_ids", "sent_to_review_by", "task",
]
