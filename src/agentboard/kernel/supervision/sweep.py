"""Taking due wakes (the cheap check, one supervision task per subject), their expiry and
escalation, and what the dispatcher's sweep finds to wake the supervisor for."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ...domain import model, states
from ...store.engine import Database, Row, Tx, dump_json, in_list
from .. import hooks
from ..common import board_settings
from ..tasks import NewTask, create_in
from ..tasks.moves import archive_in
from .waking import (
    REPLAN_ACTOR,
    SUPERVISION,
    TAKE_LIMIT,
    _history_text,
    _setting,
    enqueue,
    failure_history,
    supervisor_of,
)

# -- the cheap check and taking due wakes --------------------------------------------------------


def _detail(row: Row) -> dict[str, Any]:
    try:
        d = json.loads(row.get("detail") or "{}")
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


def moot_reason(tx: Tx, wake: Row) -> str | None:
    """Code, no LLM: why ``wake`` has nothing left to judge (None: it still has)."""
    reason, subject, detail = wake["reason"], wake["subject"] or "", _detail(wake)
    if reason == "goal_verifying":
        g = tx.one("SELECT status, verify FROM goals WHERE id = :g", {"g": subject})
        if g is None:
            return "the goal is gone"
        if g["status"] != "verifying":
            return f"the goal is {g['status']}"
        return "the goal's verify commands check it" if (g["verify"] or "[]") != "[]" else None
    if reason == "replan_proposed":
        p = tx.one("SELECT status FROM tasks WHERE id = :t", {"t": detail.get("proposal")})
        return None if p is not None and p["status"] == states.TRIAGE else "the proposal was already released or discarded"
    t = tx.one("SELECT id, status, block_kind, block_on, current_run_id FROM tasks WHERE id = :t", {"t": subject})
    if t is None:
        return "the task is gone"
    status = t["status"]
    if status == states.ARCHIVED:
        return "the task was archived"
    if reason in ("blocked", "gave_up", "stuck"):
        if t["block_kind"] == "dependency" and status == states.TODO:
            on = tx.one("SELECT status FROM tasks WHERE id = :t", {"t": t["block_on"]}) if t["block_on"] else None
            if on is not None and on["status"] in (states.BLOCKED, states.ARCHIVED):
                return None
            return "the task waits for a task that is moving; it resumes by itself"
        if status != states.BLOCKED:
            return f"the task is no longer blocked (it is {status})"
        return _looked_at_already(tx, wake, str(t["block_kind"] or "")) if reason == "blocked" else None
    if reason == "block_loop":
        return None if status == states.TRIAGE else f"the task left triage (it is {status})"
    if reason == "run_lost":
        if status != states.RUNNING or t["current_run_id"] != detail.get("run_id"):
            return "the run was already reaped"
        return None
    if reason == "unrunnable":
        return None if status == states.READY else f"the task is {status}"
    # degraded, sent_back, crashed, stale
    return "the task is done" if status == states.DONE else None


#: the blocks the board lifts by itself that the supervisor is shown once per
#: ``block_loop_window``: a task's rate limit (once per task), a spent budget (once per board) —
#: each repeat would be a paid supervision run that can only escalate what it escalated before
LOOKED_AT_ONCE = ("rate_limited", "budget")


def _looked_at_already(tx: Tx, wake: Row, kind: str) -> str | None:
    """Why a ``blocked`` wake of a :data:`LOOKED_AT_ONCE` kind is moot: the supervisor was given
    one like it within ``block_loop_window`` (None: it was not, or another kind)."""
    if kind not in LOOKED_AT_ONCE:
        return None
    since = time.time() - float(tx.db.settings.block_loop_window)
    params: dict[str, Any] = {"b": wake["board"], "id": wake["id"], "since": since,
                              "k": dump_json({"kind": kind})[:-1] + "%"}
    same = " AND subject = :s" if kind == "rate_limited" else ""
    if same:
        params["s"] = wake["subject"]
    seen = tx.one("SELECT id, subject FROM supervisor_wakes WHERE board = :b AND reason = 'blocked' AND id <> :id "
                  "AND status IN ('running', 'handled', 'expired', 'escalated') AND created_at > :since "
                  f"AND detail LIKE :k{same} ORDER BY id DESC LIMIT 1", params)  # noqa: S608
    if seen is None:
        return None
    if kind == "rate_limited":
        return (f"the supervisor was shown this task's rate limit already (wake {seen['id']}); the dispatcher "
                "resumes it when the cool-down ends")
    return (f"the supervisor was shown this board's spent budget already (wake {seen['id']}, task "
            f"{seen['subject']}); raising the budget releases its tasks (agentboard budget set)")


def _context(tx: Tx, board: str, profile: str, subject: str, wakes: list[Row]) -> tuple[str, str]:
    """The supervision task's title and body: what woke the supervisor and the history."""
    reasons = ", ".join(dict.fromkeys(w["reason"] for w in wakes))
    lines = [f"You are the supervisor of board {board!r} (profile {profile}). You never implement; you judge.",
             "", "## What woke you"]
    for w in wakes:
        extra = _detail(w)
        lines.append(f"- wake {w['id']}: {w['reason']} on {subject}"
                     f"{' (attempt ' + str(w['attempt']) + ')' if int(w['attempt'] or 1) > 1 else ''}"
                     f"{' ' + dump_json(extra) if extra else ''}")
    if subject.startswith("t_"):
        t = tx.one("SELECT id, title, status, assignee, priority, goal_id, block_kind, block_reason, "
                   "block_on, consecutive_failures, rework_count FROM tasks WHERE id = :t", {"t": subject})
        if t is not None:
            lines += ["", f"## Task {t['id']}: {t['title']}",
                      f"status {t['status']}, assignee {t['assignee'] or '-'}, priority {t['priority']}, "
                      f"goal {t['goal_id'] or '-'}, failures in a row {t['consecutive_failures']}, "
                      f"sent back {t['rework_count']} times",
                      f"block: {t['block_kind'] or '-'}: {t['block_reason'] or '-'}"
                      f"{' (waits for ' + t['block_on'] + ')' if t['block_on'] else ''}",
                      "", "## Failure history", _history_text(failure_history(tx, t["id"]))]
    else:
        g = tx.one("SELECT id, title, acceptance, verify FROM goals WHERE id = :g", {"g": subject})
        if g is not None:
            lines += ["", f"## Goal {g['id']}: {g['title']}", f"acceptance: {g['acceptance']}",
                      f"verify commands: {g['verify']}",
                      "All its tasks are done: check the acceptance criteria, then give the verdict."]
    ids = " ".join(str(w["id"]) for w in wakes)
    lines += ["", "## Your tools (your run token allows exactly these)",
              "agentboard supervisor board | task ID | goal ID | runs ID      (read)",
              "agentboard supervisor comment ID TEXT | priority ID N | propose TITLE [--body B --goal G]",
              "agentboard supervisor release ID | discard ID | unblock ID | assign ID PROFILE | reclaim ID",
              "agentboard supervisor escalate ID --to PERSON REASON | verdict GOAL --pass/--fail EVIDENCE",
              f"When done: agentboard supervisor handled {ids} --note 'what you did and why'",
              "then: agentboard complete --summary '...'"]
    title = f"Supervise {subject}: {reasons}"[: model.TITLE_MAX]
    return title, "\n".join(lines)[: model.BODY_MAX]


