"""Read models shared by every surface: list, board view, task detail, stats, assignees, runs, events.

:func:`task_detail` is the one read model of a task with its surroundings: ``show``, ``GET
/api/tasks/{id}``, the ``kanban_show`` MCP tool and the worker context (``agentboard context``,
``.board/context.md``, ``.board/task.json``) all read it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from ..domain import states
from ..domain.errors import AgentboardError, InvalidInput, NotFound
from ..store.engine import CLAIMABLE, Database, Row, Tx, in_list, pg_event_horizon
from . import card_lines
from .attempts import race_cards
from .common import (
    get_task,
    run_out,
    task_out,
)
from .maintenance import COUNT_ROWS_PG, boards_to_fold, compact_task_counts
from .rows import (
    AssigneeRow,
    BoardStats,
    BoardView,
    EventRow,
    RunRow,
    TaskCard,
    TaskDetail,
    TenantRow,
)

CARD_COLUMNS = (
    "id, board, title, assignee, status, priority, tenant, goal_id, created_at, updated_at, started_at, "
    "completed_at, block_kind, block_reason, result, review_required, consecutive_failures, current_run_id, "
    "worker_host, last_heartbeat_at, last_outcome, workspace_kind, branch_name, integration, pr_url, model, cooldown_until, "
    "purpose, race_until"
)


def _statuses(status: str | Iterable[str] | None) -> list[str]:
    if status is None:
        return []
    items = [status] if isinstance(status, str) else list(status)
    out: list[str] = []
    for item in items:
        for s in str(item).split(","):
            s = s.strip()
            if not s:
                continue
            if s not in states.STATUSES:
                raise InvalidInput(f"unknown status {s!r}; use one of {', '.join(states.STATUSES)}")
            out.append(s)
    return out


def _filters(
    board: str, *, assignee: str | None = None, status: str | Iterable[str] | None = None,
    tenant: str | None = None, goal: str | None = None, search: str | None = None,
    include_archived: bool = False, supervision: bool = True,
) -> tuple[str, dict[str, Any]]:
    where = ["board = :board", NOT_ATTEMPT]
    params: dict[str, Any] = {"board": board}
    if not supervision:
        where.append(NOT_SUPERVISION)
    sts = _statuses(status)
    if sts:
        where.append("status IN " + in_list("s", sts, params))
    elif not include_archived:
        where.append("status != 'archived'")
    if assignee:
        if assignee in ("none", "-"):
            where.append("assignee IS NULL")
        else:
            where.append("assignee = :assignee")
            params["assignee"] = assignee
            if sts == [states.READY]:  # read from the ready tasks' assignee index
                where.append(CLAIMABLE)
    if tenant:
        where.append("tenant = :tenant")
        params["tenant"] = tenant
    if goal:
        where.append("goal_id = :goal")
        params["goal"] = goal
    if search:
        where.append("(LOWER(title) LIKE :q OR LOWER(body) LIKE :q OR id = :qid)")
        params["q"] = "%" + search.lower().replace("\\", "") + "%"
        params["qid"] = search.strip()
    return " AND ".join(where), params


#: the filter that leaves the supervisor's own tasks out (``tasks.purpose``)
NOT_SUPERVISION = "COALESCE(purpose, '') <> 'supervision'"
#: the filter that leaves a race's attempts out (their own tasks: ``kernel.races``); the race's
#: card and ``attempts`` show them
NOT_ATTEMPT = "race_of IS NULL"


def list_tasks(
    db: Database, board: str, *, assignee: str | None = None, status: str | Iterable[str] | None = None,
    tenant: str | None = None, goal: str | None = None, search: str | None = None,
    include_archived: bool = False, limit: int = 200, offset: int = 0, supervision: bool = False,
    newest_first: bool = False,
) -> list[TaskCard]:
    """A board's tasks, by priority then age (``newest_first``: the newest first); the
    supervisor's own tasks only with ``supervision``."""
    where, params = _filters(board, assignee=assignee, status=status, tenant=tenant, goal=goal,
                             search=search, include_archived=include_archived, supervision=supervision)
    if limit < 0 or offset < 0:
        raise InvalidInput("limit and offset must not be negative")
    params.update(lim=int(limit), off=int(offset))

    def _r(tx: Tx) -> list[Row]:
        return tx.all(
            f"SELECT {CARD_COLUMNS} FROM tasks WHERE {where} "
            + ("ORDER BY created_at DESC, id DESC" if newest_first else "ORDER BY priority DESC, created_at, id")
            + " LIMIT :lim OFFSET :off",
            params,
        )
    return [cast(TaskCard, task_out(r)) for r in db.read(_r)]


