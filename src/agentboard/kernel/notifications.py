"""Notification subscriptions and the notifier's bookkeeping (the only SQL of notifications).

A subscription follows one board's event log for a task (and the tasks below it: children
inherit), a goal, the whole board, or a profile's tasks, and delivers some event kinds to one
target (an Apprise URL). The target is stored as given and never returned by a read meant for
people: ``display`` (the URL with its secrets masked, computed by the caller) is shown instead.

The notifier's cycle, each step one transaction: :func:`claim_due` leases the subscriptions due
now (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so several hosts never hold the same one), then
after its delivery attempt :func:`delivered` moves the cursor (only on success) or
:func:`failed` records the error, the back-off and, after too many failures, parks the target.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..domain import events as event_kinds
from ..domain.errors import InvalidInput, NotFound
from ..store.engine import Database, Row, Tx, dump_json, in_list
from .common import get_task, require_board

SCOPES = ("task", "goal", "board", "profile")

#: the columns a person may see (never ``target``)
_SHOWN = (
    "id, board, scope, subject, display, kinds, cursor, failures, next_attempt_at, "
    "last_attempt_at, last_sent_at, last_error, parked_at, delivered, created_by, created_at, trusted"
)


def subscription_out(row: Row) -> Row:
    """A subscription as people see it: the masked target, decoded kinds, whether parked."""
    out = {k: v for k, v in row.items() if k not in ("target", "lease_owner", "lease_until")}
    out["target"] = out.pop("display", "")
    try:
        kinds = json.loads(row.get("kinds") or "[]")
    except ValueError:
        kinds = []
    out["kinds"] = kinds or list(event_kinds.NOTIFY_DEFAULT)
    out["default_kinds"] = not kinds
    out["parked"] = row.get("parked_at") is not None
    out["trusted"] = bool(row.get("trusted"))
    return out


def checked_kinds(kinds: Iterable[str] | None) -> list[str]:
    """The kinds a subscription names (empty: the defaults), each a known event kind."""
    out: list[str] = []
    for raw in kinds or ():
        for kind in str(raw).split(","):
            kind = kind.strip()
            if not kind:
                continue
            if kind not in event_kinds.ALL:
                raise InvalidInput(
                    f"unknown event kind {kind!r}; the defaults are {', '.join(event_kinds.NOTIFY_DEFAULT)}")
            if kind not in out:
                out.append(kind)
    return out


def _subject(tx: Tx, board: str, scope: str, subject: str) -> str:
    if scope not in SCOPES:
        raise InvalidInput(f"unknown subscription scope {scope!r}: use one of {', '.join(SCOPES)}")
    subject = (subject or "").strip()
    if scope == "board":
        return board
    if not subject:
        raise InvalidInput(f"a {scope} subscription needs the {scope} it follows")
    if scope == "task":
        get_task(tx, board, subject)
    elif scope == "goal":
        if tx.one("SELECT id FROM goals WHERE id = :g AND board = :b", {"g": subject, "b": board}) is None:
            raise NotFound(f"no goal {subject} on board {board!r}")
    elif tx.one("SELECT name FROM profiles WHERE name = :n", {"n": subject}) is None:
        raise NotFound(f"no profile {subject!r}; list profiles with `agentboard profiles list`")
    return subject


def subscribe_in(tx: Tx, board: str, scope: str, subject: str, target: str, display: str, *,
                 kinds: Iterable[str] | None = None, actor: str | None = None, trusted: bool = True) -> Row:
    """Subscribe ``target`` inside the caller's transaction. It delivers events from now on;
    the same target on the same subject again changes its kinds instead of adding a copy.
    ``trusted``: subscribed by an administrator, the local CLI or the configuration (the
    notifier delivers it to any address); otherwise it reaches public addresses only."""
    require_board(tx, board)
    subject = _subject(tx, board, scope, subject)
    if not target or not target.strip():
        raise InvalidInput("a subscription needs a target: an Apprise URL such as json://host/path")
    kind_list = checked_kinds(kinds)
    now = time.time()
    params = {"b": board, "s": scope, "j": subject, "t": target.strip()}
    existing = tx.one(
        "SELECT id FROM notify_subscriptions WHERE board = :b AND scope = :s AND subject = :j "
        "AND target = :t", params)
    if existing is not None:
        tx.execute("UPDATE notify_subscriptions SET kinds = :k, trusted = CASE WHEN :tr = 1 THEN 1 "
                   "ELSE trusted END WHERE id = :id",
                   {"k": dump_json(kind_list), "tr": int(trusted), "id": existing["id"]})
        sub_id = int(existing["id"])
    else:
        # from now on: the newest event id (this transaction's own event comes after it)
        cursor = int(tx.scalar("SELECT COALESCE(MAX(id), 0) FROM task_events") or 0)
        sub_id = int(tx.scalar(
            "INSERT INTO notify_subscriptions (board, scope, subject, target, display, kinds, cursor, "
            "created_by, created_at, trusted) VALUES (:b, :s, :j, :t, :d, :k, :c, :a, :now, :tr) RETURNING id",
            {**params, "d": display, "k": dump_json(kind_list), "c": cursor, "a": actor, "now": now,
             "tr": int(trusted)}))
    tx.event(board, subject if scope == "task" else None, "notify_subscribed",
             {"subscription": sub_id, "scope": scope, "subject": subject, "target": display,
              "kinds": kind_list}, actor=actor, at=now)
    row = tx.one(f"SELECT {_SHOWN} FROM notify_subscriptions WHERE id = :id", {"id": sub_id})
    assert row is not None
    return subscription_out(row)


def subscribe(db: Database, board: str, scope: str, subject: str, target: str, display: str, *,
              kinds: Iterable[str] | None = None, actor: str | None = None, trusted: bool = True) -> Row:
    """Subscribe ``target`` (an Apprise URL, ``display`` its masked form) to a task, goal, board
    or profile on ``board``."""
    return db.write(subscribe_in, board, scope, subject, target, display, kinds=kinds, actor=actor,
                    trusted=trusted)


def auto_subscribe_in(tx: Tx, board: str, task_id: str, targets: Sequence[tuple[str, str]],
                      actor: str | None) -> None:
    """The ``notify_default`` targets on a task a person just created: skipped for a task an
    agent creates (its actor is a profile) and when a parent's subscription already covers it."""
    if not targets or not actor:
        return
    if tx.one("SELECT name FROM profiles WHERE name = :n", {"n": actor}) is not None:
        return
    inherited = {r["target"] for r in tx.all(
        "WITH RECURSIVE up(id) AS (SELECT parent_id FROM task_links WHERE child_id = :t "
        "UNION SELECT l.parent_id FROM task_links l JOIN up ON l.child_id = up.id) "
        "SELECT s.target FROM notify_subscriptions s JOIN up ON s.subject = up.id "
        "WHERE s.board = :b AND s.scope = 'task'", {"t": task_id, "b": board})}
    for target, display in targets:
        if target not in inherited:
            subscribe_in(tx, board, "task", task_id, target, display, actor=actor)


