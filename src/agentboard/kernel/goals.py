"""Goals: named outcomes that group tasks and settle to done when their tasks are done."""

from __future__ import annotations

import json
import time
from typing import Any, cast

from ..domain import model, task_fields
from ..domain.errors import Conflict, InvalidInput, NotFound
from ..store.engine import Database, Row, Tx, dump_json, in_list
from .common import require_board
from .host_access import checked_verify
from .rows import GoalDetail, GoalRow


def goal_out(row: Row) -> Row:
    out = dict(row)
    # (the ``budget`` column is an early version's, never enforced: a goal's limits are its
    # budgets, ``kernel.budgets`` — ``agentboard budget set --goal``)
    out.pop("budget", None)
    for key in ("acceptance", "verify"):
        try:
            out[key] = json.loads(out[key]) if out.get(key) else []
        except ValueError:
            out[key] = []
    return out


def _get(tx: Tx, board: str, goal_id: str) -> Row:
    row = tx.one("SELECT * FROM goals WHERE id = :g AND board = :b", {"g": goal_id, "b": board})
    if row is None:
        raise NotFound(f"no goal {goal_id} on board {board!r}")
    return row


def create(
    db: Database, board: str, title: str, *, body: str = "", acceptance: list[str] | None = None,
    priority: int = 0, verify: list[str] | None = None, actor: str | None = None,
) -> Row:
    """Create a goal. ``verify``: the commands that check its acceptance once all its tasks are
    done (run by the dispatcher in the board's target; ``check:NAME`` for a named check)."""
    title = model.title(title)
    body = model.body(body)
    acc = [a.strip() for a in (acceptance or []) if a and a.strip()]
    checks = [v.strip() for v in (verify or []) if v and v.strip()]

    def _w(tx: Tx) -> Row:
        require_board(tx, board)
        checked_verify(tx, board, checks)
        now = time.time()
        gid = model.new_goal_id()
        tx.execute(
            "INSERT INTO goals (id, board, title, body, acceptance, status, priority, created_by, created_at, budget, verify) "
            "VALUES (:id, :b, :t, :body, :acc, 'active', :p, :a, :now, '{}', :v)",
            {"id": gid, "b": board, "t": title, "body": body, "acc": dump_json(acc), "p": task_fields.check("priority", priority),
             "a": actor, "now": now, "v": dump_json(checks)},
        )
        tx.event(board, None, "goal_created", {"goal_id": gid, "title": title}, actor=actor, at=now)
        return _get(tx, board, gid)

    return goal_out(db.write(_w))


def verdict_command(goal_id: str) -> str:
    """The command that settles a verifying goal as done, with its evidence to fill in."""
    return f'agentboard supervisor verdict {goal_id} --pass "what shows it is met"'


def verdict_hint(goal_id: str) -> str:
    """The command that settles a verifying goal: done with its evidence, or open again."""
    return f'{verdict_command(goal_id)}  (or --fail "what is missing")'


def cancel_in(tx: Tx, board: str, goal_id: str, actor: str | None) -> Row:
    """Cancel an active goal inside ``tx``; the goal's row as stored."""
    row = _get(tx, board, goal_id)
    if row["status"] == "verifying":
        raise Conflict(f"goal {goal_id} is verifying: its tasks are done and its acceptance waits for a verdict "
                       f"(`{verdict_hint(goal_id)}`); only an active goal can be cancelled")
    if row["status"] != "active":
        raise Conflict(f"goal {goal_id} is {row['status']}; only an active goal can be cancelled")
    now = time.time()
    tx.execute("UPDATE goals SET status = 'cancelled', completed_at = :now WHERE id = :g", {"now": now, "g": goal_id})
    tx.event(board, None, "goal_cancelled", {"goal_id": goal_id}, actor=actor, at=now)
    return _get(tx, board, goal_id)


def cancel(db: Database, board: str, goal_id: str, *, actor: str | None = None) -> Row:
    return goal_out(db.write(cancel_in, board, goal_id, actor))


def goal_changes(**fields: Any) -> dict[str, Any]:
    """Checked, stored values of goal fields (for :func:`update_in`); None means unchanged."""
    allowed = {"title", "body", "acceptance", "priority", "verify"}
    bad = set(fields) - allowed
    if bad:
        raise InvalidInput(f"cannot change goal field(s) {', '.join(sorted(bad))}")
    changes: dict[str, Any] = {}
    for k, v in fields.items():
        if v is None:
            continue
        if k == "title":
            v = model.title(v)
        elif k == "body":
            v = model.body(v)
        elif k == "priority":
            v = task_fields.check("priority", v)
        elif k == "verify":
            v = dump_json([c.strip() for c in v if c and c.strip()])
        elif k == "acceptance":
            v = dump_json(v)
        changes[k] = v
    return changes