def board_view(
    db: Database, board: str, *, tenant: str | None = None, assignee: str | None = None,
    goal: str | None = None, search: str | None = None, include_archived: bool = False,
    per_column: int = 100, lanes: bool = False, supervision: bool = False,
) -> BoardView:
    """Columns by status with counts and the first ``per_column`` cards of each. The
    supervisor's own tasks are left out unless ``supervision`` (``hidden_supervision``: how
    many were left out)."""
    cols = [s for s in states.STATUSES if include_archived or s != states.ARCHIVED]

    def _r(tx: Tx) -> Row:
        where, params = _filters(board, assignee=assignee, tenant=tenant, goal=goal, search=search,
                                 include_archived=True, supervision=supervision)
        counts = {s: 0 for s in cols}
        hidden = 0
        if not supervision:  # the supervisor's tasks, counted through their own small index
            sup = {r["status"]: int(r["n"]) for r in tx.all(
                "SELECT status, COUNT(*) AS n FROM tasks WHERE board = :board AND purpose = 'supervision' "
                "GROUP BY status", {"board": board})}
            hidden = sum(n for s, n in sup.items() if s in counts)
        base = f"board = :board AND {NOT_ATTEMPT}"
        if where in (base, base + " AND " + NOT_SUPERVISION):
            # the triggers' running counts: no pass over a large board (docs/kernel.md)
            if tx.db.dialect == "postgresql":
                # the deltas have no index (0025: a status change writes one entry fewer), so
                # one pass over them reads every board's, and folds any that piled up
                every = tx.all(f"SELECT board, status, SUM(d) AS n, COUNT(*) AS k FROM {COUNT_ROWS_PG} "
                               "GROUP BY board, status")
                rows = [r for r in every if r["board"] == board]
                fold.extend(boards_to_fold(every))
            else:
                rows = tx.all("SELECT status, n FROM task_counts WHERE board = :board", params)
            if not supervision:
                rows = [{**r, "n": int(r["n"]) - sup.get(r["status"], 0)} for r in rows]
            # the races' attempts, through their own small index
            att = {r["status"]: int(r["n"]) for r in tx.all(
                "SELECT status, COUNT(*) AS n FROM tasks WHERE board = :board AND race_of IS NOT NULL "
                "GROUP BY status", {"board": board})}
            if att:
                rows = [{**r, "n": int(r["n"]) - att.get(r["status"], 0)} for r in rows]
        else:
            rows = tx.all(f"SELECT status, COUNT(*) AS n FROM tasks WHERE {where} GROUP BY status", params)
        for r in rows:
            if r["status"] in counts:
                counts[r["status"]] = int(r["n"])
        columns: list[Row] = []
        ids: list[str] = []
        by_status: dict[str, list[Row]] = {}
        if tx.db.dialect == "postgresql":  # every column's first cards in one statement
            shown = [s for s in cols if counts[s]]
            if shown:
                sql = " UNION ALL ".join(
                    f"(SELECT {CARD_COLUMNS} FROM tasks WHERE {where} AND status = :col{i} "
                    "ORDER BY priority DESC, created_at, id LIMIT :lim)" for i in range(len(shown)))
                cols_params = {f"col{i}": s for i, s in enumerate(shown)}
                for r in tx.all(sql, {**params, **cols_params, "lim": per_column}):
                    by_status.setdefault(r["status"], []).append(r)
                for s, rows_ in by_status.items():  # (a parallel plan may interleave the branches)
                    rows_.sort(key=lambda r: (-(r["priority"] or 0), r["created_at"] or 0, r["id"]))
                    by_status[s] = [task_out(r) for r in rows_]
        for s in cols:
            cards: list[Row] = by_status.get(s, [])
            if counts[s] and tx.db.dialect != "postgresql":
                cards = [task_out(r) for r in tx.all(
                    f"SELECT {CARD_COLUMNS} FROM tasks WHERE {where} AND status = :col "
                    "ORDER BY priority DESC, created_at, id LIMIT :lim",
                    {**params, "col": s, "lim": per_column},
                )]
            ids.extend(c["id"] for c in cards)
            columns.append({"status": s, "count": counts[s], "tasks": cards})
        extras = _card_extras(tx, ids, {c["id"]: c for col in columns for c in col["tasks"]})
        card_lines.run_starts(tx, [c for col in columns for c in col["tasks"]])
        card_lines.summary_lines(tx, [c for col in columns for c in col["tasks"]])
        races = [c["id"] for col in columns for c in col["tasks"] if c.get("race_until")]
        for tid, race in race_cards(tx, races).items():
            extras.setdefault(tid, {})["race"] = race
        for col in columns:
            for card in col["tasks"]:
                card.update(extras.get(card["id"], {}))
            if lanes and col["status"] == states.RUNNING:
                by: dict[str, list[Row]] = {}
                for card in col["tasks"]:
                    by.setdefault(card["assignee"] or "(unassigned)", []).append(card)
                col["lanes"] = [{"assignee": k, "tasks": v} for k, v in sorted(by.items())]
        return {"board": board, "columns": columns, "total": sum(counts.values()), "hidden_supervision": hidden}

    fold: list[str] = []
    out = db.read(_r)
    for slug in fold:
        compact_task_counts(db, slug)
    return cast(BoardView, out)