def list_subscriptions(db: Database, board: str | None, *, task_id: str | None = None,
                       scope: str | None = None, subject: str | None = None) -> list[Row]:
    """Subscriptions of a board (``None``: every board), newest last; with ``task_id`` those
    that follow that task: on it, inherited from a task above it, its goal, its assignee's and
    the board's."""
    params: dict[str, Any] = {}
    where: list[str] = []
    if board is not None:
        where.append("board = :b")
        params["b"] = board
    if scope:
        where.append("scope = :s")
        params["s"] = scope
    if subject:
        where.append("subject = :j")
        params["j"] = subject

    def _r(tx: Tx) -> list[Row]:
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = tx.all(f"SELECT {_SHOWN} FROM notify_subscriptions{clause} ORDER BY id", params)
        if task_id is None:
            return rows
        ctx = _contexts(tx, [task_id]).get(task_id)
        if ctx is None:
            raise NotFound(f"no task {task_id}")
        return [r for r in rows if covers(r, ctx)]
    return [subscription_out(r) for r in db.read(_r)]


def get(db: Database, board: str | None, sub_id: int) -> Row:
    """One subscription as people see it."""
    def _r(tx: Tx) -> Row:
        return _row(tx, board, sub_id, f"SELECT {_SHOWN} FROM notify_subscriptions WHERE id = :id")
    return subscription_out(db.read(_r))


def target_of(db: Database, board: str | None, sub_id: int) -> Row:
    """The subscription with its full target: for sending a test message, never for showing."""
    def _r(tx: Tx) -> Row:
        return _row(tx, board, sub_id, "SELECT * FROM notify_subscriptions WHERE id = :id")
    return db.read(_r)


def _row(tx: Tx, board: str | None, sub_id: int, sql: str) -> Row:
    row = tx.one(sql, {"id": int(sub_id)})
    if row is None or (board is not None and row["board"] != board):
        where = f" on board {board!r}" if board else ""
        raise NotFound(f"no subscription {sub_id}{where}; list them with `agentboard notify list`")
    return row