def _close(tx: Tx, wake: Row, status: str, note: str | None, actor: str | None, now: float) -> None:
    params = {"s": status, "n": (note or "")[:4000] or None, "now": now, "id": wake["id"]}
    if status == "handled":
        tx.execute("UPDATE supervisor_wakes SET status = :s, note = :n, updated_at = :now, handled_at = :now "
                   "WHERE id = :id", params)
    else:
        tx.execute("UPDATE supervisor_wakes SET status = :s, note = :n, updated_at = :now WHERE id = :id", params)
    kind = {"handled": "wake_handled", "moot": "wake_moot", "expired": "wake_expired", "escalated": "escalated"}[status]
    subject = wake["subject"] or ""
    tx.event(wake["board"], subject if subject.startswith("t_") else None, kind,
             {"wake": wake["id"], "reason": wake["reason"], "subject": subject, "note": (note or "")[:2000]},
             actor=actor, at=now)


def _take_due(tx: Tx, board: str, limit: int) -> Row:
    profile = supervisor_of(tx, board)
    out: Row = {"moot": [], "tasks": [], "waiting": 0}
    # on PostgreSQL two dispatchers may take wakes at once: each locks the rows it takes
    lock = " FOR UPDATE SKIP LOCKED" if tx.db.dialect == "postgresql" else ""
    rows = tx.all("SELECT * FROM supervisor_wakes WHERE board = :b AND status = 'pending' ORDER BY id LIMIT :n"
                  + lock, {"b": board, "n": limit})
    if not rows:
        return out
    now = time.time()
    live: dict[str, list[Row]] = {}
    budget_shown: int | None = None  # the one budget block of this pass the supervisor is shown
    for w in rows:
        why = "the board has no supervisor any more" if profile is None else moot_reason(tx, w)
        if why is None and w["reason"] == "blocked" and _detail(w).get("kind") == "budget":
            if budget_shown is not None:
                why = (f"the supervisor is shown this board's spent budget once (wake {budget_shown}); raising "
                       "the budget releases its tasks (agentboard budget set)")
            budget_shown = budget_shown or int(w["id"])
        if why is not None:
            _close(tx, w, "moot", why, "dispatcher", now)
            out["moot"].append(w["id"])
        else:
            live.setdefault(w["subject"] or "", []).append(w)
    if not live or profile is None:
        return out
    params: dict[str, Any] = {"b": board}
    busy = {r["subject"] for r in tx.all(
        "SELECT DISTINCT w.subject FROM supervisor_wakes w JOIN tasks t ON t.id = w.task_id "
        f"WHERE w.board = :b AND w.status = 'running' AND w.subject IN {in_list('s', list(live), params)} "
        "AND t.status NOT IN ('done', 'archived')", params)}
    for subject, wakes in live.items():
        if subject in busy:  # the supervisor is on it already: these wait for the next spawn
            out["waiting"] += len(wakes)
            continue
        title, body = _context(tx, board, profile, subject, wakes)
        task = create_in(tx, NewTask(board=board, title=title, body=body, assignee=profile, actor="dispatcher",
                                     check_board=False))
        tx.execute("UPDATE tasks SET purpose = :p WHERE id = :id", {"p": SUPERVISION, "id": task["id"]})
        ids: dict[str, Any] = {"t": task["id"], "now": now}
        tx.execute(f"UPDATE supervisor_wakes SET status = 'running', task_id = :t, updated_at = :now "
                   f"WHERE id IN {in_list('w', [w['id'] for w in wakes], ids)}", ids)
        out["tasks"].append({"id": task["id"], "subject": subject, "wakes": [w["id"] for w in wakes]})
    return out


