"""The supervisor's side of the kernel: wakes, replan proposals, the block loop, goals that
verify, and the writes of the supervisor's tools.

A board names its supervisor profile in its settings (``supervisor = NAME``). Its handlers of
the kernel's hooks (``kernel/hooks.py``: :func:`on_blocked`, :func:`on_gave_up`,
:func:`on_sent_back`, :func:`on_failed`, :func:`on_telemetry`, :func:`on_goal_verifying`,
:func:`on_budget_blocked`) run inside the transaction of the change that fires them and enqueue a
**wake**: one pending row per ``(board, reason, subject)`` (a partial unique
index coalesces the rest), never for a change the supervisor itself made (actor
``supervisor:<profile>``) and never about the supervisor's own tasks.

The dispatcher (``dispatch/supervising.py``) takes due wakes with :func:`take_due`: a cheap
check in code (:func:`moot_reason`) closes the ones with nothing left to judge as ``moot``; the
others become one **supervision task** per subject (``tasks.purpose = 'supervision'``, assigned
to the supervisor profile, its body the context: wake ids, subjects, the failure history), which
the dispatcher starts like any task, under the same caps. The supervisor marks its wakes handled
(:func:`handle`); a wake it leaves open expires (:func:`reconcile`), re-fires once, then is
escalated to a person.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from ..domain import model, states
from ..domain.errors import Conflict, Forbidden, InvalidInput, NotFound
from ..store.engine import Database, Row, Tx, dump_json, in_list
from . import hooks
from .common import board_settings, get_task, require_board, task_out
from .tasks import NewTask, archive_in, block_in, block_reason, create_in, release_in

#: ``tasks.purpose`` of the supervisor's own tasks
SUPERVISION = "supervision"
#: who the kernel's own replan proposals are created by
REPLAN_ACTOR = "replan"
ACTOR_PREFIX = "supervisor:"

REASONS = (
    "blocked", "gave_up", "degraded", "sent_back", "crashed", "stale", "goal_verifying",
    "replan_proposed", "block_loop", "run_lost", "stuck", "unrunnable",
)
WAKE_STATUSES = states.WAKE_STATUSES
#: the events that make up a task's failure history
HISTORY_KINDS = (
    "blocked", "gave_up", "rejected", "changes_requested", "verify_failed", "crashed", "stale",
    "timed_out", "protocol_violation", "result_degraded", "spawn_failed", "block_loop_detected",
)
#: outcomes that wake the supervisor when they repeat
REPEATED_OUTCOMES = {"crashed": "crashed", "stale": "stale", "timed_out": "crashed"}
#: how many wakes one pass turns into supervision tasks per board
TAKE_LIMIT = 500


def supervisor_actor(profile: str) -> str:
    return f"{ACTOR_PREFIX}{profile}"


def is_supervisor_actor(actor: str | None) -> bool:
    return bool(actor) and str(actor).startswith(ACTOR_PREFIX)


def supervisor_of(tx: Tx, board: str) -> str | None:
    """The board's supervisor profile (its ``supervisor`` setting), or None."""
    name = board_settings(tx, board).get("supervisor")
    return str(name) if name else None


def _setting(tx: Tx, board: str, key: str) -> int:
    value = board_settings(tx, board).get(key)
    return int(value) if value else int(getattr(tx.db.settings, key))


# -- enqueue -----------------------------------------------------------------------------------

_ENQUEUE = (
    "INSERT INTO supervisor_wakes (board, reason, subject, status, created_at, updated_at, detail, attempt) "
    "VALUES (:b, :r, :s, 'pending', :now, :now, :d, :a) ON CONFLICT DO NOTHING RETURNING id"
)