#: PostgreSQL: the cards' counts in one statement, the ids as one array
_CARD_EXTRAS_PG = (
    "SELECT x.id, "
    "(SELECT COUNT(*) FROM task_comments m WHERE m.task_id = x.id) AS comment_count, "
    "(SELECT COUNT(*) FROM task_links l WHERE l.child_id = x.id) AS parent_count, "
    "(SELECT COUNT(*) FROM task_links l WHERE l.parent_id = x.id) AS child_count, "
    "(SELECT COUNT(*) FROM task_links l JOIN tasks c ON c.id = l.child_id "
    " WHERE l.parent_id = x.id AND c.status = 'done') AS children_done "
    "FROM unnest(CAST(:ids AS text[])) AS x(id)"
)


def _card_extras(tx: Tx, ids: list[str], card_rows: dict[str, Row]) -> dict[str, Row]:
    out: dict[str, Row] = {i: {"comment_count": 0, "parent_count": 0, "child_count": 0, "children_done": 0} for i in ids}
    if tx.db.dialect == "postgresql":
        if ids:
            for r in tx.all(_CARD_EXTRAS_PG, {"ids": ids}):
                out[r["id"]] = {k: int(r[k]) for k in ("comment_count", "parent_count", "child_count", "children_done")}
            for r in tx.all("SELECT DISTINCT task_id FROM task_events WHERE kind = 'result_degraded' "
                            "AND task_id = ANY(CAST(:ids AS text[]))", {"ids": ids}):
                out[r["task_id"]]["degraded"] = True
    for start in range(0, len(ids) if tx.db.dialect != "postgresql" else 0, 400):
        names: dict[str, Any] = {}
        inlist = in_list("i", ids[start:start + 400], names)
        for r in tx.all(f"SELECT task_id, COUNT(*) AS n FROM task_comments WHERE task_id IN {inlist} GROUP BY task_id", names):
            out[r["task_id"]]["comment_count"] = r["n"]
        for r in tx.all(f"SELECT child_id, COUNT(*) AS n FROM task_links WHERE child_id IN {inlist} GROUP BY child_id", names):
            out[r["child_id"]]["parent_count"] = r["n"]
        for r in tx.all(
            f"SELECT l.parent_id, COUNT(*) AS n, SUM(CASE WHEN c.status = 'done' THEN 1 ELSE 0 END) AS d "
            f"FROM task_links l JOIN tasks c ON c.id = l.child_id WHERE l.parent_id IN {inlist} GROUP BY l.parent_id",
            names,
        ):
            out[r["parent_id"]]["child_count"] = r["n"]
            out[r["parent_id"]]["children_done"] = int(r["d"] or 0)
        # a result that never validated went to review with an extracted summary: marked on the card
        for r in tx.all(f"SELECT DISTINCT task_id FROM task_events WHERE kind = 'result_degraded' "
                        f"AND task_id IN {inlist}", names):
            out[r["task_id"]]["degraded"] = True
    # a task assigned to a name that is no profile: the dispatcher never starts it (a badge says so)
    profiles = {r["name"] for r in tx.all("SELECT name FROM profiles")}
    for i, card in card_rows.items():
        if card.get("assignee") and card["assignee"] not in profiles:
            out[i]["assignee_unknown"] = True
    return out