def take_due(db: Database, board: str, *, limit: int = TAKE_LIMIT) -> Row:
    """Judge the board's pending wakes in one transaction: ``{"moot": [wake ids], "tasks":
    [{"id", "subject", "wakes"}], "waiting": n}`` — the supervision tasks created, ready for the
    dispatcher to start like any other."""
    return db.write(_take_due, board, limit)


def _escalate_in(tx: Tx, board: str, wake: Row, now: float) -> None:
    to = board_settings(tx, board).get("escalate_to")
    note = f"the supervisor left this wake unhandled twice; a person decides{' (' + str(to) + ')' if to else ''}"
    _close(tx, wake, "escalated", note, "dispatcher", now)
    subject = wake["subject"] or ""
    if subject.startswith("t_"):
        t = tx.one("SELECT status, block_kind FROM tasks WHERE id = :t", {"t": subject})
        if t is not None and t["status"] == states.BLOCKED:
            kept = t["block_kind"] in ("budget", "rate_limited")  # released by their cause, as ever
            tx.execute("UPDATE tasks SET block_kind = " + ("block_kind" if kept else "'needs_input'")
                       + ", block_to = :to, updated_at = :now WHERE id = :t", {"to": to, "now": now, "t": subject})


def _reconcile(tx: Tx, board: str, ttl: float) -> Row:
    now = time.time()
    out: Row = {"handled": 0, "expired": [], "refired": [], "escalated": []}
    lock = " FOR UPDATE OF w SKIP LOCKED" if tx.db.dialect == "postgresql" else ""
    rows = tx.all(
        "SELECT w.*, t.status AS task_status FROM supervisor_wakes w LEFT JOIN tasks t ON t.id = w.task_id "
        "WHERE w.board = :b AND w.status = 'running'" + lock, {"b": board})
    for w in rows:
        # its supervision task ended (or the breaker stopped it) without marking the wake handled
        closed = w["task_status"] in (None, states.DONE, states.ARCHIVED, states.BLOCKED)
        late = (w["updated_at"] or w["created_at"]) < now - ttl
        if not (closed or late):
            continue
        why = (f"its supervision task ended ({w['task_status'] or 'gone'}) without marking it handled" if closed
               else f"not handled within {int(ttl)}s")
        _close(tx, w, "expired", why, "dispatcher", now)
        out["expired"].append(w["id"])
        if int(w["attempt"] or 1) >= 2:
            _escalate_in(tx, board, w, now)
            out["escalated"].append(w["id"])
        else:
            wid = enqueue(tx, board, w["reason"], w["subject"] or "", actor="dispatcher", detail=_detail(w), attempt=2)
            if wid is not None:
                out["refired"].append(wid)
    return out