def enqueue(
    tx: Tx, board: str, reason: str, subject: str, *, actor: str | None = None,
    detail: dict[str, Any] | None = None, task: Row | None = None, attempt: int = 1, supervised: bool = False,
) -> int | None:
    """Enqueue a wake in the caller's transaction; its id, or None when none was added (no
    supervisor, the supervisor's own action or task, or one is already pending).
    ``supervised``: the caller already knows the board has a supervisor."""
    if reason not in REASONS:
        raise InvalidInput(f"unknown wake reason {reason!r}")
    if is_supervisor_actor(actor):
        return None
    if task is not None and task.get("purpose") == SUPERVISION:
        return None
    if not supervised and supervisor_of(tx, board) is None:
        return None
    now = time.time()
    row = tx.one(_ENQUEUE, {"b": board, "r": reason, "s": subject, "now": now,
                            "d": dump_json(detail or {}), "a": attempt})
    if row is None:
        return None
    wid = int(row["id"])
    task_id = subject if subject.startswith("t_") else None
    tx.event(board, task_id, "supervisor_woken",
             {"wake": wid, "reason": reason, "subject": subject, "attempt": attempt, **(detail or {})},
             actor=actor, at=now)
    return wid


# -- the hooks ---------------------------------------------------------------------------------


@hooks.on("blocked")
def on_blocked(tx: Tx, board: str, task: Row, kind: str, reason: str, actor: str | None) -> Row:
    """A task was blocked (any kind) in this transaction: detect a block loop (the task goes to
    triage), else enqueue a ``blocked`` (or ``gave_up``) wake. Returns the task as it now is."""
    if task.get("purpose") == SUPERVISION:
        return task
    limit = _setting(tx, board, "block_loop_limit")
    since = time.time() - float(tx.db.settings.block_loop_window)
    count = int(tx.scalar(
        "SELECT COUNT(*) FROM task_events WHERE task_id = :t AND kind IN ('blocked', 'gave_up', 'rejected') "
        "AND created_at > :since", {"t": task["id"], "since": since}) or 0)
    if count > limit and task.get("status") == states.BLOCKED:
        states.check("block_loop", states.BLOCKED, states.TRIAGE, task["id"])
        now = time.time()
        why = f"blocked {count} times within {int(tx.db.settings.block_loop_window)}s (limit {limit}); last: {reason}"
        tx.execute("UPDATE tasks SET status = 'triage', block_reason = :r, updated_at = :now WHERE id = :id",
                   {"r": why[: model.COMMENT_MAX], "now": now, "id": task["id"]})
        tx.event(board, task["id"], "block_loop_detected", {"count": count, "limit": limit, "kind": kind,
                                                           "reason": reason[:2000]}, actor=actor, at=now)
        task = dict(task, status=states.TRIAGE, block_reason=why)
        enqueue(tx, board, "block_loop", task["id"], actor=actor, detail={"count": count, "kind": kind}, task=task)
        return task
    wake_reason = "gave_up" if kind == "gave_up" else "blocked"
    enqueue(tx, board, wake_reason, task["id"], actor=actor, task=task,
            detail={"kind": kind, **({"on": task["block_on"]} if task.get("block_on") else {})})
    return task


@hooks.on("gave_up")
def on_gave_up(tx: Tx, board: str, task: Row, actor: str | None) -> Row:
    """The breaker gave up on a task: the block hook, then a replan proposal (no LLM decides)."""
    if task.get("purpose") == SUPERVISION:
        return task
    task = on_blocked(tx, board, task, "gave_up", str(task.get("block_reason") or "gave up"), actor)
    propose_replan(tx, board, task, "the circuit breaker gave up on it", actor)
    return task


@hooks.on("sent_back")
def on_sent_back(tx: Tx, board: str, task: Row, actor: str | None) -> None:
    """Review or verification sent a task back: wake at the ``replan_after``-th time, propose a
    replan when it happens more often than that."""
    if task.get("purpose") == SUPERVISION:
        return
    n = int(tx.scalar("SELECT COUNT(*) FROM task_events WHERE task_id = :t AND kind IN "
                      "('changes_requested', 'verify_failed')", {"t": task["id"]}) or 0)
    limit = _setting(tx, board, "replan_after")
    if n >= limit:
        enqueue(tx, board, "sent_back", task["id"], actor=actor, task=task, detail={"times": n})
    if n > limit:
        propose_replan(tx, board, task, f"review or verification sent it back {n} times (limit {limit})", actor)