def update_in(tx: Tx, board: str, goal_id: str, changes: dict[str, Any], actor: str | None) -> Row:
    """Store ``changes`` (from :func:`goal_changes`) inside ``tx``; the goal's row as stored."""
    require_board(tx, board)  # an archived board's goals stay as they are until it is restored
    _get(tx, board, goal_id)
    if "verify" in changes:
        checked_verify(tx, board, json.loads(changes["verify"]))
    if changes:
        sets = ", ".join(f"{k} = :{k}" for k in changes)
        tx.execute(f"UPDATE goals SET {sets} WHERE id = :gid", {**changes, "gid": goal_id})
        tx.event(board, None, "goal_edited", {"goal_id": goal_id, "fields": sorted(changes)}, actor=actor)
    return _get(tx, board, goal_id)


def update(db: Database, board: str, goal_id: str, *, actor: str | None = None, **fields: Any) -> Row:
    return goal_out(db.write(update_in, board, goal_id, goal_changes(**fields), actor))


def _summaries(tx: Tx, board: str, goal_ids: list[str]) -> dict[str, Row]:
    out: dict[str, Row] = {g: {"counts": {}, "blocked": [], "runs": 0, "cost_usd": 0.0, "tokens": 0} for g in goal_ids}
    if not goal_ids:
        return out
    names: dict[str, Any] = {}
    inlist = in_list("g", goal_ids, names)
    for r in tx.all(f"SELECT goal_id, status, COUNT(*) AS n FROM tasks WHERE goal_id IN {inlist} AND race_of IS NULL "
                    "GROUP BY goal_id, status", names):
        out[r["goal_id"]]["counts"][r["status"]] = r["n"]
    for r in tx.all(
        f"SELECT id, goal_id, title, block_kind, block_reason FROM tasks WHERE goal_id IN {inlist} AND status = 'blocked' "
        "AND race_of IS NULL ORDER BY updated_at",
        names,
    ):
        out[r["goal_id"]]["blocked"].append({"id": r["id"], "title": r["title"], "kind": r["block_kind"], "reason": r["block_reason"]})
    for r in tx.all(
        f"SELECT t.goal_id, COUNT(r.id) AS runs, COALESCE(SUM(r.cost_usd), 0) AS cost, "
        f"COALESCE(SUM(r.input_tokens), 0) + COALESCE(SUM(r.output_tokens), 0) AS tokens "
        f"FROM task_runs r JOIN tasks t ON t.id = r.task_id WHERE t.goal_id IN {inlist} AND r.synthetic = 0 GROUP BY t.goal_id",
        names,
    ):
        out[r["goal_id"]].update(runs=r["runs"], cost_usd=float(r["cost"] or 0), tokens=int(r["tokens"] or 0))
    for s in out.values():
        total = sum(v for k, v in s["counts"].items() if k != "archived")
        s["total"] = total
        s["done"] = s["counts"].get("done", 0)
    return out


def list_goals(db: Database, board: str, *, status: str | None = None) -> list[GoalRow]:
    def _r(tx: Tx) -> list[Row]:
        sql = "SELECT * FROM goals WHERE board = :b"
        params: dict[str, Any] = {"b": board}
        if status:
            sql += " AND status = :s"
            params["s"] = status
        rows = [goal_out(r) for r in tx.all(sql + " ORDER BY priority DESC, created_at", params)]
        sums = _summaries(tx, board, [r["id"] for r in rows])
        for r in rows:
            r.update(sums[r["id"]])
        return rows
    return cast("list[GoalRow]", db.read(_r))


def show(db: Database, board: str, goal_id: str) -> GoalDetail:
    def _r(tx: Tx) -> Row:
        row = goal_out(_get(tx, board, goal_id))
        row.update(_summaries(tx, board, [goal_id])[goal_id])
        row["tasks"] = tx.all(
            "SELECT id, title, status, assignee, priority, block_reason FROM tasks WHERE goal_id = :g "
            "AND race_of IS NULL ORDER BY priority DESC, created_at", {"g": goal_id},
        )
        return row
    return cast(GoalDetail, db.read(_r))