def remove(db: Database, board: str | None, sub_id: int, *, actor: str | None = None) -> Row:
    """Remove a subscription: nothing more is delivered to its target."""
    def _w(tx: Tx) -> Row:
        row = _row(tx, board, sub_id, f"SELECT {_SHOWN} FROM notify_subscriptions WHERE id = :id")
        tx.execute("DELETE FROM notify_subscriptions WHERE id = :id", {"id": int(sub_id)})
        tx.event(row["board"], row["subject"] if row["scope"] == "task" else None, "notify_unsubscribed",
                 {"subscription": int(sub_id), "scope": row["scope"], "subject": row["subject"],
                  "target": row["display"]}, actor=actor)
        return subscription_out(row)
    return db.write(_w)


def resume(db: Database, board: str | None, sub_id: int, *, actor: str | None = None) -> Row:
    """Take a parked subscription back into delivery: it retries at once, from its cursor (the
    events it missed while parked are delivered, none is lost)."""
    def _w(tx: Tx) -> Row:
        row = _row(tx, board, sub_id, f"SELECT {_SHOWN} FROM notify_subscriptions WHERE id = :id")
        tx.execute(
            "UPDATE notify_subscriptions SET parked_at = NULL, failures = 0, next_attempt_at = NULL "
            "WHERE id = :id", {"id": int(sub_id)})
        if row["parked_at"] is not None:
            tx.event(row["board"], row["subject"] if row["scope"] == "task" else None, "notify_resumed",
                     {"subscription": int(sub_id), "target": row["display"]}, actor=actor)
        row.update(parked_at=None, failures=0, next_attempt_at=None)
        return subscription_out(row)
    return db.write(_w)


# -- the notifier's bookkeeping ------------------------------------------------------------------


#: a subscription with events after its cursor (the newest id is the primary key's last entry)
_BEHIND = "AND cursor < (SELECT COALESCE(MAX(id), 0) FROM task_events) "


def claim_due(db: Database, owner: str, *, lease: float, limit: int = 200,
              now: float | None = None) -> list[Row]:
    """Lease the subscriptions due now (not parked, not waiting for a retry, not leased by a live
    notifier) to ``owner`` until ``now + lease``; each row has its full target."""
    at = time.time() if now is None else now
    due = ("SELECT id FROM notify_subscriptions WHERE parked_at IS NULL " + _BEHIND +
           "AND (next_attempt_at IS NULL OR next_attempt_at <= :now) "
           "AND (lease_until IS NULL OR lease_until < :now OR lease_owner = :o) LIMIT 1")
    # a read first: a notifier with nothing due never takes the write lock
    if db.read(lambda tx: tx.one(due, {"now": at, "o": owner})) is None:
        return []

    def _w(tx: Tx) -> list[Row]:
        sql = ("SELECT id FROM notify_subscriptions WHERE parked_at IS NULL " + _BEHIND +
               "AND (next_attempt_at IS NULL OR next_attempt_at <= :now) "
               "AND (lease_until IS NULL OR lease_until < :now OR lease_owner = :o) "
               "ORDER BY id LIMIT :n")
        if tx.db.dialect == "postgresql":
            sql += " FOR UPDATE SKIP LOCKED"
        ids = [int(r["id"]) for r in tx.all(sql, {"now": at, "o": owner, "n": int(limit)})]
        if not ids:
            return []
        params: dict[str, Any] = {"o": owner, "until": at + lease}
        clause = in_list("i", ids, params)
        tx.execute(f"UPDATE notify_subscriptions SET lease_owner = :o, lease_until = :until "
                   f"WHERE id IN {clause}", params)
        params2: dict[str, Any] = {}
        return tx.all(f"SELECT * FROM notify_subscriptions WHERE id IN {in_list('i', ids, params2)} "
                      "ORDER BY id", params2)
    return db.write(_w)


