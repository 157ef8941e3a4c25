"""The guard against invented children: a run that reports tasks it created is checked against
the board.

A worker (or an LLM speaking through one) may list the tasks it created in its report's metadata
(``created_cards``, ``createdTasks``, ``created_tasks``, ``createdCards``). Each id must be a task
on the run's board that this run created — through its run token (``created_by`` is
``run:<id>``) or under its profile's name after the run started. Any other id is removed from
the stored metadata and named in a ``children_refused`` event, so nothing downstream trusts a
child that does not exist or belongs to someone else.
"""

from __future__ import annotations

from typing import Any

from ..store.engine import Tx, in_list

#: the metadata keys under which a run reports the tasks it created
CLAIM_KEYS = ("created_cards", "createdTasks", "created_tasks", "createdCards")


def _claimed_id(item: Any) -> str | None:
    if isinstance(item, str):
        return item.strip() or None
    if isinstance(item, dict):
        value = item.get("id") or item.get("task_id")
        return str(value).strip() if isinstance(value, str) else None
    return None


def check_created_in(tx: Tx, board: str, task_id: str, run_id: int | None, metadata: dict[str, Any] | None,
                     *, actor: str | None = None) -> dict[str, Any] | None:
    """``metadata`` with every claimed child that run ``run_id`` did not create removed (and a
    ``children_refused`` event naming them and why); unchanged when it claims nothing."""
    if not metadata or run_id is None:
        return metadata
    keys = [k for k in CLAIM_KEYS if k in metadata]
    if not keys:
        return metadata
    claimed: list[str] = []
    malformed: list[Any] = []
    for key in keys:
        items = metadata[key] if isinstance(metadata[key], list) else [metadata[key]]
        for item in items:
            cid = _claimed_id(item)
            if cid is None:
                malformed.append(item)
            elif cid not in claimed:
                claimed.append(cid)
    run = tx.one("SELECT profile, started_at FROM task_runs WHERE id = :r", {"r": run_id})
    found: dict[str, dict[str, Any]] = {}
    if claimed:
        names: dict[str, Any] = {}
        inlist = in_list("c", claimed, names)
        for r in tx.all(f"SELECT id, board, created_by, created_at FROM tasks WHERE id IN {inlist}", names):
            found[r["id"]] = r
    reasons: dict[str, str] = {}
    for cid in claimed:
        row = found.get(cid)
        if row is None:
            reasons[cid] = "no such task"
        elif row["board"] != board:
            reasons[cid] = f"on board {row['board']!r}, not {board!r}"
        elif not _made_by(row, run_id, run):
            reasons[cid] = f"created by {row['created_by'] or 'someone else'}, not by run {run_id}"
    if not reasons and not malformed:
        return metadata
    tx.event(board, task_id, "children_refused",
             {"refused": reasons, "malformed": [repr(m)[:100] for m in malformed][:20],
              "accepted": [c for c in claimed if c not in reasons]},
             run_id=run_id, actor=actor)
    out = dict(metadata)
    for key in keys:
        items = metadata[key] if isinstance(metadata[key], list) else [metadata[key]]
        out[key] = [i for i in items if (cid := _claimed_id(i)) is not None and cid not in reasons]
    return out


def _made_by(row: dict[str, Any], run_id: int, run: dict[str, Any] | None) -> bool:
    creator = row.get("created_by")
    if creator == f"run:{run_id}":
        return True
    if run is None or not run.get("profile") or creator != run["profile"]:
        return False
    return float(row["created_at"]) >= float(run["started_at"])


__all__ = ["CLAIM_KEYS", "check_created_in"]
