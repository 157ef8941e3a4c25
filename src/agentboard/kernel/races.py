"""Races: several attempts at one task, each on its own branch from the same base, one picked.

A race is a task with ``race_until`` set (``all`` or ``first-pass``) and one ``attempts`` row
per entry of its ``--race`` list (a profile, and a model that overrides the profile's). Each
attempt runs as a task of its own (``purpose = 'attempt'``, ``race_of`` the race), so the
dispatcher starts, watches, verifies and retries it like any task: its own worktree on its own
branch (``<race branch>-a<n>``), its own failure budget, each counted in the caps and budgets.
The race's own task is never started by the dispatcher.

The verbs, one transaction each, an event per change:

- creating a race is creating its task with ``race`` (``tasks.create_in`` →
  ``attempts.open_race_in``: ``race_created``); refused when a budget cannot afford every
  attempt, naming the limit.
- :func:`settle` — what a dispatcher pass does for a board's races: a ready race starts all its
  attempts at once (``race_started``; or is blocked naming the budget that cannot afford them),
  the attempts' rows follow their tasks and runs (``attempt_started``, ``attempt_finished``), a
  race that was blocked or archived stops its attempts (``attempt_stopped``), an ``all`` race
  whose attempts all finished goes to review with a comparison (``race_finished``), a race
  whose attempts all failed is blocked with each failure (``race_failed``), and a
  ``first-pass`` race with a passing attempt is returned for the dispatcher to pick it. An
  attempt passes only done, by a report that validated and was verified (``attempts.passes``).
  A race that settles puts away (archives) its attempts' tasks that did not pass; one back in
  ready after it started (unblocked, restored, or sent back from review with feedback that its
  attempts' workers then read) runs its attempts again (``race_started`` with ``again``).
- :func:`pick` — the winner (``race_won``): its branch becomes the race's branch, the attempts
  still running are stopped, and the race is approved (done) or handed to review.
  ``dispatch.finish.pick`` integrates the branch first, as for any task.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..domain import model, states
from ..domain.errors import Conflict, InvalidInput, NotFound
from ..domain.races import Entry
from ..store.engine import Database, Row, Tx, in_list
from . import budgets
from .attempts import checked_race as _checked
from .attempts import gate
from .attempts import observed as _observed
from .attempts import passes as _passes
from .common import get_task, task_out
from .runs import Verdict, request_review_in, review_in
from .tasks.creation import NewTask
from .tasks.creation import create_in as create_task_in
from .tasks.moves import _archive, _block, _close_open_run, _reopen, _restore, unblock_in

#: ``tasks.purpose`` of an attempt's own task
ATTEMPT = "attempt"
#: attempt states: not started yet, under way (retries included), ended by itself, stopped by
#: the race (another won, or it was blocked), or cancelled with the race
STATES: tuple[str, ...] = ("pending", "running", "finished", "stopped", "cancelled")
ACTIVE: tuple[str, ...] = ("pending", "running")


# -- reading ---------------------------------------------------------------------------------------


def _attempts(tx: Tx, task_id: str) -> list[Row]:
    return tx.all("SELECT * FROM attempts WHERE task_id = :t ORDER BY n", {"t": task_id})


def _race(tx: Tx, board: str, task_id: str, *, lock: bool = False) -> Row:
    task = get_task(tx, board, task_id, lock=lock)
    if not task.get("race_until"):
        raise InvalidInput(f"task {task_id} is not a race (create one with `agentboard create TITLE --race P1,P2`)")
    return task


def attempts(db: Database, board: str, task_id: str) -> Row:
    """A race: its task and its attempts, each with its own task's workspace and status (a task
    that is no race has none)."""
    def _r(tx: Tx) -> Row:
        task = task_out(get_task(tx, board, task_id))
        rows = _attempts(tx, task_id)
        ids = [r["attempt_task_id"] for r in rows if r["attempt_task_id"]]
        params: dict[str, Any] = {}
        own = {r["id"]: r for r in tx.all(
            "SELECT id, status, workspace_kind, workspace_path, branch_name, base_branch, block_kind, block_reason, result "
            "FROM tasks WHERE id IN " + in_list("i", ids, params), params)} if ids else {}
        # what the runs spent, read now: a stopped attempt's usage may arrive after it stopped
        spent: dict[str, Row] = {}
        if ids:
            params = {}
            spent = {r["task_id"]: r for r in tx.all(
                "SELECT task_id, COUNT(*) AS runs, COALESCE(SUM(input_tokens), 0) AS input_tokens, "
                "COALESCE(SUM(output_tokens), 0) AS output_tokens, COALESCE(SUM(cost_usd), 0) AS cost_usd, "
                "COUNT(cost_usd) AS costed FROM task_runs WHERE task_id IN " + in_list("i", ids, params) + " GROUP BY task_id", params)}
        for r in rows:
            r["picked"] = bool(r["picked"])
            t = own.get(r["attempt_task_id"] or "")
            r["task"] = t
            used = spent.get(r["attempt_task_id"] or "")
            if used is not None:
                r.update(runs=int(used["runs"]), input_tokens=int(used["input_tokens"]),
                         output_tokens=int(used["output_tokens"]), cost_usd=round(float(used["cost_usd"]), 6))
            # a run's agent that reports no cost (Gemini CLI) leaves it unknown, not $0
            r["cost_known"] = used is None or int(used["costed"]) > 0
        task["attempts"] = rows
        task["can_pick"] = [r["n"] for r in rows if _pick_refusal(task, rows, int(r["n"])) is None]
        return task
    return db.read(_r)


def is_unpicked_race(db: Database, board: str, task_id: str) -> bool:
    """True when the task is a race none of whose attempts is picked yet."""
    def _r(tx: Tx) -> bool:
        row = tx.one("SELECT race_until FROM tasks WHERE id = :t AND board = :b", {"t": task_id, "b": board})
        if row is None or not row["race_until"]:
            return False
        return not tx.scalar("SELECT COUNT(*) FROM attempts WHERE task_id = :t AND picked = 1", {"t": task_id})
    return db.read(_r)


def finished_losers(db: Database, board: str) -> list[Row]:
    """The attempts of ``board``'s finished races (done or archived) that were not picked and
    were started (an attempt task was made): what ``gc`` may remove. Each row: ``race``, ``n``,
    ``branch``, ``state`` (the attempt's), ``attempt_task_id``, its task's ``status``,
    ``workspace_kind``, ``workspace_path``, ``branch_name`` and ``board``, ``open_runs`` (its
    runs not closed yet), the board's ``default_workdir``, and ``users``: the tasks not finished
    (other than the attempt) whose branch or base is that branch."""
    def _r(tx: Tx) -> list[Row]:
        rows = tx.all(
            "SELECT a.task_id AS race, a.n, a.branch, a.state, a.attempt_task_id, t.status, t.workspace_kind, "
            "t.workspace_path, t.branch_name, t.board, b.default_workdir, "
            "(SELECT COUNT(*) FROM task_runs o WHERE o.task_id = t.id AND o.status = 'open') AS open_runs "
            "FROM attempts a JOIN tasks r ON r.id = a.task_id JOIN tasks t ON t.id = a.attempt_task_id "
            "JOIN boards b ON b.slug = r.board "
            "WHERE a.board = :b AND a.picked = 0 AND r.status IN ('done', 'archived') ORDER BY a.task_id, a.n",
            {"b": board})
        for row in rows:
            branch = row["branch_name"] or row["branch"]
            row["users"] = [u["id"] for u in tx.all(
                "SELECT id FROM tasks WHERE board = :b AND id != :a AND status NOT IN ('done', 'archived') "
                "AND (branch_name = :br OR base_branch = :br) ORDER BY id",
                {"b": board, "a": row["attempt_task_id"], "br": branch})]
        return rows
    return db.read(_r)


def _pick_refusal(task: Row, rows: Sequence[Row], n: int) -> str | None:
    tid = task["id"]
    att = next((r for r in rows if int(r["n"]) == n), None)
    if att is None:
        return f"race {tid} has no attempt {n} (it has {len(rows)})"
    if task["status"] not in (states.RUNNING, states.REVIEW):
        return f"race {tid} is {task['status']}; an attempt is picked while the race runs or is in review"
    if not _passes(att):
        how = att["outcome"] or att["state"]
        return f"attempt {n} of race {tid} has not passed ({how}); only an attempt that finished and passed " \
               "its verification can be picked"
    return None


# -- settling ----------------------------------------------------------------------------------------


_TRACKED = ("state", "outcome", "error", "verification", "started_at", "finished_at", "input_tokens",
            "output_tokens", "cost_usd", "summary", "run_id", "runs")


def _refresh(tx: Tx, board: str, race: Row, att: Row, actor: str, checked: bool | None = None) -> Row:
    """Bring one attempt's row up to date with its task and runs (an event when its state
    changes); returns the row as it now is. ``checked``: :func:`_checked` of the race."""
    aid = att.get("attempt_task_id")
    if not aid:
        return att
    task = tx.one("SELECT id, status, block_kind, block_reason, last_failure_error, result, completed_at "
                  "FROM tasks WHERE id = :t", {"t": aid})
    if task is None:
        return att
    tx.execute("UPDATE task_runs SET race_attempt = :n WHERE task_id = :t AND race_attempt IS NULL",
               {"n": att["n"], "t": aid})
    runs = tx.all("SELECT id, outcome, started_at, ended_at, input_tokens, output_tokens, cost_usd, summary, "
                  "metadata, exit_code, worker_pid FROM task_runs WHERE task_id = :t ORDER BY id", {"t": aid})
    seen = _observed(task, runs, _checked(tx, race) if checked is None else checked)
    known = {"cost_known": seen.pop("cost_known")}  # not stored: read from its runs each time
    if att["state"] in ("stopped", "cancelled"):
        seen.update(state=att["state"], outcome=att["outcome"] or "stopped")
    elif att["state"] == "finished" and task["status"] == states.ARCHIVED:
        # put away when its race settled (:func:`_shelve`): it keeps how it finished
        seen.update(state="finished", outcome=att["outcome"], error=att.get("error"))
    if all(_same(att.get(k), seen[k]) for k in _TRACKED):
        return {**att, **known}
    sets = ", ".join(f"{k} = :{k}" for k in _TRACKED)
    tx.execute(f"UPDATE attempts SET {sets} WHERE task_id = :t AND n = :n", {**seen, "t": race["id"], "n": att["n"]})
    n = int(att["n"])
    if seen["state"] != att["state"]:
        payload = {"n": n, "profile": att["profile"], "model": att["model"], "task": aid}
        if seen["state"] == "running" and att["state"] == "pending":
            tx.event(board, race["id"], "attempt_started", payload, actor=actor)
        elif seen["state"] == "finished":
            tx.event(board, race["id"], "attempt_finished",
                     {**payload, "outcome": seen["outcome"], "verification": seen["verification"],
                      "cost_usd": seen["cost_usd"], **({"error": seen["error"]} if seen["error"] else {})},
                     actor=actor)
    return {**att, **seen, **known}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) < 1e-9
    return bool(a == b)


def _stop(tx: Tx, board: str, race: Row, att: Row, state: str, why: str, actor: str) -> None:
    """Stop an attempt still under way: its run is closed ``stopped`` (stopped by its race, no
    failure of its agent: insights count it as neither a first attempt nor a failure) and its
    task archived (its worker is then stopped by the dispatcher, and what its run spent stays
    recorded)."""
    aid = att.get("attempt_task_id")
    if aid:
        cur = tx.one("SELECT * FROM tasks WHERE id = :t", {"t": aid})
        if cur is not None and cur["status"] not in (states.ARCHIVED, states.DONE):
            if cur["status"] == states.RUNNING:
                _close_open_run(tx, cur, "stopped", time.time(), error=f"stopped by race {race['id']}: {why}")
            _archive(tx, board, aid, actor, reason=f"stopped by race {race['id']}: {why}")
        att = _refresh(tx, board, race, att, actor)
    tx.execute("UPDATE attempts SET state = :s, outcome = COALESCE(outcome, 'stopped'), "
               "finished_at = COALESCE(finished_at, :now) WHERE task_id = :t AND n = :n",
               {"s": state, "now": time.time(), "t": race["id"], "n": att["n"]})
    tx.event(board, race["id"], "attempt_stopped", {"n": int(att["n"]), "profile": att["profile"], "why": why,
                                                    "cost_usd": att.get("cost_usd") or 0}, actor=actor)


def _shelve(tx: Tx, board: str, race: Row, rows: Sequence[Row], why: str, actor: str,
            keep: int | None = None) -> None:
    """The race settled (it went to review, was given up on, blocked, archived or picked): the
    tasks of its finished attempts that did not pass (blocked, or in review) are archived, so
    nothing of it stays open — no attempt left in review or blocked, none holding its goal
    open. Their rows keep how they finished; running the race again restores them
    (:func:`_restart`). ``keep``: the picked attempt."""
    for r in rows:
        aid = r.get("attempt_task_id")
        if not aid or r["state"] in ACTIVE or (keep is not None and int(r["n"]) == keep):
            continue
        cur = tx.one("SELECT status FROM tasks WHERE id = :t", {"t": aid})
        if cur is not None and cur["status"] not in (states.ARCHIVED, states.DONE):
            _archive(tx, board, aid, actor, reason=f"race {race['id']} {why}")


def _start(tx: Tx, board: str, race: Row, rows: list[Row], actor: str) -> None:
    """Start every attempt of a ready race at once, or block the race naming the budget that
    cannot afford them all."""
    entries = [Entry(r["profile"], r["model"]) for r in rows]
    why = gate(tx, race, entries)
    if why:
        _block(tx, board, race["id"], f"the race's attempts were not started: {why}; raise the limit, then "
               f"unblock it", "needs_input", None, actor)
        tx.event(board, race["id"], "race_refused", {"reason": why}, actor=actor)
        return
    verify = race.get("verify")
    skills = race.get("skills")
    started = []
    for r in rows:
        new = NewTask(
            board=board, title=f"{race['title'][:400]} (attempt {r['n']}: {r['profile']})",
            body=race.get("body") or "", assignee=r["profile"], tenant=race.get("tenant"),
            priority=int(race.get("priority") or 0), workspace_kind=race.get("workspace_kind") or "scratch",
            workspace_path=race.get("workspace_path"), branch=r["branch"],
            max_runtime=race.get("max_runtime_seconds"), max_retries=race.get("max_retries"),
            skills=tuple(json.loads(skills) if isinstance(skills, str) else skills or ()),
            verify=tuple(json.loads(verify) if isinstance(verify, str) else verify or ()),
            actor=actor, check_board=False, model=r["model"] or race.get("model"), subscribe_default=False,
            goal=race.get("goal_id"),  # its runs count against the race's goal (and budget)
        )
        t = create_task_in(tx, new)
        tx.execute("UPDATE tasks SET purpose = :p, race_of = :r, status = 'ready' WHERE id = :id",
                   {"p": ATTEMPT, "r": race["id"], "id": t["id"]})
        # a race archived before it started, then restored, starts afresh
        tx.execute("UPDATE attempts SET attempt_task_id = :a, state = 'pending', outcome = NULL, error = NULL, "
                   "finished_at = NULL, picked = 0 WHERE task_id = :t AND n = :n",
                   {"a": t["id"], "t": race["id"], "n": r["n"]})
        started.append({"n": r["n"], "task": t["id"], "profile": r["profile"], "branch": r["branch"]})
    now = time.time()
    states.check("claim", race["status"], states.RUNNING, race["id"])
    tx.execute("UPDATE tasks SET status = 'running', started_at = COALESCE(started_at, :now), updated_at = :now "
               "WHERE id = :id", {"now": now, "id": race["id"]})
    tx.event(board, race["id"], "race_started", {"attempts": started}, actor=actor, at=now)


def _feedback(tx: Tx, race_id: str) -> Row | None:
    """The changes a person (or reviewer) requested on the race since it last started: the
    latest ``changes_requested`` event after its latest ``race_started`` (None: it was unblocked
    or restored, not sent back)."""
    since = tx.scalar("SELECT MAX(id) FROM task_events WHERE task_id = :t AND kind = 'race_started'",
                      {"t": race_id}) or 0
    row = tx.one("SELECT payload, actor, run_id FROM task_events WHERE task_id = :t AND kind = 'changes_requested' "
                 "AND id > :s ORDER BY id DESC LIMIT 1", {"t": race_id, "s": since})
    if row is None:
        return None
    payload = row.get("payload")
    try:
        data = json.loads(payload) if isinstance(payload, str) else dict(payload or {})
    except ValueError:
        data = {}
    text = str(data.get("feedback") or "").strip()
    return {"reviewer": data.get("reviewer") or row.get("actor") or "person", "feedback": text,
            "score": data.get("score")} if text else None


def _rerun(tx: Tx, board: str, race: Row, att: Row, feedback: Row | None, actor: str) -> bool:
    """Run one attempt again, from its own branch with its failure count reset: its task back to
    ready, whatever it was left in (archived when stopped or put away, blocked when it failed,
    in review, done when it passed). With ``feedback``, the feedback reaches its worker as any
    task's rework notes do: a ``changes_requested`` event (and comment) on its own task, which
    its ``.board/history.md`` is rebuilt from. False when its task is gone."""
    aid = att["attempt_task_id"]
    own = tx.one("SELECT status FROM tasks WHERE id = :t", {"t": aid})
    if own is None:
        return False
    status = own["status"]
    note = feedback["feedback"] if feedback else ""
    if status == states.ARCHIVED:
        _restore(tx, board, aid, actor)
    elif status == states.BLOCKED:
        unblock_in(tx, board, aid, actor=actor)
    elif status == states.DONE:
        _reopen(tx, board, aid, f"race {race['id']} runs again", actor)
    elif status == states.REVIEW:
        text = note or (f"race {race['id']} runs this attempt again: its result was not accepted (an attempt "
                        "passes only by finishing, verified)")
        review_in(tx, board, aid, Verdict.build("changes_requested", text, reviewer=feedback["reviewer"]
                                                if feedback else actor, actor=actor), actor=actor)
        note = ""  # the verdict recorded it
    now = time.time()
    tx.execute("UPDATE tasks SET consecutive_failures = 0, protocol_violations = 0, block_kind = NULL, "
               "block_reason = NULL, updated_at = :now WHERE id = :id AND status IN ('ready', 'todo')",
               {"now": now, "id": aid})
    if note and feedback is not None:
        tx.execute("INSERT INTO task_comments (task_id, board, author, body, kind, created_at) "
                   "VALUES (:t, :b, :a, :body, 'review', :now)",
                   {"t": aid, "b": board, "a": feedback["reviewer"], "body": f"Changes requested: {note}", "now": now})
        tx.event(board, aid, "changes_requested", {"reviewer": feedback["reviewer"], "feedback": note[:2000],
                                                   "score": feedback.get("score"), "race": race["id"]},
                 run_id=att.get("run_id"), actor=actor, at=now)
    tx.execute("UPDATE attempts SET state = :s, outcome = NULL, error = NULL, finished_at = NULL "
               "WHERE task_id = :t AND n = :n",
               {"s": "running" if att.get("runs") else "pending", "t": race["id"], "n": att["n"]})
    return True


def _restart(tx: Tx, board: str, race: Row, rows: list[Row], actor: str) -> None:
    """A race back in ready after its attempts started — a person unblocked or restored it, or
    sent it back from review — runs again, without a pick. Unblocked or restored, it resumes:
    every attempt that has not passed (stopped, cancelled, failed) runs again, and those that
    passed keep their result. Sent back with changes requested, every attempt runs again with
    the feedback (:func:`_rerun`)."""
    feedback = _feedback(tx, race["id"])
    again = []
    for r in rows:
        if not r.get("attempt_task_id") or (feedback is None and _passes(r)):
            continue
        if _rerun(tx, board, race, r, feedback, actor):
            again.append(int(r["n"]))
    now = time.time()
    tx.execute("UPDATE attempts SET picked = 0 WHERE task_id = :t AND picked = 1", {"t": race["id"]})
    states.check("claim", race["status"], states.RUNNING, race["id"])
    tx.execute("UPDATE tasks SET status = 'running', updated_at = :now WHERE id = :id", {"now": now, "id": race["id"]})
    tx.event(board, race["id"], "race_started",
             {"again": again, **({"feedback": feedback["feedback"][:2000]} if feedback else {})}, actor=actor, at=now)


def _failures(rows: Sequence[Row]) -> str:
    return "; ".join(f"attempt {r['n']} ({r['profile']}): {r.get('outcome') or r['state']}"
                     + (f" — {model.reason_line(str(r['error']))}" if r.get("error") else "")
                     for r in rows)


def comparison(rows: Sequence[Row]) -> str:
    """The attempts side by side, one line each (the race's review comment): written once every
    attempt's workers have exited (``attempts.observed``), so with what they spent; a cost no run
    of the attempt reported (``cost_known`` false) is said to be unknown, not $0."""
    lines = []
    for r in rows:
        tokens = int(r.get("input_tokens") or 0) + int(r.get("output_tokens") or 0)
        summary = model.reason_line(str(r.get("summary") or r.get("error") or ""))
        verified = f", verification {r['verification']}" if r.get("verification") else ""
        cost = f"${float(r.get('cost_usd') or 0):.4f}" if r.get("cost_known", True) else "cost unknown"
        lines.append(f"- **#{r['n']} {r['profile']}{':' + str(r['model']) if r.get('model') else ''}**: "
                     f"{r.get('outcome') or r['state']}{verified}; {tokens} tokens, {cost}"
                     + (f" — {summary}" if summary else ""))
    return "\n".join(lines)


def _decide(tx: Tx, board: str, race: Row, rows: list[Row], actor: str) -> int | None:
    """What a running race does now that its attempts are up to date: the attempt to pick (a
    ``first-pass`` race), or None."""
    passed = sorted((r for r in rows if _passes(r)), key=lambda r: float(r.get("finished_at") or 0))
    if race["race_until"] == "first-pass" and passed:
        return int(passed[0]["n"])
    if any(r["state"] in ACTIVE for r in rows):
        return None
    now = time.time()
    if not passed:
        detail = _failures(rows)
        _shelve(tx, board, race, rows, "was given up on: every attempt failed", actor)
        _block(tx, board, race["id"], f"every attempt failed: {detail}", "gave_up", None, actor)
        tx.event(board, race["id"], "race_failed", {"attempts": [
            {"n": r["n"], "profile": r["profile"], "outcome": r.get("outcome"), "error": r.get("error")}
            for r in rows]}, actor=actor, at=now)
        return None
    table = comparison(rows)
    _shelve(tx, board, race, rows, "went to review: this attempt did not pass", actor)
    tx.execute("INSERT INTO task_comments (task_id, board, author, body, kind, created_at) "
               "VALUES (:t, :b, :a, :body, 'comment', :now)",
               {"t": race["id"], "b": board, "a": actor,
                "body": f"Race finished: {len(passed)} of {len(rows)} attempts passed. Pick one with "
                        f"`agentboard pick {race['id']} N`.\n\n{table}", "now": now})
    request_review_in(tx, board, race["id"], summary=f"race finished: {len(passed)} of {len(rows)} attempts passed",
                      actor=actor)
    tx.event(board, race["id"], "race_finished", {"passed": [int(r["n"]) for r in passed], "of": len(rows)},
             actor=actor, at=now)
    return None


def _settle_race(tx: Tx, board: str, task_id: str, actor: str) -> int | None:
    race = get_task(tx, board, task_id, lock=True)
    rows = _attempts(tx, task_id)
    if not race.get("race_until") or not rows:
        return None
    if race["status"] == states.READY and not any(r["attempt_task_id"] for r in rows):
        _start(tx, board, race, rows, actor)
        return None
    if not any(r["attempt_task_id"] for r in rows):  # not started: waiting for its parents, or blocked
        if race["status"] == states.ARCHIVED:
            for r in rows:
                _stop(tx, board, race, r, "cancelled", "the race was archived", actor)
        return None
    checked = _checked(tx, race)
    rows = [_refresh(tx, board, race, r, actor, checked) for r in rows]
    if race["status"] == states.READY:  # unblocked, restored or sent back after it started: it runs again
        _restart(tx, board, race, rows, actor)
        race = get_task(tx, board, task_id, lock=True)
        rows = [_refresh(tx, board, race, r, actor, checked) for r in _attempts(tx, task_id)]
    if race["status"] not in (states.RUNNING, states.READY):
        state = "cancelled" if race["status"] == states.ARCHIVED else "stopped"
        for r in rows:
            if r["state"] in ACTIVE:
                _stop(tx, board, race, r, state, f"the race is {race['status']}", actor)
        _shelve(tx, board, race, rows, f"is {race['status']}", actor)
        return None
    # its task budget covers its attempts' runs: spent, the running ones are told to stop
    budgets.check_race_in(tx, board, task_id)
    return _decide(tx, board, race, rows, actor)


def _under_way(b1: str, b2: str) -> str:
    """The races under way on the boards ``b1`` / ``b2`` (conditions on a board's slug): a ready
    race's task found through ``ix_tasks_ready_race``, its board checked after, so no planner
    reads a board's ready tasks to find its few races."""
    return ("SELECT DISTINCT board, task_id AS id FROM attempts WHERE board " + b1 + " AND state IN "
            "('pending', 'running') UNION SELECT t.board, t.id FROM tasks t WHERE t.status = 'ready' "
            "AND t.race_until IS NOT NULL AND EXISTS (SELECT 1 FROM boards b WHERE b.slug = t.board AND b.slug "
            + b2 + ")")


#: the races under way on every board not archived (a pass's snapshot reads it)
UNDER_WAY_SQL = _under_way("IN (SELECT slug FROM boards WHERE archived = 0)",
                           "IN (SELECT slug FROM boards WHERE archived = 0)")


def under_way_later(tx: Tx, boards: Sequence[str] | None = None) -> Callable[[], dict[str, list[str]]]:
    """The races under way on ``boards`` (None: every board not archived): attempts pending or
    running, or a ready race; their task ids by board. Sent now, read when the answer is called
    (a pass reads it in its snapshot, ``kernel.dispatching.pass_snapshot``)."""
    if boards is not None and not boards:
        return dict
    p: dict[str, Any] = {}
    if boards is None:
        sent = tx.later(UNDER_WAY_SQL)
    else:
        sent = tx.later(_under_way("IN " + in_list("b", list(boards), p), "IN " + in_list("c", list(boards), p)), p)

    def answer() -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in sent():
            out.setdefault(r["board"], []).append(r["id"])
        return out
    return answer


def settle(db: Database, board: str, *, actor: str = "dispatcher",
           ids: Sequence[str] | None = None) -> list[tuple[str, int]]:
    """Settle the board's races under way (see the module docstring), one transaction per race.
    Returns the ``(race, attempt)`` pairs whose winner the dispatcher picks now. ``ids``: the
    races under way, read already (:func:`under_way_later`)."""
    if ids is None:
        ids = db.read(lambda tx: under_way_later(tx, [board])().get(board, []))
    out = []
    for tid in ids:
        n = db.write(_settle_race, board, tid, actor)
        if n is not None:
            out.append((tid, n))
    return out


def settle_one(db: Database, board: str, task_id: str, *, actor: str = "dispatcher") -> int | None:
    """Settle one race now (see :func:`settle`)."""
    return db.write(_settle_race, board, task_id, actor)


# -- picking -----------------------------------------------------------------------------------------


def check_pick(db: Database, board: str, task_id: str, n: int) -> Row:
    """The race and attempt ``n`` if it may be picked now; raises ``Conflict``/``NotFound``."""
    race = attempts(db, board, task_id)
    if not race.get("race_until"):
        raise InvalidInput(f"task {task_id} is not a race (create one with `agentboard create TITLE --race P1,P2`)")
    rows = race["attempts"]
    why = _pick_refusal(race, rows, int(n))
    if why:
        if not any(int(r["n"]) == int(n) for r in rows):
            raise NotFound(why)
        raise Conflict(why)
    race["attempt"] = next(r for r in rows if int(r["n"]) == int(n))
    return race


def _pick(tx: Tx, board: str, task_id: str, n: int, integrated: bool, to_review: bool, actor: str | None) -> Row:
    race = _race(tx, board, task_id, lock=True)
    checked = _checked(tx, race)
    rows = [_refresh(tx, board, race, r, actor or "dispatcher", checked) for r in _attempts(tx, task_id)]
    why = _pick_refusal(race, rows, n)
    if why:
        raise Conflict(why)
    att = next(r for r in rows if int(r["n"]) == n)
    own = tx.one("SELECT workspace_kind, workspace_path, base_branch, branch_name FROM tasks WHERE id = :t",
                 {"t": att["attempt_task_id"]}) or {}
    tx.execute("UPDATE attempts SET picked = CASE WHEN n = :n THEN 1 ELSE 0 END WHERE task_id = :t",
               {"n": n, "t": task_id})
    tx.execute("UPDATE tasks SET branch_name = :br, workspace_kind = :k, workspace_path = :p, base_branch = :base, "
               "result = COALESCE(:res, result), updated_at = :now WHERE id = :id",
               {"br": own.get("branch_name") or att["branch"], "k": own.get("workspace_kind") or race["workspace_kind"],
                "p": own.get("workspace_path") or race.get("workspace_path"), "base": own.get("base_branch"),
                "res": att.get("summary"), "now": time.time(), "id": task_id})
    for r in rows:
        if int(r["n"]) != n and r["state"] in ACTIVE:
            _stop(tx, board, race, r, "stopped", f"attempt {n} won", actor or "dispatcher")
    _shelve(tx, board, race, rows, f"picked attempt {n}", actor or "dispatcher", keep=n)
    tx.event(board, task_id, "race_won", {"n": n, "profile": att["profile"], "model": att["model"],
                                          "branch": own.get("branch_name") or att["branch"],
                                          "cost_usd": att.get("cost_usd")}, actor=actor)
    text = f"picked attempt {n} ({att['profile']}): {att.get('summary') or ''}".strip()
    if race["status"] == states.RUNNING:
        request_review_in(tx, board, task_id, summary=text, actor=actor)
        if to_review:
            return {**task_out(get_task(tx, board, task_id)), "picked": n}
    review_in(tx, board, task_id, Verdict.build("approved", text, actor=actor), actor=actor, integrated=integrated)
    # the race as it now is (done, with its completion time)
    return {**task_out(get_task(tx, board, task_id)), "picked": n}


def pick(db: Database, board: str, task_id: str, n: int, *, integrated: bool = False, to_review: bool = False,
         actor: str | None = None) -> Row:
    """Pick attempt ``n`` of a race (see the module docstring). ``integrated``: its branch is on
    the base branch already (``dispatch.finish.pick``); ``to_review``: the race goes to review
    with its pick instead of done (it requires review)."""
    return db.write(_pick, board, task_id, int(n), integrated, to_review, actor)


def refuse(db: Database, board: str, task_id: str, reason: str, *, actor: str = "dispatcher") -> Row:
    """The dispatcher could not integrate a first-pass winner: the race is blocked with why."""
    def _w(tx: Tx) -> Row:
        out = _block(tx, board, task_id, reason, "needs_input", None, actor)
        _shelve(tx, board, out, _attempts(tx, task_id), "is blocked: its winner could not be integrated", actor)
        tx.execute("UPDATE tasks SET integration = 'refused' WHERE id = :id", {"id": task_id})
        tx.event(board, task_id, "integration_refused", {"reason": reason}, actor=actor)
        return out
    return db.write(_w)


def entries_of(items: Iterable[Row]) -> list[Entry]:
    return [Entry(str(r["profile"]), r.get("model")) for r in items]


__all__ = ["ATTEMPT", "attempts", "check_pick", "comparison", "finished_losers", "is_unpicked_race", "pick", "refuse",
           "settle", "settle_one", "under_way_later", "UNDER_WAY_SQL"]
