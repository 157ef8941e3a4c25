"""Diagnostics of work that waits for a person while nothing else says so (``kernel.diagnostics``
calls these): a task the supervisor escalated (blocked ``needs_input``: the breaker's ``gave_up``
it may have replaced no longer shows), a task rate-limited again and again (the dispatcher
resumes it by itself, each time later: a spent plan waits for a person), and an agent-CLI profile
whose runs could not sign in (each such run blocks its task ``needs_input``; on the board's
supervisor profile, no supervision runs at all). Each finding is the keyword arguments of a
``diagnostics.Finding``."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from ..store.engine import Database, Row, Tx, in_list

#: what the dispatcher's block of a run whose agent CLI could not sign in says (``dispatch.reaping``:
#: "Claude Code could not sign in. run `claude` once and `/login`, or set ANTHROPIC_API_KEY in the
#: profile's env, then unblock the task (it said: …)"; a reviewer's run: its error says the same)
SIGN_IN = "could not sign in"
#: the key the block's advice names (``dispatch.agent_config.login_fix``: a Codex provider's
#: ``env_key``, an opencode provider's ``{env:VAR}``, else the CLI's own)
_KEY = re.compile(r"\bset ([A-Z][A-Z0-9_]{2,})\b")
#: each CLI's own key when the advice names none
_KEYS = {"claude": "ANTHROPIC_API_KEY", "codex": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}


def _payload(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}") if not isinstance(text, dict) else text
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def escalated(db: Database, blocked: list[Row]) -> list[dict[str, Any]]:
    """A finding per task of ``blocked`` that waits for a person since the supervisor escalated
    it (its latest ``escalated`` event is newer than its latest block): who it waits for, the
    escalation's reason, the breaker trip it replaced, and the fix (unblock it once answered)."""
    waiting = {b["id"]: b for b in blocked if b["block_kind"] == "needs_input"}
    if not waiting:
        return []

    def _r(tx: Tx) -> list[Row]:
        params: dict[str, Any] = {}
        return tx.all("SELECT id, task_id, kind, payload FROM task_events WHERE task_id IN "
                      + in_list("t", list(waiting), params) + " AND kind IN ('escalated', 'blocked', 'gave_up', "
                      "'unblocked', 'claimed', 'reopened') ORDER BY id", params)
    last: dict[str, dict[str, Row]] = {}
    for e in db.read(_r):
        last.setdefault(e["task_id"], {})[e["kind"]] = e
    out: list[dict[str, Any]] = []
    for tid, seen in last.items():
        esc = seen.get("escalated")
        if esc is None or int(esc["id"]) < int(seen.get("blocked", {}).get("id") or 0):
            continue  # never escalated, or blocked again since (its own block says why)
        b, p = waiting[tid], _payload(esc["payload"])
        since = max(int(seen.get(k, {}).get("id") or 0) for k in ("unblocked", "claimed", "reopened"))
        trip = seen.get("gave_up")
        tripped = trip is not None and since < int(trip["id"]) < int(esc["id"])
        who = f" ({p['to']})" if p.get("to") else ""
        reason = str(p.get("reason") or b["block_reason"] or "no reason given")
        before = (f"; it had tripped its circuit breaker: {_payload(trip['payload']).get('reason') or 'too many failures'}"
                  if tripped and trip is not None else "")
        out.append(dict(
            kind="escalated", board=b["board"], message=f"{tid} waits for a person{who}: the supervisor escalated it: {reason}{before}. "
            f"Answer it (a comment, `agentboard edit {tid}`, or another agent: `agentboard assign {tid} PROFILE`), "
            "then unblock it", fix=f"agentboard unblock {tid}",
            action={"method": "PATCH", "path": f"/api/tasks/{tid}", "body": {"status": "ready"}}, task_id=tid,
            facts={"to": p.get("to"), "reason": reason, "tripped": tripped}))
    return out


#: rate limits in a row from which a rate-limited task is a finding: the quota is likely spent
RATE_LIMITS_IN_A_ROW = 3


