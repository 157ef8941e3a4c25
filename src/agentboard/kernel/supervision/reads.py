"""Enabling supervision on a board and reading it: its wakes, status, log and panel."""

from __future__ import annotations

import json
import time
from typing import Any, cast

from ...domain import model
from ...domain.errors import InvalidInput, NotFound
from ...store.engine import Database, Row, Tx, dump_json, in_list
from ..common import board_settings, require_board
from ..rows import (
    SupervisorLogEntry,
    SupervisorOverview,
    SupervisorPanel,
    SupervisorStatus,
    WakeRow,
)
from .sweep import _close, _detail
from .waking import ACTOR_PREFIX, REPLAN_ACTOR, WAKE_STATUSES, supervisor_of

# -- enable, status, reads -----------------------------------------------------------------------


def set_supervisor(db: Database, board: str, profile: str | None, *, actor: str | None = None) -> Row:
    """Name (or with None, clear) the board's supervisor profile."""
    name = model.profile_name(profile) if profile else None

    def _w(tx: Tx) -> Row:
        row = require_board(tx, board)
        if name and tx.one("SELECT name FROM profiles WHERE name = :n", {"n": name}) is None:
            raise NotFound(f"no profile {name!r}; add it with `agentboard profiles add {name} --command ...`")
        settings = board_settings(tx, board)
        previous = settings.get("supervisor")
        if name:
            settings["supervisor"] = name
        else:
            settings.pop("supervisor", None)
        tx.execute("UPDATE boards SET settings = :s WHERE slug = :b", {"s": dump_json(settings), "b": board})
        if name != previous:
            tx.event(board, None, "supervisor_enabled" if name else "supervisor_disabled",
                     {"profile": name or previous}, actor=actor)
        if not name:  # nothing will take them: the pending wakes are moot
            now = time.time()
            for w in tx.all("SELECT * FROM supervisor_wakes WHERE board = :b AND status = 'pending'", {"b": board}):
                _close(tx, w, "moot", "the supervisor was disabled", actor, now)
        return {"board": row["slug"], "supervisor": name}
    return db.write(_w)


def set_budget_scope(db: Database, board: str, own: bool, *, actor: str | None = None) -> Row:
    """Whether the board's supervision runs count against its own ``supervision`` budget (``own``,
    the default) or against the board's budget like any task (board setting
    ``supervision_budget``). The totals of both budgets are summed again under the new rule."""
    from .. import budgets

    def _w(tx: Tx) -> Row:
        row = require_board(tx, board)
        settings = board_settings(tx, board)
        before = settings.get("supervision_budget") is not False
        if own:
            settings.pop("supervision_budget", None)
        else:
            settings["supervision_budget"] = False
        if before != own:
            tx.execute("UPDATE boards SET settings = :s WHERE slug = :b", {"s": dump_json(settings), "b": board})
            tx.event(board, None, "edited", {"fields": ["settings"], "supervision_budget": own}, actor=actor)
            budgets.rebuild_board_in(tx, board)
        return {"board": row["slug"], "supervision_budget": own}
    return db.write(_w)


def wake_out(row: Row) -> Row:
    out = dict(row)
    out["detail"] = _detail(row)
    out.pop("task_status", None)
    return out


def wakes(db: Database, board: str, *, status: str | None = None, limit: int = 200) -> list[WakeRow]:
    if status is not None and status not in WAKE_STATUSES:
        raise InvalidInput(f"unknown wake status {status!r}: use one of {', '.join(WAKE_STATUSES)}")

    def _r(tx: Tx) -> list[Row]:
        sql = "SELECT * FROM supervisor_wakes WHERE board = :b"
        params: dict[str, Any] = {"b": board, "n": int(limit)}
        if status:
            sql += " AND status = :s"
            params["s"] = status
        return [wake_out(r) for r in tx.all(sql + " ORDER BY id DESC LIMIT :n", params)]
    return cast("list[WakeRow]", db.read(_r))