def delivered(db: Database, owner: str, sub_id: int, cursor: int, *, sent: int = 0,
              wait_until: float | None = None, now: float | None = None) -> bool:
    """After a successful delivery of ``sent`` events (0: nothing matched): the cursor moves to
    ``cursor``, failures reset, the lease ends. ``wait_until``: the subscription holds events back
    (a burst settling, a digest window) until then. False when the lease was lost meanwhile."""
    at = time.time() if now is None else now

    def _w(tx: Tx) -> bool:
        tx.execute(
            "UPDATE notify_subscriptions SET cursor = :c, "
            "failures = 0, last_error = CASE WHEN :sent > 0 THEN NULL ELSE last_error END, "
            "last_sent_at = CASE WHEN :sent > 0 THEN :now ELSE last_sent_at END, "
            "last_attempt_at = CASE WHEN :sent > 0 THEN :now ELSE last_attempt_at END, "
            "delivered = delivered + :sent, next_attempt_at = :wait, lease_owner = NULL, "
            "lease_until = NULL WHERE id = :id AND lease_owner = :o",
            {"c": int(cursor), "sent": int(sent), "now": at, "wait": wait_until, "id": int(sub_id),
             "o": owner})
        if tx.rowcount != 1:
            return False
        _end_if_finished(tx, int(sub_id))
        return True
    return db.write(_w)


def advance(db: Database, owner: str, sub_ids: Iterable[int], cursor: int) -> None:
    """Subscriptions that had nothing to deliver up to ``cursor``: their cursors move there and
    their leases end, in one transaction (a finished task's subscription ends)."""
    ids = [int(i) for i in sub_ids]
    if not ids:
        return

    def _w(tx: Tx) -> None:
        params: dict[str, Any] = {"o": owner, "c": int(cursor)}
        clause = in_list("i", ids, params)
        tx.execute(
            "UPDATE notify_subscriptions SET cursor = :c, "
            "failures = 0, next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL "
            f"WHERE lease_owner = :o AND id IN {clause}", params)
        params2: dict[str, Any] = {}
        for r in tx.all("SELECT id FROM notify_subscriptions WHERE scope = 'task' "
                        f"AND id IN {in_list('i', ids, params2)}", params2):
            _end_if_finished(tx, int(r["id"]))
    db.write(_w)


def _end_if_finished(tx: Tx, sub_id: int) -> None:
    """A task subscription ends once its task and every task below it are done or archived and
    their events are delivered (an event says so)."""
    row = tx.one("SELECT * FROM notify_subscriptions WHERE id = :id AND scope = 'task'", {"id": sub_id})
    if row is None:
        return
    tree = ("WITH RECURSIVE down(id) AS (SELECT :t UNION "
            "SELECT l.child_id FROM task_links l JOIN down ON l.parent_id = down.id) ")
    open_or_late = tx.one(
        tree + "SELECT 1 AS x FROM down JOIN tasks t ON t.id = down.id "
        "WHERE t.status NOT IN ('done', 'archived') OR EXISTS (SELECT 1 FROM task_events e "
        "WHERE e.task_id = down.id AND e.id > :c) LIMIT 1",
        {"t": row["subject"], "c": int(row["cursor"])})
    if open_or_late is not None or tx.one("SELECT 1 AS x FROM tasks WHERE id = :t", {"t": row["subject"]}) is None:
        return
    tx.execute("DELETE FROM notify_subscriptions WHERE id = :id", {"id": sub_id})
    tx.event(row["board"], row["subject"], "notify_unsubscribed",
             {"subscription": sub_id, "scope": "task", "subject": row["subject"], "target": row["display"],
              "reason": "the task and the tasks below it are finished"})


def failed(db: Database, owner: str, sub_id: int, error: str, *, retry_at: float,
           park_after: int, cursor: int = 0, sent: int = 0, now: float | None = None) -> Row | None:
    """After a failed delivery: one more failure, the error kept, a retry at ``retry_at``; at
    ``park_after`` consecutive failures the target is parked (an event says so). The cursor moves
    only past the ``sent`` events delivered before the failure (up to ``cursor``). ``None`` when
    the lease was lost meanwhile."""
    at = time.time() if now is None else now

    def _w(tx: Tx) -> Row | None:
        row = tx.one("SELECT * FROM notify_subscriptions WHERE id = :id AND lease_owner = :o",
                     {"id": int(sub_id), "o": owner})
        if row is None:
            return None
        failures = int(row["failures"]) + 1
        park = failures >= park_after
        new_cursor = int(cursor)  # the notifier holds the lease: the position it reached
        tx.execute(
            "UPDATE notify_subscriptions SET failures = :f, last_error = :e, last_attempt_at = :now, "
            "next_attempt_at = :retry, parked_at = :parked, cursor = :c, delivered = delivered + :sent, "
            "last_sent_at = CASE WHEN :sent > 0 THEN :now ELSE last_sent_at END, "
            "lease_owner = NULL, lease_until = NULL WHERE id = :id",
            {"f": failures, "e": error[:2000], "now": at, "retry": None if park else retry_at,
             "parked": at if park else None, "c": new_cursor, "sent": int(sent), "id": int(sub_id)})
        if park:
            tx.event(row["board"], row["subject"] if row["scope"] == "task" else None, "notify_parked",
                     {"subscription": int(sub_id), "target": row["display"], "failures": failures,
                      "error": error[:500]}, at=at)
        row.update(failures=failures, last_error=error, parked_at=at if park else None,
                   cursor=new_cursor)
        return subscription_out(row)
    return db.write(_w)