def _decoded(text: str | None) -> Any:
    """A JSON list column decoded (an unreadable value reads as an empty list)."""
    try:
        return json.loads(text or "[]")
    except ValueError:
        return []


def task_detail_in(tx: Tx, board: str, task_id: str, *, events: int = 50) -> TaskDetail:
    """:func:`task_detail` inside a transaction, for kernel reads of several tasks in one."""
    found = task_details_in(tx, board, [task_id], events=events)[task_id]
    if isinstance(found, AgentboardError):
        raise found
    return cast(TaskDetail, found)


def _grouped(rows: list[Row], key: str = "of_task") -> dict[Any, list[Row]]:
    """Rows by the value of ``key`` (removed from each row), in their order."""
    out: dict[Any, list[Row]] = {}
    for r in rows:
        out.setdefault(r.pop(key), []).append(r)
    return out


def task_details_in(tx: Tx, board: str, task_ids: Sequence[str], *,
                    events: int = 50) -> dict[str, Row | AgentboardError]:
    """:func:`task_detail` of several tasks of ``board`` with one statement per kind of row for
    all of them (the dispatcher prepares a batch of workers); a task not on the board maps to
    its ``NotFound``. What needs only the ids is sent together (:meth:`Tx.later`: one round
    trip on a pipeline), the handoffs and goals after it; rows of ids not on the board are dropped."""
    ids = list(dict.fromkeys(task_ids))
    p: dict[str, Any] = {}
    inl = in_list("i", ids, p)
    # by id alone (the board is checked here): the primary key whatever the planner's statistics say
    sent_tasks = tx.later(f"SELECT * FROM tasks WHERE id IN {inl}", p)
    sent_parents = tx.later(
        "SELECT l.child_id AS of_task, t.id, t.title, t.status, t.assignee, t.result FROM task_links l "
        f"JOIN tasks t ON t.id = l.parent_id WHERE l.child_id IN {inl} ORDER BY l.created_at, t.id", p)
    sent_children = tx.later(
        "SELECT l.parent_id AS of_task, t.id, t.title, t.status, t.assignee FROM task_links l "
        f"JOIN tasks t ON t.id = l.child_id WHERE l.parent_id IN {inl} ORDER BY l.created_at, t.id", p)
    sent_comments = tx.later(
        f"SELECT task_id AS of_task, id, author, body, kind, created_at FROM task_comments WHERE task_id IN {inl} "
        "ORDER BY id", p)
    sent_events = tx.later(  # the last ``events`` of each task
        "SELECT task_id AS of_task, id, task_id, run_id, kind, payload, actor, created_at FROM ("
        "SELECT e.*, ROW_NUMBER() OVER (PARTITION BY e.task_id ORDER BY e.id DESC) AS rn FROM task_events e "
        f"WHERE e.task_id IN {inl}) x WHERE rn <= :n ORDER BY id", {**p, "n": events}) if events > 0 else None
    sent_runs = tx.later(f"SELECT task_id AS of_task, * FROM task_runs WHERE task_id IN {inl} ORDER BY id", p)
    sent_attachments = tx.later(
        f"SELECT task_id AS of_task, id, name, path, size, sha256, created_at FROM attachments WHERE task_id IN {inl} "
        "ORDER BY id", p)
    sent_reviews = tx.later(f"SELECT task_id AS of_task, * FROM reviews WHERE task_id IN {inl} ORDER BY id", p)
    found = {r["id"]: task_out(r) for r in sent_tasks() if r["board"] == board}
    parents, children, comments, task_runs, attachments, reviews = (_grouped(sent()) for sent in (
        sent_parents, sent_children, sent_comments, sent_runs, sent_attachments, sent_reviews))
    evs: dict[Any, list[Row]] = _grouped(sent_events()) if sent_events is not None else {}
    out: dict[str, Row | AgentboardError] = {}
    for task_id in ids:
        if task_id not in found:
            try:
                get_task(tx, board, task_id)
            except AgentboardError as exc:
                out[task_id] = exc
    ids = [i for i in ids if i in found]
    if not ids:
        return out
    done = list(dict.fromkeys(q["id"] for i in ids for q in parents.get(i, []) if q["status"] == states.DONE))
    sent_handoffs = None
    if done:  # each done parent's latest completed run
        hp: dict[str, Any] = {}
        sent_handoffs = tx.later(
            "SELECT * FROM task_runs WHERE id IN (SELECT MAX(id) FROM task_runs WHERE task_id IN "
            f"{in_list('p', done, hp)} AND status = 'closed' "
            "AND outcome IN ('completed', 'review_requested') GROUP BY task_id)", hp)
    goal_ids = list(dict.fromkeys(found[i]["goal_id"] for i in ids if found[i].get("goal_id")))
    sent_goals = None
    if goal_ids:
        gp: dict[str, Any] = {"b": board}
        sent_goals = tx.later(f"SELECT id, title, status, body, acceptance FROM goals WHERE id IN "
                              f"{in_list('g', goal_ids, gp)} AND board = :b", gp)
    handoffs = {r["task_id"]: run_out(r) for r in sent_handoffs()} if sent_handoffs is not None else {}
    goals = {g["id"]: {**g, "acceptance": _decoded(g["acceptance"])} for g in (sent_goals() if sent_goals else [])}
    races = race_cards(tx, [i for i in ids if found[i].get("race_until")])
    for task_id in ids:
        task = found[task_id]
        if task_id in races:
            task["race"] = races[task_id]
        task["parents"] = [{**q, "handoff": handoffs.get(q["id"]) if q["status"] == states.DONE else None}
                           for q in parents.get(task_id, [])]
        task["children"] = children.get(task_id, [])
        task["comments"] = comments.get(task_id, [])
        task["events"] = [_event_out(e) for e in evs.get(task_id, [])]
        task["runs"] = [run_out(r) for r in task_runs.get(task_id, [])]
        task["attachments"] = attachments.get(task_id, [])
        task["reviews"] = [{**r, "findings": _decoded(r["findings"])} for r in reviews.get(task_id, [])]
        if task.get("goal_id"):
            task["goal"] = goals.get(task["goal_id"])
        out[task_id] = task
    return out


