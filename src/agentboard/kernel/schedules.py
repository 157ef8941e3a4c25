"""Schedules: recurring tasks (a template to instantiate, or a task to clone) on a cron
expression in UTC, and tasks that wait in todo until their ``not_before`` time.

The dispatcher calls :func:`tick` on every pass. Each due schedule is fired in one transaction
that first inserts its ``schedule_fires`` row: the unique (schedule, occurrence) pair means an
occurrence fires once even when several dispatchers (PostgreSQL, several hosts) see it due.

Missed occurrences (no dispatcher ran at the time, or it was later than ``schedule_grace``
seconds) follow the schedule's policy:

- ``skip`` (the default): they are not fired; the next occurrence is. A ``schedule_skipped``
  event says how many were skipped.
- ``once``: one firing stands for all of them (the latest), as soon as a dispatcher runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..domain import cron as cronlib
from ..domain.errors import InvalidInput, NotFound
from ..store.engine import Database, Row, Tx, dump_json
from . import templates
from .common import default_assignee, get_task, require_board
from .tasks import NewTask, create_in

MISSED = ("skip", "once")
#: the most tasks waiting for their time that one tick promotes
PROMOTE_BATCH = 500


def schedule_out(row: Row) -> Row:
    out = dict(row)
    out["enabled"] = bool(out.get("enabled"))
    if isinstance(out.get("template_values"), str):
        out["template_values"] = json.loads(out["template_values"] or "{}")
    return out


def add(db: Database, board: str, cron: str, *, template: str | None = None, values: dict[str, str] | None = None,
        clone: str | None = None, missed: str = "skip", actor: str | None = None, home: Path | None = None,
        now: float | None = None) -> Row:
    """Add a schedule that fires ``template`` (with ``values``) or clones the task ``clone``."""
    expr = cronlib.parse(cron)
    if (template is None) == (clone is None):
        raise InvalidInput("give exactly one of --template NAME or --clone TASK")
    if missed not in MISSED:
        raise InvalidInput(f"--missed must be one of {', '.join(MISSED)}, not {missed!r}")
    if template is not None:  # the template must exist and its placeholders be filled now
        t = templates.find(home if home is not None else db.settings.home, templates.board_target(db, board), template)
        templates.render(t, board, values or {})
        template = t.name
    at = now if now is not None else time.time()

    def _w(tx: Tx) -> Row:
        require_board(tx, board)
        if clone is not None:
            get_task(tx, board, clone)
        sid = tx.scalar(
            "INSERT INTO schedules (board, cron, template, template_values, clone_task_id, missed, enabled, next_at, "
            "created_by, created_at) VALUES (:b, :c, :t, :v, :k, :m, 1, :n, :a, :now) RETURNING id",
            {"b": board, "c": expr.text, "t": template, "v": dump_json(values or {}), "k": clone, "m": missed,
             "n": expr.next_after(at), "a": actor, "now": at})
        tx.event(board, clone, "schedule_added", {"schedule": sid, "cron": expr.text, "template": template,
                                                  "clone": clone, "missed": missed}, actor=actor, at=at)
        return schedule_out(tx.one("SELECT * FROM schedules WHERE id = :i", {"i": sid}) or {})

    return db.write(_w)


def list_schedules(db: Database, board: str) -> list[Row]:
    return db.read(lambda tx: [schedule_out(r) for r in tx.all(
        "SELECT * FROM schedules WHERE board = :b ORDER BY id", {"b": board})])


def fires(db: Database, board: str, schedule_id: int) -> list[Row]:
    """The occurrences a schedule fired, oldest first."""
    def _r(tx: Tx) -> list[Row]:
        rows = tx.all("SELECT * FROM schedule_fires WHERE schedule_id = :s AND board = :b ORDER BY occurrence_at",
                      {"s": schedule_id, "b": board})
        return [{**r, "task_ids": json.loads(r["task_ids"] or "[]")} for r in rows]
    return db.read(_r)


def remove(db: Database, board: str, schedule_id: int, *, actor: str | None = None) -> Row:
    def _w(tx: Tx) -> Row:
        row = tx.one("SELECT * FROM schedules WHERE id = :i AND board = :b", {"i": schedule_id, "b": board})
        if row is None:
            raise NotFound(f"no schedule {schedule_id} on board {board!r} (see: agentboard schedule list)")
        tx.execute("DELETE FROM schedules WHERE id = :i", {"i": schedule_id})
        tx.event(board, row.get("clone_task_id"), "schedule_removed", {"schedule": schedule_id}, actor=actor)
        return {**schedule_out(row), "removed": True}
    return db.write(_w)


# -- firing -------------------------------------------------------------------------------------


def _clone_record(tx: Tx, board: str, task_id: str, actor: str) -> NewTask:
    src = get_task(tx, board, task_id)
    return NewTask(
        board=board, title=src["title"], body=src["body"] or "", assignee=src["assignee"], tenant=src["tenant"],
        goal=src["goal_id"], priority=int(src["priority"] or 0), workspace_kind=src["workspace_kind"] or "scratch",
        workspace_path=src["workspace_path"], max_runtime=src["max_runtime_seconds"], max_retries=src["max_retries"],
        skills=tuple(json.loads(src["skills"] or "[]")), review=bool(src["review_required"]),
        verify=tuple(json.loads(src["verify"] or "[]")), actor=actor)


def _template_records(db: Database, row: Row, home: Path, at: float, actor: str) -> list[tuple[str, NewTask, list[str]]]:
    board = row["board"]
    t = templates.find(home, templates.board_target(db, board), row["template"])
    values = json.loads(row["template_values"] or "{}")
    return templates.records(templates.render(t, board, values, now=at), board, actor)


def _fire_one(db: Database, row: Row, now: float, grace: float, host: str | None, home: Path) -> Row | None:
    expr = cronlib.parse(row["cron"])
    occs = expr.occurrences(float(row["next_at"]) - 1.0, now)
    nxt = expr.next_after(now)
    latest = occs[-1] if occs else None
    late = latest is not None and now - latest > grace
    fire_at = latest if latest is not None and (row["missed"] == "once" or not late) else None
    skipped = len(occs) - (1 if fire_at is not None else 0)
    actor = f"schedule:{row['id']}"
    records = None
    error = None
    if fire_at is not None and row["template"]:
        try:
            records = _template_records(db, row, home, fire_at, actor)
        except (InvalidInput, NotFound) as exc:
            error = exc.message

    def _w(tx: Tx) -> Row | None:
        cur = tx.one("SELECT next_at, enabled FROM schedules WHERE id = :i" + (" FOR UPDATE" if tx.db.dialect == "postgresql" else ""),
                     {"i": row["id"]})
        if cur is None or not cur["enabled"] or float(cur["next_at"]) > now:
            return None  # removed, paused, or another dispatcher fired it meanwhile
        tx.execute("UPDATE schedules SET next_at = :n WHERE id = :i", {"n": nxt, "i": row["id"]})
        board = row["board"]
        out: Row = {"schedule": row["id"], "board": board, "occurrence": fire_at, "skipped": skipped, "tasks": []}
        if skipped:
            tx.event(board, row.get("clone_task_id"), "schedule_skipped",
                     {"schedule": row["id"], "missed": skipped, "policy": row["missed"]}, actor=actor, at=now)
        if fire_at is None:
            return out
        tx.execute("INSERT INTO schedule_fires (schedule_id, board, occurrence_at, fired_at, host, task_ids) "
                   "VALUES (:s, :b, :o, :now, :h, '[]') ON CONFLICT (schedule_id, occurrence_at) DO NOTHING",
                   {"s": row["id"], "b": board, "o": fire_at, "now": now, "h": host})
        if tx.rowcount != 1:
            return None  # this occurrence was fired already
        if error is not None or (row["template"] is None and row["clone_task_id"] is None):
            tx.event(board, None, "schedule_failed", {"schedule": row["id"], "error": error or "nothing to fire"},
                     actor=actor, at=now)
            return {**out, "error": error}
        try:
            if row["template"]:
                created = templates.create_all_in(tx, records or [])
            else:
                created = [create_in(tx, _clone_record(tx, board, row["clone_task_id"], actor))]
        except NotFound as exc:  # the task to clone is gone
            tx.event(board, None, "schedule_failed", {"schedule": row["id"], "error": exc.message}, actor=actor, at=now)
            return {**out, "error": exc.message}
        ids = [t["id"] for t in created]
        tx.execute("UPDATE schedule_fires SET task_ids = :t WHERE schedule_id = :s AND occurrence_at = :o",
                   {"t": dump_json(ids), "s": row["id"], "o": fire_at})
        tx.execute("UPDATE schedules SET last_fired_at = :now WHERE id = :i", {"now": now, "i": row["id"]})
        tx.event(board, ids[0] if ids else None, "schedule_fired",
                 {"schedule": row["id"], "occurrence": fire_at, "tasks": ids}, actor=actor, at=now)
        return {**out, "tasks": ids}

    return db.write(_w)


def _promote_waiting(tx: Tx, boards: list[str], now: float) -> list[str]:
    """Todo tasks whose ``not_before`` has come, whose parents are done and that have (or get)
    an assignee: to ready."""
    from ..store.engine import in_list

    params: dict[str, Any] = {"now": now, "n": PROMOTE_BATCH}
    rows = tx.all(
        "SELECT t.id, t.board, t.assignee FROM tasks t WHERE t.not_before IS NOT NULL AND t.not_before <= :now "
        "AND t.status = 'todo' AND t.board IN " + in_list("b", boards, params) + " AND NOT EXISTS ("
        " SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id "
        " WHERE l.child_id = t.id AND p.status NOT IN ('done', 'archived')) ORDER BY t.not_before LIMIT :n",
        params)
    out = []
    for r in rows:
        assignee = r["assignee"] or default_assignee(tx, r["board"])
        if not assignee:
            continue
        tx.execute("UPDATE tasks SET status = 'ready', assignee = :a, updated_at = :now WHERE id = :id AND status = 'todo'",
                   {"a": assignee, "now": now, "id": r["id"]})
        if tx.rowcount:
            tx.event(r["board"], r["id"], "promoted", {"by": "not_before"}, actor="dispatcher", at=now)
            out.append(r["id"])
    return out


def _next_due(b1: str, b2: str) -> str:
    """The earliest enabled schedule and waiting task of the boards ``b1`` / ``b2`` (SQL lists):
    the task through ``ix_tasks_not_before``, its board checked after, so no planner reads a
    board's todo tasks to find the few with a start time."""
    return ("SELECT (SELECT MIN(next_at) FROM schedules WHERE enabled = 1 AND board IN " + b1 + ") AS a, "
            "(SELECT MIN(t.not_before) FROM tasks t WHERE t.status = 'todo' AND t.not_before IS NOT NULL "
            "AND EXISTS (SELECT 1 FROM boards b WHERE b.slug = t.board AND b.slug IN " + b2 + ")) AS w")