def hold(db: Database, owner: str, sub_id: int, until: float) -> None:
    """Keep a subscription's events back until ``until`` (a burst settling, a digest window):
    the lease ends, the cursor stays."""
    def _w(tx: Tx) -> None:
        tx.execute("UPDATE notify_subscriptions SET next_attempt_at = :u, lease_owner = NULL, "
                   "lease_until = NULL WHERE id = :id AND lease_owner = :o",
                   {"u": until, "id": int(sub_id), "o": owner})
    db.write(_w)


def renew(db: Database, owner: str, sub_ids: Iterable[int], *, lease: float,
          now: float | None = None) -> set[int]:
    """Extend ``owner``'s leases on ``sub_ids`` (a long delivery); the ids it still holds."""
    ids = [int(i) for i in sub_ids]
    if not ids:
        return set()
    at = time.time() if now is None else now

    def _w(tx: Tx) -> set[int]:
        params: dict[str, Any] = {"o": owner, "until": at + lease}
        clause = in_list("i", ids, params)
        tx.execute("UPDATE notify_subscriptions SET lease_until = :until "
                   f"WHERE lease_owner = :o AND id IN {clause}", params)
        params2: dict[str, Any] = {"o": owner}
        return {int(r["id"]) for r in tx.all(
            "SELECT id FROM notify_subscriptions WHERE lease_owner = :o "
            f"AND id IN {in_list('i', ids, params2)}", params2)}
    return db.write(_w)


def release(db: Database, owner: str, sub_ids: Iterable[int]) -> None:
    """Give back leases without changing anything else (a notifier stopping mid-cycle)."""
    ids = [int(i) for i in sub_ids]
    if not ids:
        return

    def _w(tx: Tx) -> None:
        params: dict[str, Any] = {"o": owner}
        tx.execute("UPDATE notify_subscriptions SET lease_owner = NULL, lease_until = NULL "
                   f"WHERE lease_owner = :o AND id IN {in_list('i', ids, params)}", params)
    db.write(_w)


def _contexts(tx: Tx, task_ids: Sequence[str]) -> dict[str, Row]:
    ids = sorted({t for t in task_ids if t})
    if not ids:
        return {}
    params: dict[str, Any] = {}
    clause = in_list("t", ids, params)
    out: dict[str, Row] = {
        r["id"]: {**r, "ancestors": set()} for r in tx.all(
            f"SELECT id, title, status, goal_id, assignee FROM tasks WHERE id IN {clause}", params)}
    params2: dict[str, Any] = {}
    clause2 = in_list("t", ids, params2)
    for r in tx.all(
        "WITH RECURSIVE up(origin, id) AS ("
        f"SELECT child_id, parent_id FROM task_links WHERE child_id IN {clause2} "
        "UNION SELECT up.origin, l.parent_id FROM task_links l JOIN up ON l.child_id = up.id) "
        "SELECT origin, id FROM up", params2):
        if r["origin"] in out:
            out[r["origin"]]["ancestors"].add(r["id"])
    return out


def task_contexts(db: Database, task_ids: Sequence[str]) -> dict[str, Row]:
    """What the notifier needs to match events to subscriptions and write messages, per task:
    title, status, goal, assignee and ``ancestors`` (every task above it through links)."""
    return db.read(_contexts, task_ids)


def covers(sub: Row, ctx: Row | None, event: Mapping[str, Any] | None = None) -> bool:
    """Whether subscription ``sub`` follows an event about the task ``ctx`` (``None`` for an event
    with no task, matched on its payload: a goal's or a board's own events)."""
    scope, subject = sub["scope"], sub["subject"]
    if scope == "board":
        return True
    if ctx is None:
        payload = (event or {}).get("payload") or {}
        return scope == "goal" and isinstance(payload, dict) and payload.get("goal_id") == subject
    if scope == "task":
        return bool(ctx["id"] == subject or subject in ctx["ancestors"])
    if scope == "goal":
        return bool(ctx.get("goal_id") == subject)
    return bool(ctx.get("assignee") == subject)