def task_detail(db: Database, board: str, task_id: str, *, events: int = 50) -> TaskDetail:
    """A task with its surroundings, in one read.

    The task's own fields, plus: ``parents`` (id, title, status, assignee, result and
    ``handoff``: a done parent's latest completed run, else None), ``children``, ``comments``
    (all, oldest first), the last ``events`` events (oldest first; 0 reads none), ``runs``
    (oldest first), ``attachments``, ``reviews`` (oldest first, findings decoded) and, when the
    task has a goal, ``goal`` (id, title, status, body, acceptance; None unless the goal is on
    the task's board). Its shape is :class:`~agentboard.kernel.rows.TaskDetail`.
    """
    return db.read_pipelined(task_detail_in, board, task_id, events=events)


def runs(db: Database, board: str, task_id: str) -> list[RunRow]:
    def _r(tx: Tx) -> list[Row]:
        get_task(tx, board, task_id)
        return [run_out(r) for r in tx.all("SELECT * FROM task_runs WHERE task_id = :id ORDER BY id", {"id": task_id})]
    return cast("list[RunRow]", db.read(_r))


def get_run(db: Database, board: str, run_id: int) -> RunRow:
    def _r(tx: Tx) -> Row:
        row = tx.one("SELECT * FROM task_runs WHERE id = :r AND board = :b", {"r": run_id, "b": board})
        if row is None:
            raise NotFound(f"no run {run_id} on board {board!r}")
        return run_out(row)
    return cast(RunRow, db.read(_r))


def _event_out(row: Row) -> Row:
    out = dict(row)
    try:
        out["payload"] = json.loads(out.get("payload") or "{}")
    except ValueError:
        out["payload"] = {}
    return out


#: PostgreSQL: the (xid, id) position of the event a follower's cursor names — its id is the
#: cursor; an id no longer in the log (pruned) counts from the event just before it
_PG_CURSOR = (
    "(task_events.xid, task_events.id) > (COALESCE("
    "(SELECT c.xid FROM task_events c WHERE c.id = :c), "
    "(SELECT c.xid FROM task_events c WHERE c.id < :c ORDER BY c.id DESC LIMIT 1), 0), :c)"
)


