"""A race's attempts as they are created with its task (``tasks.create_in`` with ``race``).

:func:`open_race_in` runs inside the transaction that creates the race's task: it checks that
every entry names a profile and that the budgets can afford one run of every attempt together
(:func:`gate`), marks the task a race and writes one pending ``attempts`` row per entry
(``race_created``). :func:`race_cards` reads them back for a race's card and detail.
Starting, following and picking the attempts is ``kernel/races.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..domain.errors import Conflict, InvalidInput
from ..domain.races import Entry, until_of
from ..store.engine import Row, Tx, in_list
from . import budgets


def gate(tx: Tx, task: Row, entries: Sequence[Entry]) -> str | None:
    """Why the budgets cannot afford one run of every attempt of race ``task`` together (None:
    they can): each attempt counts as a run under way for the next."""
    rows: list[Row] = []
    for i, e in enumerate(entries, 1):
        row: Row = {"id": task["id"], "board": task["board"], "goal_id": task.get("goal_id"),
                    "assignee": e.profile, "purpose": None}
        why = budgets.gate_in(tx, row, also=list(rows))
        if why:
            return f"attempt {i} of {len(entries)} ({e.profile}) cannot start: {why}"
        rows.append(row)
    return None


def check_profiles(tx: Tx, entries: Sequence[Entry]) -> None:
    """Refuse entries naming no profile (a race runs only profiles that exist)."""
    names = sorted({e.profile for e in entries})
    params: dict[str, Any] = {}
    known = {r["name"] for r in tx.all("SELECT name FROM profiles WHERE name IN " + in_list("p", names, params),
                                       params)}
    missing = [n for n in names if n not in known]
    if missing:
        raise InvalidInput(f"no profile named {', '.join(repr(n) for n in missing)}: a race runs only profiles "
                           "that exist (agentboard profiles list)")


def open_race_in(tx: Tx, task: Row, entries: Sequence[Entry], until: str | None, actor: str | None) -> Row:
    """Make the just-created ``task`` a race of ``entries``; returns it with ``race_until`` and
    its ``attempts``. Raises ``Conflict`` naming the limit when a budget cannot afford them."""
    until = until_of(until)
    why = gate(tx, task, entries)
    if why:
        raise Conflict(f"the race was not created: {why}")
    tx.execute("UPDATE tasks SET race_until = :u WHERE id = :id", {"u": until, "id": task["id"]})
    base = task.get("branch_name") or f"ab/{task['id']}"
    rows = [{"t": task["id"], "n": i, "b": task["board"], "p": e.profile, "m": e.model, "br": f"{base}-a{i}"}
            for i, e in enumerate(entries, 1)]
    tx.executemany("INSERT INTO attempts (task_id, n, board, profile, model, branch, state) "
                   "VALUES (:t, :n, :b, :p, :m, :br, 'pending')", rows)
    attempts = [{"n": r["n"], "profile": r["p"], "model": r["m"], "branch": r["br"], "state": "pending"}
                for r in rows]
    tx.event(task["board"], task["id"], "race_created", {"until": until, "attempts": attempts}, actor=actor)
    return {**task, "race_until": until, "attempts": attempts}


__all__ = ["check_profiles", "gate", "open_race_in"]


def race_cards(tx: Tx, ids: list[str]) -> dict[str, Row]:
    """What a race's card shows: its attempts (profile, model, state, outcome, verification,
    picked, cost) and its badge (``race 1/3 passed``)."""
    if not ids:
        return {}
    params: dict[str, Any] = {}
    out: dict[str, Row] = {}
    for r in tx.all("SELECT task_id, n, profile, model, state, outcome, verification, picked, cost_usd "
                    "FROM attempts WHERE task_id IN " + in_list("i", ids, params) + " ORDER BY task_id, n", params):
        race = out.setdefault(r["task_id"], {"attempts": []})
        race["attempts"].append({k: r[k] for k in ("n", "profile", "model", "state", "outcome", "verification",
                                                   "cost_usd")} | {"picked": bool(r["picked"])})
    for race in out.values():
        passed = sum(1 for a in race["attempts"] if a["outcome"] == "done")
        race["badge"] = f"race {passed}/{len(race['attempts'])} passed"
    return out