#: when a pass next has a schedule or waiting task to tick, on every board not archived
NEXT_DUE_SQL = _next_due("(SELECT slug FROM boards WHERE archived = 0)", "(SELECT slug FROM boards WHERE archived = 0)")


def next_due_later(tx: Tx, boards: list[str] | None = None) -> Callable[[], float | None]:
    """When :func:`tick` next has something to do on ``boards`` (None: every board not
    archived), past times included: the earliest enabled schedule or waiting task
    (``not_before``); None when there is none. Sent now, read when the answer is called (a pass
    reads it in its snapshot, ``kernel.dispatching.pass_snapshot``, and ticks once it has come)."""
    from ..store.engine import in_list

    if boards == []:
        return lambda: None
    params: dict[str, Any] = {}
    if boards is None:
        sent = tx.later(NEXT_DUE_SQL)
    else:
        sent = tx.later(_next_due(in_list("b", boards, params), in_list("c", boards, params)), params)

    def answer() -> float | None:
        row = sent()[0]
        times = [float(x) for x in (row["a"], row["w"]) if x is not None]
        return min(times) if times else None
    return answer


def tick(db: Database, boards: list[str], *, now: float | None = None, host: str | None = None,
         grace: float | None = None, home: Path | None = None) -> tuple[list[Row], list[str], float | None]:
    """Fire the due schedules of ``boards`` and promote their tasks whose time has come.
    Returns what fired, the promoted task ids, and when the next schedule or waiting task is due."""
    at = now if now is not None else time.time()
    grace = float(grace if grace is not None else db.settings.schedule_grace)
    home = home if home is not None else db.settings.home
    if not boards:
        return [], [], None
    from ..store.engine import in_list

    def _due(tx: Tx) -> list[Row]:
        params: dict[str, Any] = {"now": at}
        return tx.all("SELECT * FROM schedules WHERE enabled = 1 AND next_at <= :now AND board IN "
                      + in_list("b", boards, params) + " ORDER BY next_at", params)

    fired = []
    for row in db.read(_due):
        out = _fire_one(db, row, at, grace, host, home)
        if out is not None:
            fired.append(out)
    promoted = db.write(_promote_waiting, boards, at)

    def _next(tx: Tx) -> float | None:
        params: dict[str, Any] = {"now": at}
        b = in_list("b", boards, params)
        a = tx.scalar("SELECT MIN(next_at) FROM schedules WHERE enabled = 1 AND board IN " + b, params)
        w = tx.scalar("SELECT MIN(not_before) FROM tasks WHERE not_before > :now AND status = 'todo' AND board IN " + b,
                      params)
        times = [float(x) for x in (a, w) if x is not None]
        return min(times) if times else None

    return fired, promoted, db.read(_next)


def not_before_of(value: str | float | None, now: float) -> float | None:
    """The time a ``--not-before`` value names (``None`` for none)."""
    if value is None or value == "":
        return None
    from ..domain.timespec import point_in_time

    return point_in_time(value, now, past=False)


__all__ = ["MISSED", "NEXT_DUE_SQL", "add", "fires", "list_schedules", "next_due_later", "not_before_of", "remove", "tick"]