def rate_limited(db: Database, blocked: list[Row]) -> list[dict[str, Any]]:
    """A finding per task of ``blocked`` waiting out a rate limit after :data:`RATE_LIMITS_IN_A_ROW`
    or more in a row: its agent's plan or quota is likely spent, and each wait is longer; a person
    gives the task to another profile or raises the plan."""
    limited = {b["id"]: b for b in blocked if b["block_kind"] == "rate_limited"}
    if not limited:
        return []

    def _r(tx: Tx) -> list[Row]:
        params: dict[str, Any] = {}
        return tx.all("SELECT task_id, outcome FROM task_runs WHERE task_id IN " + in_list("t", list(limited), params)
                      + " AND status = 'closed' ORDER BY task_id, id DESC", params)
    streak: dict[str, int] = {}
    broken: set[str] = set()
    for r in db.read(_r):
        tid = r["task_id"]
        if tid in broken or r["outcome"] != "rate_limited":
            broken.add(tid)
            continue
        streak[tid] = streak.get(tid, 0) + 1
    out: list[dict[str, Any]] = []
    for tid, n in sorted(streak.items()):
        if n < RATE_LIMITS_IN_A_ROW:
            continue
        b = limited[tid]
        who = str(b["assignee"] or "its profile")
        out.append(dict(
            kind="rate_limited_again", board=b["board"], task_id=tid,
            message=f"{tid} was rate-limited {n} times in a row ({who}): its plan or quota is likely spent, and the "
            f"dispatcher waits longer each time: {b['block_reason']}. Give it to another profile "
            f"(`agentboard assign {tid} PROFILE`), or check the plan",
            fix=f"agentboard profiles check {shlex.quote(who)} --turn" if b["assignee"] else f"agentboard assign {tid} PROFILE",
            facts={"in_a_row": n}))
    return out


def sign_in(db: Database, boards: list[str], profiles: dict[str, Row], only: str | None = None) -> list[dict[str, Any]]:
    """A finding per profile (``only``: that one) whose latest run on ``boards`` ended because its
    agent CLI could not sign in: the key to set, how to check the login, the tasks it left
    blocked; on a board's supervisor profile, that no supervision runs until it signs in."""
    from .supervision.waking import supervisor_of

    if not boards:
        return []

    def _r(tx: Tx) -> tuple[list[Row], list[Row], dict[str, str | None]]:
        params: dict[str, Any] = {"s": f"%{SIGN_IN}%"}
        inb = in_list("b", boards, params)
        latest = tx.all(
            "SELECT r.id, r.profile, r.task_id, r.board, r.summary, r.error, r.ended_at FROM task_runs r WHERE r.id IN "
            "(SELECT MAX(x.id) FROM task_runs x WHERE x.board IN " + inb + " AND x.status = 'closed' AND "
            "x.synthetic = 0 AND x.profile IS NOT NULL GROUP BY x.profile) AND (r.summary LIKE :s OR r.error LIKE :s)",
            params)
        held = tx.all(
            "SELECT t.id, t.board, r.profile FROM tasks t JOIN task_runs r ON r.id = (SELECT MAX(x.id) FROM task_runs x "
            "WHERE x.task_id = t.id) WHERE t.status = 'blocked' AND t.block_reason LIKE :s AND t.board IN " + inb,
            params)
        return latest, held, {b: supervisor_of(tx, b) for b in boards}
    latest, held, supervisors = db.read(_r)
    out: list[dict[str, Any]] = []
    for r in latest:
        name = str(r["profile"])
        if only is not None and name != only:
            continue
        said = str(r["summary"] if SIGN_IN in str(r["summary"] or "") else r["error"] or "")
        adapter = str((profiles.get(name) or {}).get("adapter") or "")
        found = _KEY.search(said)
        key = found.group(1) if found else _KEYS.get(adapter)
        tasks = sorted(h["id"] for h in held if h["profile"] == name)
        sup = sorted(slug for slug, p in supervisors.items() if p == name)
        what = (f"its agent CLI could not sign in on its last run (run {r['id']}, task {r['task_id']}): "
                f"{' '.join(said.split())[:300]}")
        blocked = f"; {len(tasks)} task(s) blocked by it: {', '.join(tasks[:10])}" if tasks else ""
        role = (f"; it is the supervisor profile of board(s) {', '.join(sup)}: no supervision runs until it signs in"
                if sup else "")
        setting = (f"set {key} in its env (`agentboard profiles set {shlex.quote(name)} --env {key}=…`)" if key
                   else "give its agent CLI its login")
        unblock = f", then `agentboard unblock {' '.join(tasks[:10])}`" if tasks else ""
        out.append(dict(
            kind="sign_in_failed", board=str(r["board"]), message=f"profile {name!r}: {what}{blocked}{role}",
            fix=f"{setting}; check it with `agentboard profiles check {shlex.quote(name)} --turn`{unblock}",
            severity="error", concerns="profile", subject=name,
            facts={"key": key, "tasks": tasks, "supervisor_of": sup, "run": r["id"]}))
    return out