def reconcile(db: Database, board: str, *, ttl: float | None = None) -> Row:
    """Close the wakes of supervision tasks that ended (or ran past ``supervisor_wake_ttl``)
    without marking them handled: expired; re-fired once, then escalated to a person."""
    return db.write(_reconcile, board, float(ttl if ttl is not None else db.settings.supervisor_wake_ttl))


# -- what the sweep finds ------------------------------------------------------------------------


def sweep_candidates(db: Database, board: str, now: float) -> Row:
    """What the hooks may have missed, in one read: running tasks (the dispatcher checks their
    processes), tasks blocked longer than ``stuck_after``, ready tasks no enabled profile runs,
    goals left verifying with no verify commands (say, settled by the supervisor's own action)."""
    def _r(tx: Tx) -> Row:
        stuck_after = _setting(tx, board, "stuck_after")
        running = tx.all("SELECT id, current_run_id, worker_pid, worker_host, claim_expires, started_at, purpose "
                         "FROM tasks WHERE board = :b AND status = 'running'", {"b": board})
        stuck = tx.all("SELECT id FROM tasks WHERE board = :b AND status = 'blocked' AND updated_at < :cut "
                       "AND (purpose IS NULL OR purpose != 'supervision')", {"b": board, "cut": now - stuck_after})
        default = board_settings(tx, board).get("default_assignee") or tx.db.settings.default_assignee
        unrunnable = tx.all(
            "SELECT t.id FROM tasks t LEFT JOIN profiles p ON p.name = COALESCE(t.assignee, :d) "
            "WHERE t.board = :b AND t.status = 'ready' AND (p.name IS NULL OR p.enabled = 0) "
            "AND (t.purpose IS NULL OR t.purpose != 'supervision')", {"b": board, "d": default})
        verifying = tx.all("SELECT id FROM goals WHERE board = :b AND status = 'verifying' AND verify = '[]'",
                           {"b": board})
        return {"running": running, "stuck": [r["id"] for r in stuck], "unrunnable": [r["id"] for r in unrunnable],
                "goal_verifying": [r["id"] for r in verifying]}
    return db.read(_r)


def due_work(db: Database) -> dict[str, Row]:
    """Boards with open wakes, ``{board: {"pending": n, "running": n}}``, and the verifying goals
    with verify commands (``{board: {"goals": [...]}}``): one cheap read (a pass has it in its
    snapshot, ``kernel.dispatching.pass_snapshot``)."""
    return db.read(lambda tx: due_work_later(tx)())