def event_order(tx: Tx, params: dict[str, Any]) -> tuple[str, str]:
    """The log's order for followers, as SQL: the condition that keeps only events no running
    transaction can still precede (its parameters go into ``params``), and the ``ORDER BY``
    columns. Call it inside the reading function, before the statement that reads events.

    SQLite has one writer at a time, so ids commit in order: ``id``. PostgreSQL writers commit
    concurrently and ids are taken before commit, so an event with a smaller id can appear after
    one with a larger id has been read; there the order is ``(xid, id)``, ``xid`` being the
    writing transaction's id, read only below the oldest transaction of the database still
    running (docs/kernel.md, "The event log's order").
    """
    if tx.db.dialect == "postgresql":
        params["horizon"] = pg_event_horizon(tx)
        return "task_events.xid < :horizon", "task_events.xid, task_events.id"
    return "1 = 1", "task_events.id"


def events_after(
    db: Database, board: str | None, cursor: int = 0, *, task_id: str | None = None,
    kinds: Iterable[str] | None = None, limit: int = 500,
) -> list[EventRow]:
    """Events after ``cursor`` in the log's order, oldest first (``board=None`` reads every
    board: administrators only).

    The cursor is the id of the last event the follower has seen (0: the beginning). Every
    follower sees every committed event exactly once and in the same order, whatever order
    concurrent writers commit in: on SQLite the order is the id's; on PostgreSQL it is the
    writing transaction's then the id's, and an event is only returned once no transaction
    still running can add one before it (:func:`event_order`).
    """
    params: dict[str, Any] = {"c": int(cursor), "n": int(limit)}
    where = [_PG_CURSOR if db.dialect == "postgresql" else "id > :c"]
    if board is not None:
        where.append("board = :b")
        params["b"] = board
    if task_id:
        where.append("task_id = :t")
        params["t"] = task_id
    kl = [k for k in (kinds or []) if k]
    if kl:
        where.append("kind IN " + in_list("k", kl, params))

    def _r(tx: Tx) -> list[Row]:
        visible, order = event_order(tx, params)
        return tx.all(
            "SELECT id, board, task_id, run_id, kind, payload, actor, created_at FROM task_events "
            f"WHERE {visible} AND {' AND '.join(where)} ORDER BY {order} LIMIT :n", params)
    return cast("list[EventRow]", [_event_out(r) for r in db.read(_r)])


def boards_after(db: Database, cursor: int) -> dict[str, int]:
    """Each board with events after ``cursor`` (in the log's order, see :func:`events_after`),
    mapped to the id of its last such event; the boards come in the order of those events, so
    the last value is the newest cursor."""
    def _r(tx: Tx) -> list[Row]:
        params: dict[str, Any] = {"c": int(cursor)}
        if tx.db.dialect != "postgresql":
            return tx.all("SELECT board, MAX(id) AS m FROM task_events WHERE id > :c GROUP BY board ORDER BY m",
                          params)
        visible, _ = event_order(tx, params)
        return tx.all(
            "SELECT board, id AS m FROM (SELECT DISTINCT ON (board) board, xid, id FROM task_events "
            f"WHERE {visible} AND {_PG_CURSOR} ORDER BY board, xid DESC, id DESC) AS last "
            "ORDER BY xid, id", params)
    return {str(r["board"]): int(r["m"]) for r in db.read(_r)}


def last_event_id(db: Database, board: str | None = None) -> int:
    """The cursor of the newest event a follower can read now (0 when none): start there to
    see only what happens next."""
    def _r(tx: Tx) -> int:
        params: dict[str, Any] = {"b": board}
        visible, order = event_order(tx, params)
        desc = ", ".join(f"{col} DESC" for col in order.split(", "))
        if board is None:
            return int(tx.scalar(f"SELECT id FROM task_events WHERE {visible} ORDER BY {desc} LIMIT 1",
                                 params) or 0)
        # scans back from the newest event (the log has no per-board index); a reader that only
        # needs a starting cursor should ask for the global newest instead
        return int(tx.scalar(
            f"SELECT id FROM task_events WHERE {visible} AND board = :b ORDER BY {desc} LIMIT 1",
            params) or 0)
    return db.read(_r)


