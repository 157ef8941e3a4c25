"""A race's attempts as they are created with its task (``tasks.create_in`` with ``race``).

:func:`open_race_in` runs inside the transaction that creates the race's task: it checks that
every entry names a profile and that the budgets can afford one run of every attempt together
(:func:`gate`), marks the task a race and writes one pending ``attempts`` row per entry
(``race_created``). :func:`race_cards` reads them back for a race's card and detail.
:func:`observed` says how an attempt stands from its own task and runs — and whether it passed
(:func:`passes`): done by a report that was not degraded and, when the race has verify
commands, verified. Starting, following and picking the attempts is ``kernel/races.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ..domain import states
from ..domain.errors import Conflict, InvalidInput
from ..domain.races import Entry, until_of
from ..store.engine import Row, Tx, in_list
from . import budgets
from .common import run_metadata


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


#: block kinds that only pause an attempt (it resumes by itself)
_PAUSED = frozenset({"rate_limited", "budget", "dependency"})


def _verification(runs: Sequence[Row]) -> str | None:
    for r in reversed(runs):
        v = run_metadata(r).get("verification")
        if isinstance(v, dict) and v.get("passed") is not None:
            return "passed" if v.get("passed") else "failed"
        if r.get("outcome") == "verify_failed":
            return "failed"
    return None


def _degraded(runs: Sequence[Row]) -> bool:
    """Whether the attempt's last report is a degraded one (its ``result.json`` never validated:
    it went to review with a summary taken from its output, unverified)."""
    for r in reversed(runs):
        meta = run_metadata(r)
        if meta.get("review_run"):
            continue
        if meta.get("degraded"):
            return True
        if r.get("outcome") in ("completed", "review_requested"):
            return False
    return False


def checked_race(tx: Tx, race: Row) -> bool:
    """Whether the race's attempts must pass verification to pass: it has verify commands, and
    verification is on."""
    verify = race.get("verify")
    commands = json.loads(verify) if isinstance(verify, str) and verify else verify
    return bool(commands) and bool(getattr(tx.db.settings, "verify", True))


def passes(att: Row) -> bool:
    """An attempt that passed: it finished done (its task done, verified when the race has
    verify commands, not degraded: :func:`observed` says so)."""
    return att.get("outcome") == "done"


#: seconds a finished attempt waits for the exit of a worker that reported before it exited (its
#: usage is recorded then): the dispatcher stops one that goes on within 30 s of its report; past
#: this, one whose exit nobody recorded (its dispatcher gone) no longer holds the race up
EXIT_WAIT = 120.0


#: the outcomes of a run closed on its worker's report (its worker may still be running)
REPORTED = frozenset({"completed", "review_requested", "blocked"})


def _exit_pending(runs: Sequence[Row], now: float) -> bool:
    """Whether a run of the attempt closed on its worker's report while that worker still ran:
    its exit, and the usage its agent reported with it, not recorded yet. A run the dispatcher
    closed itself (crashed, stale, timed out: its worker gone or stopped) waits for nothing."""
    return any(r.get("worker_pid") and r.get("exit_code") is None and r.get("ended_at")
               and r.get("outcome") in REPORTED and now - float(r["ended_at"]) < EXIT_WAIT for r in runs)


def observed(task: Row, runs: Sequence[Row], checked: bool, now: float | None = None) -> Row:
    """An attempt's state, outcome and usage as its own task and runs say. It passed (outcome
    ``done``) only when its task is done by a report that was not degraded and, when the race
    has verify commands (``checked``), whose verification passed; a task in review, or done
    otherwise, finished without passing (``failed``). One whose worker reported and has not
    exited yet is still ``running`` (:data:`EXIT_WAIT`): what it spent is known once it has, so
    a race decides (and compares its attempts) with their usage. ``cost_known``: some run of it
    reported a cost (an agent that reports none, Gemini CLI, leaves it unknown, not $0)."""
    status = task["status"]
    error = None
    verification = _verification(runs)
    degraded = _degraded(runs) if status in (states.DONE, states.REVIEW) else False
    if status == states.DONE and not degraded and (verification == "passed" or not checked):
        state, outcome = "finished", "done"
    elif status in (states.DONE, states.REVIEW):
        state, outcome = "finished", "failed"
        if degraded:
            error = ("its result (.board/result.json) never validated: it went to review unverified, which is no "
                     "pass")
        elif status == states.REVIEW:
            error = "it asked for review instead of finishing: an attempt passes only by finishing verified"
        else:
            error = "it was done without its verification passing"
    elif status == states.BLOCKED and task.get("block_kind") not in _PAUSED:
        state = "finished"
        last = runs[-1]["outcome"] if runs else None
        outcome = "crashed" if last == "crashed" else "failed"
        error = task.get("block_reason") or task.get("last_failure_error")
    elif status == states.ARCHIVED:
        state, outcome = "stopped", "stopped"
    elif status == states.BLOCKED and runs:  # paused (a budget, a rate limit): it resumes by itself
        state, outcome = "running", None
        error = f"paused ({task.get('block_kind')}): {task.get('block_reason') or 'it resumes by itself'}"
    elif runs:
        state, outcome = "running", None
    else:
        state, outcome = "pending", None
    if state == "finished" and _exit_pending(runs, time.time() if now is None else now):
        state, outcome, error = "running", None, None
    ended = [float(r["ended_at"]) for r in runs if r.get("ended_at")]
    return {
        "state": state, "outcome": outcome, "error": error, "verification": verification,
        "started_at": min((float(r["started_at"]) for r in runs), default=None),
        "finished_at": (task.get("completed_at") or max(ended, default=None)) if state != "running" and runs else None,
        "input_tokens": sum(int(r.get("input_tokens") or 0) for r in runs),
        "output_tokens": sum(int(r.get("output_tokens") or 0) for r in runs),
        "cost_usd": round(sum(float(r.get("cost_usd") or 0) for r in runs), 6),
        "cost_known": not runs or any(r.get("cost_usd") is not None for r in runs),
        "summary": task.get("result") or next((r["summary"] for r in reversed(runs) if r.get("summary")), None),
        "run_id": runs[-1]["id"] if runs else None,
        "runs": len(runs),
    }


__all__ = ["check_profiles", "checked_race", "gate", "observed", "open_race_in", "passes"]


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
        passed = sum(1 for a in race["attempts"] if passes(a))
        race["badge"] = f"race {passed}/{len(race['attempts'])} passed"
    return out