def due_work_later(tx: Tx) -> Callable[[], dict[str, Row]]:
    """:func:`due_work` inside the caller's transaction: sent now, read when the answer is called."""
    wakes = tx.later("SELECT board, status, COUNT(*) AS n FROM supervisor_wakes "
                     "WHERE status IN ('pending', 'running') GROUP BY board, status")
    goals = tx.later("SELECT id, board, title, verify FROM goals WHERE status = 'verifying' AND verify != '[]'")

    def answer() -> dict[str, Row]:
        out: dict[str, Row] = {}
        for r in wakes():
            out.setdefault(r["board"], {"pending": 0, "running": 0, "goals": []})[r["status"]] = int(r["n"])
        for g in goals():
            entry = out.setdefault(g["board"], {"pending": 0, "running": 0, "goals": []})
            try:
                commands = json.loads(g["verify"] or "[]")
            except ValueError:
                commands = []
            entry["goals"].append({"id": g["id"], "title": g["title"], "verify": commands})
        return out
    return answer


def sweep_enqueue(db: Database, board: str, found: dict[str, list[Any]]) -> list[int]:
    """Enqueue the sweep's wakes (``{"run_lost": [(task, run)], "stuck": [...], "unrunnable": [...]}``)
    in one transaction; the ids added (already pending ones coalesce)."""
    def _w(tx: Tx) -> list[int]:
        if supervisor_of(tx, board) is None:
            return []
        pending = {(r["reason"], r["subject"]) for r in tx.all(
            "SELECT reason, subject FROM supervisor_wakes WHERE board = :b AND status = 'pending'", {"b": board})}
        todo: list[tuple[str, str, dict[str, Any]]] = [("run_lost", tid, {"run_id": rid})
                                                       for tid, rid in found.get("run_lost", [])]
        todo += [(reason, tid, {}) for reason in ("stuck", "unrunnable") for tid in found.get(reason, [])]
        busy = {r["subject"] for r in tx.all(
            "SELECT subject FROM supervisor_wakes WHERE board = :b AND status = 'running' AND reason = 'goal_verifying'",
            {"b": board})}
        todo += [("goal_verifying", gid, {"goal_id": gid}) for gid in found.get("goal_verifying", []) if gid not in busy]
        out = []
        for reason, tid, detail in todo:
            if (reason, tid) in pending:  # coalesced without a write
                continue
            wid = enqueue(tx, board, reason, tid, actor="sweep", detail=detail, supervised=True)
            if wid:
                out.append(wid)
        return out
    if not any(found.get(k) for k in ("run_lost", "stuck", "unrunnable", "goal_verifying")):
        return []
    return db.write(_w)


def withdraw_moot_replans(db: Database, board: str) -> list[str]:
    """Archive the replan proposals (``propose_replan``) still in triage whose task has been done
    or archived since (a person or the supervisor fixed it, its race settled): left there, each
    holds its goal open for good. The ids archived."""
    def _w(tx: Tx) -> list[str]:
        out = []
        for p in tx.all("SELECT id, idempotency_key FROM tasks WHERE board = :b AND status = 'triage' "
                        "AND idempotency_key LIKE 'replan:%'", {"b": board}):
            subject = str(p["idempotency_key"]).split(":")[1]
            status = tx.scalar("SELECT status FROM tasks WHERE id = :t", {"t": subject})
            if status is None or status in (states.DONE, states.ARCHIVED):
                archive_in(tx, board, str(p["id"]), actor=REPLAN_ACTOR,
                           reason=f"moot: task {subject} is {status or 'gone'}")
                out.append(str(p["id"]))
        return out
    return db.write(_w)


@hooks.on("budget_releasing")
def on_budget_releasing(tx: Tx, board: str, task: Row, actor: str | None) -> bool:
    """A supervision task stopped by its budget whose wakes were re-fired or went to a person
    while it waited is archived instead of released (False): run now, it would spend for
    nothing. One with a wake of its own still open is released (True)."""
    if task.get("purpose") != SUPERVISION or tx.scalar(
            "SELECT 1 FROM supervisor_wakes WHERE task_id = :t AND status IN ('pending', 'running')",
            {"t": task["id"]}) is not None:
        return True
    archive_in(tx, board, str(task["id"]), actor=actor,
               reason="its wakes were re-fired or went to a person while its budget was spent")
    return False