@hooks.on("failed")
def on_failed(tx: Tx, board: str, task: Row, outcome: str, failures: int, actor: str | None) -> None:
    """A run crashed, went stale or timed out: wake when it happens again (two in a row)."""
    reason = REPEATED_OUTCOMES.get(outcome)
    if reason is None or failures < 2 or task.get("status") == states.BLOCKED:
        return
    enqueue(tx, board, reason, task["id"], actor=actor, task=task, detail={"outcome": outcome, "failures": failures})


@hooks.on("telemetry")
def on_telemetry(tx: Tx, board: str, task_id: str | None, kind: str, actor: str | None) -> None:
    """Telemetry that wakes: a result that never validated (``result_degraded``)."""
    if kind != "result_degraded" or not task_id:
        return
    row = tx.one("SELECT id, purpose FROM tasks WHERE id = :t", {"t": task_id})
    if row is not None:
        enqueue(tx, board, "degraded", task_id, actor=actor, task=row)


@hooks.on("goal_verifying")
def on_goal_verifying(tx: Tx, board: str, goal_id: str, actor: str | None) -> None:
    """All of an active goal's tasks are done and the goal is ``verifying`` (never done on counts
    alone): the supervisor is woken to check its acceptance."""
    enqueue(tx, board, "goal_verifying", goal_id, actor=actor, detail={"goal_id": goal_id})


@hooks.on("budget_blocked")
def on_budget_blocked(tx: Tx, board: str, task_id: str, actor: str | None) -> None:
    """A budget block wakes the board's supervisor like any block (not counted as a block loop:
    the task did nothing wrong); a supervision task's own block wakes nobody."""
    row = tx.one("SELECT * FROM tasks WHERE id = :id", {"id": task_id})
    if row is not None:
        enqueue(tx, board, "blocked", task_id, actor=actor, task=row, detail={"kind": "budget"})


# -- replan proposals --------------------------------------------------------------------------


def failure_history(tx: Tx, task_id: str, limit: int = 30) -> list[Row]:
    """The task's failures, oldest first: ``{"at", "kind", "actor", "what"}``."""
    params: dict[str, Any] = {"t": task_id, "n": limit}
    kinds = in_list("k", HISTORY_KINDS, params)
    rows = tx.all(f"SELECT kind, payload, actor, created_at FROM task_events WHERE task_id = :t AND kind IN {kinds} "
                  "ORDER BY id DESC LIMIT :n", params)
    out = []
    for r in reversed(rows):
        try:
            p = json.loads(r["payload"] or "{}")
        except ValueError:
            p = {}
        what = (p.get("error") or p.get("reason") or p.get("feedback") or p.get("last_error")
                or p.get("kind") or "")
        out.append({"at": r["created_at"], "kind": r["kind"], "actor": r["actor"], "what": str(what)[:500]})
    return out


def _history_text(history: list[Row]) -> str:
    if not history:
        return "(no failures recorded)"
    return "\n".join(f"- {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(h['at']))} {h['kind']}"
                     f"{' by ' + h['actor'] if h['actor'] else ''}: {h['what'] or '-'}" for h in history)