def stats(db: Database, board: str) -> BoardStats:
    """The board's own tasks (a race once, never its attempts' tasks; not the supervisor's) by
    status, assignee and goal, and its runs (the attempts' too), tokens and cost."""
    def _r(tx: Tx) -> Row:
        own, b = f"board = :b AND {NOT_ATTEMPT} AND {NOT_SUPERVISION}", {"b": board}
        by_status = {s: 0 for s in states.STATUSES} | {
            r["status"]: r["n"] for r in tx.all(f"SELECT status, COUNT(*) AS n FROM tasks WHERE {own} GROUP BY status", b)}
        by_assignee: dict[str, dict[str, int]] = {}
        for r in tx.all(f"SELECT assignee, status, COUNT(*) AS n FROM tasks WHERE {own} AND status != 'archived' "
                        "GROUP BY assignee, status", b):
            by_assignee.setdefault(r["assignee"] or "(unassigned)", {})[r["status"]] = r["n"]
        by_goal: dict[str, dict[str, int]] = {}
        for r in tx.all(f"SELECT goal_id, status, COUNT(*) AS n FROM tasks WHERE board = :b AND goal_id IS NOT NULL "
                        f"AND {NOT_ATTEMPT} GROUP BY goal_id, status", b):
            by_goal.setdefault(r["goal_id"], {})[r["status"]] = r["n"]
        runs = tx.one(
            "SELECT COUNT(*) AS runs, COALESCE(SUM(cost_usd), 0) AS cost, COALESCE(SUM(input_tokens), 0) AS input_tokens, "
            "COALESCE(SUM(output_tokens), 0) AS output_tokens FROM task_runs WHERE board = :b AND synthetic = 0", b) or {}
        outcomes = {r["outcome"]: r["n"] for r in tx.all(
            "SELECT outcome, COUNT(*) AS n FROM task_runs WHERE board = :b AND outcome IS NOT NULL GROUP BY outcome", b)}
        return {"board": board, "by_status": by_status, "by_assignee": by_assignee, "by_goal": by_goal,
                "total": sum(by_status.values()), "runs": int(runs.get("runs") or 0), "cost_usd": float(runs.get("cost") or 0),
                "input_tokens": int(runs.get("input_tokens") or 0), "output_tokens": int(runs.get("output_tokens") or 0), "outcomes": outcomes}
    return cast(BoardStats, db.read(_r))


def assignees(db: Database, board: str) -> list[AssigneeRow]:
    """Every profile and assignee seen on the board, with task counts by status (not of attempts' tasks)."""
    def _r(tx: Tx) -> list[Row]:
        out: dict[str, Row] = {}
        for p in tx.all("SELECT name, description, adapter, enabled FROM profiles ORDER BY name"):
            out[p["name"]] = {"name": p["name"], "profile": True, "description": p["description"],
                              "adapter": p["adapter"], "enabled": bool(p["enabled"]), "counts": {}}
        for r in tx.all(
            "SELECT assignee, status, COUNT(*) AS n FROM tasks WHERE board = :b AND assignee IS NOT NULL "
            f"AND status != 'archived' AND {NOT_ATTEMPT} GROUP BY assignee, status", {"b": board}):
            entry = out.setdefault(r["assignee"], {"name": r["assignee"], "profile": False, "description": "",
                                                   "adapter": None, "enabled": False, "counts": {}})
            entry["counts"][r["status"]] = r["n"]
        for e in out.values():
            e["total"] = sum(e["counts"].values())
        return sorted(out.values(), key=lambda e: e["name"])
    return cast("list[AssigneeRow]", db.read(_r))


def tenants(db: Database, board: str) -> list[TenantRow]:
    return cast("list[TenantRow]", db.read(lambda tx: tx.all(
        "SELECT tenant, COUNT(*) AS n FROM tasks WHERE board = :b AND tenant IS NOT NULL AND status != 'archived' "
        "GROUP BY tenant ORDER BY tenant", {"b": board})))


def task_owners(db: Database, board: str, task_ids: Iterable[str]) -> dict[str, Row]:
    """``{id: {"assignee", "tenant", "status"}}`` for the given tasks of a board (live filters)."""
    ids = list(dict.fromkeys(t for t in task_ids if t))
    if not ids:
        return {}

    def _r(tx: Tx) -> dict[str, Row]:
        out: dict[str, Row] = {}
        for start in range(0, len(ids), 400):
            params: dict[str, Any] = {"b": board}
            inlist = in_list("i", ids[start:start + 400], params)
            for r in tx.all(f"SELECT id, assignee, tenant, status FROM tasks WHERE board = :b AND id IN {inlist}", params):
                out[r["id"]] = r
        return out
    return db.read(_r)


__all__ = ["assignees", "board_view", "boards_after", "event_order", "events_after", "get_run", "last_event_id",
           "list_tasks", "runs", "stats", "task_detail", "task_owners", "tenants"]