def status(db: Database, board: str) -> SupervisorStatus:
    """The board's supervisor: profile, wake counts by status, open supervision tasks."""
    def _r(tx: Tx) -> Row:
        require_board(tx, board, writable=False)
        profile = supervisor_of(tx, board)
        counts = {r["status"]: int(r["n"]) for r in tx.all(
            "SELECT status, COUNT(*) AS n FROM supervisor_wakes WHERE board = :b GROUP BY status", {"b": board})}
        prof = tx.one("SELECT name, enabled FROM profiles WHERE name = :n", {"n": profile}) if profile else None
        open_tasks = tx.all("SELECT id, title, status FROM tasks WHERE board = :b AND purpose = 'supervision' "
                            "AND status NOT IN ('done', 'archived') ORDER BY created_at", {"b": board})
        problem = None
        if profile and prof is None:
            problem = f"profile {profile!r} does not exist: wakes wait until it is added"
        elif prof is not None and not prof["enabled"]:
            problem = f"profile {profile!r} is disabled: wakes wait until it is enabled"
        return {"board": board, "enabled": profile is not None, "profile": profile, "problem": problem,
                "wakes": {s: counts.get(s, 0) for s in WAKE_STATUSES}, "working": open_tasks}
    return cast(SupervisorStatus, db.read(_r))


#: the events a supervisor's log shows besides the supervisor's own actions
LOG_KINDS = ("supervisor_woken", "wake_handled", "wake_moot", "wake_expired", "escalated", "replan_proposed",
             "block_loop_detected", "goal_verifying", "goal_verify_failed", "supervisor_enabled", "supervisor_disabled")


def log(db: Database, board: str, *, limit: int = 200) -> list[SupervisorLogEntry]:
    """What the supervisor did and why, newest first: its own actions (actor ``supervisor:…``)
    and the wake lifecycle."""
    def _r(tx: Tx) -> list[Row]:
        params: dict[str, Any] = {"b": board, "n": int(limit), "p": ACTOR_PREFIX + "%"}
        kinds = in_list("k", LOG_KINDS, params)
        rows = tx.all(f"SELECT id, task_id, kind, payload, actor, created_at FROM task_events WHERE board = :b "
                      f"AND (actor LIKE :p OR kind IN {kinds}) ORDER BY id DESC LIMIT :n", params)
        out = []
        for r in rows:
            d = dict(r)
            try:
                d["payload"] = json.loads(r["payload"] or "{}")
            except ValueError:
                d["payload"] = {}
            out.append(d)
        return out
    return cast("list[SupervisorLogEntry]", db.read(_r))


def panel(db: Database, board: str) -> SupervisorPanel:
    """The dashboard's supervisor panel: status, wakes, proposals awaiting release, escalations."""
    def _r(tx: Tx) -> Row:
        proposals = tx.all(
            "SELECT id, title, goal_id, created_by, created_at FROM tasks WHERE board = :b AND status = 'triage' "
            "AND (created_by = :r OR created_by LIKE :p) ORDER BY created_at DESC LIMIT 200",
            {"b": board, "r": REPLAN_ACTOR, "p": ACTOR_PREFIX + "%"})
        escalations = tx.all(
            "SELECT id, title, block_reason, block_to, updated_at FROM tasks WHERE board = :b AND status = 'blocked' "
            "AND block_kind IN ('needs_input', 'budget') AND (purpose IS NULL OR purpose != 'supervision') "
            "ORDER BY updated_at DESC LIMIT 200", {"b": board})
        verifying = tx.all("SELECT id, title FROM goals WHERE board = :b AND status = 'verifying'", {"b": board})
        return {"proposals": proposals, "escalations": escalations, "verifying": verifying}
    out = db.read(_r)
    return cast(SupervisorPanel, {**out, "status": status(db, board), "wakes": wakes(db, board, limit=100)})


def overview(db: Database, board: str) -> SupervisorOverview:
    """What the supervisor reads first: the board's open work that needs judgement."""
    def _r(tx: Tx) -> Row:
        cols = "id, title, status, assignee, priority, goal_id, block_kind, block_reason, block_on, created_by"
        blocked = tx.all(f"SELECT {cols} FROM tasks WHERE board = :b AND status = 'blocked' ORDER BY updated_at LIMIT 200",
                         {"b": board})
        triage = tx.all(f"SELECT {cols} FROM tasks WHERE board = :b AND status = 'triage' ORDER BY created_at LIMIT 200",
                        {"b": board})
        counts = {r["status"]: int(r["n"]) for r in tx.all(
            "SELECT status, COUNT(*) AS n FROM tasks WHERE board = :b GROUP BY status", {"b": board})}
        goals = tx.all("SELECT id, title, status, priority FROM goals WHERE board = :b AND status IN ('active', 'verifying') "
                       "ORDER BY priority DESC, created_at", {"b": board})
        return {"board": board, "counts": counts, "blocked": blocked, "triage": triage, "goals": goals}
    return cast(SupervisorOverview, db.read(_r))