def propose_replan(tx: Tx, board: str, task: Row, why: str, actor: str | None) -> str | None:
    """Create a replan proposal for ``task`` in triage, in its goal, with its failure history as
    the body, and wake the supervisor; None when one is already waiting in triage."""
    if supervisor_of(tx, board) is None:  # the deterministic road belongs to a supervised board
        return None
    prefix = f"replan:{task['id']}:"
    rows = tx.all("SELECT id, status FROM tasks WHERE board = :b AND idempotency_key LIKE :k",
                  {"b": board, "k": prefix + "%"})
    if any(r["status"] == states.TRIAGE for r in rows):
        return None
    history = failure_history(tx, task["id"])
    body = (f"The kernel proposes to replan task {task['id']} ({task['title']}): {why}.\n\n"
            f"## Failure history\n{_history_text(history)}\n\n"
            f"## Last block reason\n{task.get('block_reason') or '-'}\n\n"
            "Decide how to re-scope or split it, then release this proposal (or discard it).")
    new = NewTask(board=board, title=f"Replan: {task['title']}"[: model.TITLE_MAX], body=body[: model.BODY_MAX],
                  goal=task.get("goal_id"), priority=int(task.get("priority") or 0), triage=True,
                  tenant=task.get("tenant"), idempotency_key=f"{prefix}{len(rows) + 1}", actor=REPLAN_ACTOR,
                  check_board=False)
    created = create_in(tx, new)
    tx.event(board, task["id"], "replan_proposed", {"proposal": created["id"], "why": why}, actor=actor)
    enqueue(tx, board, "replan_proposed", task["id"], actor=actor, task=task, detail={"proposal": created["id"]})
    return str(created["id"])


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
        return None if status == states.BLOCKED else f"the task is no longer blocked (it is {status})"
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
    for w in rows:
        why = "the board has no supervisor any more" if profile is None else moot_reason(tx, w)
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
        t = tx.one("SELECT status FROM tasks WHERE id = :t", {"t": subject})
        if t is not None and t["status"] == states.BLOCKED:
            tx.execute("UPDATE tasks SET block_kind = 'needs_input', block_to = :to, updated_at = :now WHERE id = :t",
                       {"to": to, "now": now, "t": subject})


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
    with verify commands (``{board: {"goals": [...]}}``): one cheap read per pass."""
    def _r(tx: Tx) -> dict[str, Row]:
        out: dict[str, Row] = {}
        for r in tx.all("SELECT board, status, COUNT(*) AS n FROM supervisor_wakes "
                        "WHERE status IN ('pending', 'running') GROUP BY board, status"):
            out.setdefault(r["board"], {"pending": 0, "running": 0, "goals": []})[r["status"]] = int(r["n"])
        for g in tx.all("SELECT id, board, title, verify FROM goals WHERE status = 'verifying' AND verify != '[]'"):
            entry = out.setdefault(g["board"], {"pending": 0, "running": 0, "goals": []})
            try:
                commands = json.loads(g["verify"] or "[]")
            except ValueError:
                commands = []
            entry["goals"].append({"id": g["id"], "title": g["title"], "verify": commands})
        return out
    return db.read(_r)


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


# -- the supervisor's tools ----------------------------------------------------------------------


def _ids(values: Iterable[int | str]) -> list[int]:
    out = []
    for v in values:
        try:
            out.append(int(v))
        except (TypeError, ValueError):
            raise InvalidInput(f"invalid wake id {v!r}: wake ids are numbers") from None
    if not out:
        raise InvalidInput("give at least one wake id")
    return out


def handle(db: Database, board: str, wake_ids: Iterable[int | str], *, note: str | None = None,
           actor: str | None = None) -> list[Row]:
    """Mark wakes handled (the supervisor's reasoning summary in ``note``); a wake already closed
    is refused, and nothing changes."""
    ids = _ids(wake_ids)

    def _w(tx: Tx) -> list[Row]:
        params: dict[str, Any] = {"b": board}
        lock = " FOR UPDATE" if tx.db.dialect == "postgresql" else ""
        rows = tx.all(f"SELECT * FROM supervisor_wakes WHERE board = :b AND id IN {in_list('w', ids, params)}" + lock,
                      params)
        found = {int(r["id"]): r for r in rows}
        for i in ids:
            if i not in found:
                raise NotFound(f"no wake {i} on board {board!r}; see `agentboard supervisor wakes`")
            if found[i]["status"] not in ("pending", "running"):
                raise Conflict(f"wake {i} is already {found[i]['status']}")
        now = time.time()
        for i in ids:
            _close(tx, found[i], "handled", note, actor, now)
        return [wake_out(dict(found[i], status="handled", note=note, handled_at=now)) for i in ids]

    return db.write(_w)


def _own_proposal(tx: Tx, board: str, task_id: str, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    if task["status"] != states.TRIAGE:
        raise Conflict(f"task {task_id} is {task['status']}, not a proposal waiting in triage")
    mine = task["created_by"] in (actor, REPLAN_ACTOR)
    if is_supervisor_actor(actor) and not mine:
        raise Forbidden(f"the supervisor may only release or discard its own proposals and the kernel's replan "
                        f"proposals; task {task_id} was proposed by {task['created_by'] or 'someone else'}: a person decides")
    return task


def release_proposal(db: Database, board: str, task_id: str, *, actor: str | None = None) -> Row:
    """Release a proposal from triage (the supervisor: only its own and the replan proposals).
    The released task meets every gate like any other task."""
    def _w(tx: Tx) -> Row:
        _own_proposal(tx, board, task_id, actor)
        return release_in(tx, board, task_id, actor)
    return db.write(_w)


def discard_proposal(db: Database, board: str, task_id: str, *, actor: str | None = None) -> Row:
    """Archive a proposal (the supervisor: only its own and the replan proposals)."""
    def _w(tx: Tx) -> Row:
        _own_proposal(tx, board, task_id, actor)
        return archive_in(tx, board, task_id, actor)
    return db.write(_w)


def escalate(db: Database, board: str, task_id: str, reason: str, *, to: str | None = None,
             actor: str | None = None) -> Row:
    """Hand a task to a person: blocked with kind ``needs_input``, addressed to ``to`` (default:
    the board's ``escalate_to``)."""
    why = block_reason(reason, "needs_input")

    def _w(tx: Tx) -> Row:
        person = to or board_settings(tx, board).get("escalate_to")
        task = get_task(tx, board, task_id, lock=True)
        now = time.time()
        if task["status"] != states.BLOCKED:
            task = block_in(tx, board, task_id, why, "needs_input", None, actor)
        tx.execute("UPDATE tasks SET block_kind = 'needs_input', block_reason = :r, block_to = :to, updated_at = :now "
                   "WHERE id = :id", {"r": why, "to": person, "now": now, "id": task_id})
        tx.event(board, task_id, "escalated", {"to": person, "reason": why[:2000]}, actor=actor, at=now)
        return task_out(dict(task, status=states.BLOCKED, block_kind="needs_input", block_reason=why, block_to=person))
    return db.write(_w)


def goal_verdict(db: Database, board: str, goal_id: str, *, passed: bool, evidence: str,
                 actor: str | None = None, propose: bool = True) -> Row:
    """Close a verifying goal: done with its evidence, or back to active with a proposal for the
    missing work (``propose``) in triage."""
    evidence = (evidence or "").strip()
    if not evidence:
        raise InvalidInput("a verdict needs evidence: say what was checked and what it showed")
    model.body(evidence, model.COMMENT_MAX, "evidence")

    def _w(tx: Tx) -> Row:
        g = tx.one("SELECT * FROM goals WHERE id = :g AND board = :b", {"g": goal_id, "b": board})
        if g is None:
            raise NotFound(f"no goal {goal_id} on board {board!r}")
        if g["status"] != "verifying":
            raise Conflict(f"goal {goal_id} is {g['status']}; only a verifying goal takes a verdict")
        now = time.time()
        proposal = None
        if passed:
            tx.execute("UPDATE goals SET status = 'done', completed_at = :now, evidence = :e WHERE id = :g",
                       {"now": now, "e": evidence, "g": goal_id})
            tx.event(board, None, "goal_completed", {"goal_id": goal_id, "evidence": evidence[:2000]}, actor=actor, at=now)
        else:
            tx.execute("UPDATE goals SET status = 'active', evidence = :e WHERE id = :g",
                       {"e": evidence, "g": goal_id})
            if propose:
                body = (f"Goal {goal_id} ({g['title']}) had all its tasks done, but its acceptance check "
                        f"failed:\n\n{evidence}\n\nPropose and release the missing work.")
                proposal = create_in(tx, NewTask(
                    board=board, title=f"Missing for goal: {g['title']}"[: model.TITLE_MAX], body=body[: model.BODY_MAX],
                    goal=goal_id, triage=True, actor=REPLAN_ACTOR, check_board=False))["id"]
                enqueue(tx, board, "replan_proposed", goal_id, actor=actor, detail={"proposal": proposal})
            tx.event(board, None, "goal_verify_failed", {"goal_id": goal_id, "evidence": evidence[:2000],
                                                         "proposal": proposal}, actor=actor, at=now)
        row = tx.one("SELECT * FROM goals WHERE id = :g", {"g": goal_id})
        out = dict(row or {})
        out["proposal"] = proposal
        return out
    return db.write(_w)


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
    from . import budgets

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


def wakes(db: Database, board: str, *, status: str | None = None, limit: int = 200) -> list[Row]:
    if status is not None and status not in WAKE_STATUSES:
        raise InvalidInput(f"unknown wake status {status!r}: use one of {', '.join(WAKE_STATUSES)}")

    def _r(tx: Tx) -> list[Row]:
        sql = "SELECT * FROM supervisor_wakes WHERE board = :b"
        params: dict[str, Any] = {"b": board, "n": int(limit)}
        if status:
            sql += " AND status = :s"
            params["s"] = status
        return [wake_out(r) for r in tx.all(sql + " ORDER BY id DESC LIMIT :n", params)]
    return db.read(_r)


def status(db: Database, board: str) -> Row:
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
    return db.read(_r)


#: the events a supervisor's log shows besides the supervisor's own actions
LOG_KINDS = ("supervisor_woken", "wake_handled", "wake_moot", "wake_expired", "escalated", "replan_proposed",
             "block_loop_detected", "goal_verifying", "goal_verify_failed", "supervisor_enabled", "supervisor_disabled")


def log(db: Database, board: str, *, limit: int = 200) -> list[Row]:
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
    return db.read(_r)


def panel(db: Database, board: str) -> Row:
    """The dashboard's supervisor panel: status, wakes, proposals awaiting release, escalations."""
    def _r(tx: Tx) -> Row:
        proposals = tx.all(
            "SELECT id, title, goal_id, created_by, created_at FROM tasks WHERE board = :b AND status = 'triage' "
            "AND (created_by = :r OR created_by LIKE :p) ORDER BY created_at DESC LIMIT 200",
            {"b": board, "r": REPLAN_ACTOR, "p": ACTOR_PREFIX + "%"})
        escalations = tx.all(
            "SELECT id, title, block_reason, block_to, updated_at FROM tasks WHERE board = :b AND status = 'blocked' "
            "AND block_kind = 'needs_input' ORDER BY updated_at DESC LIMIT 200", {"b": board})
        verifying = tx.all("SELECT id, title FROM goals WHERE board = :b AND status = 'verifying'", {"b": board})
        return {"proposals": proposals, "escalations": escalations, "verifying": verifying}
    out = db.read(_r)
    out["status"] = status(db, board)
    out["wakes"] = wakes(db, board, limit=100)
    return out


def overview(db: Database, board: str) -> Row:
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
    return db.read(_r)


__all__ = [
    "ACTOR_PREFIX", "REASONS", "REPLAN_ACTOR", "SUPERVISION", "WAKE_STATUSES", "discard_proposal", "due_work", "enqueue",
    "escalate", "failure_history", "goal_verdict", "handle", "is_supervisor_actor", "log",
    "moot_reason", "on_blocked", "on_budget_blocked", "on_failed", "on_gave_up", "on_goal_verifying", "on_sent_back", "on_telemetry", "overview", "panel",
    "propose_replan", "reconcile", "release_proposal", "set_supervisor", "status", "supervisor_actor",
    "supervisor_of", "sweep_candidates", "sweep_enqueue", "take_due", "wakes",
]
