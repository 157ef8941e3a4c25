"""Review verdicts (approve, request changes, reject) and review runs: a reviewer judging a task
in review as a run of the task like any other."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ...domain import model, states
from ...domain.errors import Conflict, InvalidInput, StaleRun
from ...store.engine import Database, Row, Tx, dump_json
from .. import budgets, hooks
from ..branches import integration_due_in
from ..common import (
    board_settings,
    first_line,
    get_task,
    ready_or_todo,
    task_out,
)
from ..flow import after_satisfied
from .claims import claim_ttl
from .completion import usage_params


@dataclass(frozen=True)
class Verdict:
    """A review verdict (``approved``, ``changes_requested`` or ``rejected``) with its text,
    its reviewer, an optional 0-100 score and findings. Build it with :meth:`build`."""

    verdict: str
    text: str
    reviewer: str
    score: int | None = None
    findings: tuple[Any, ...] = ()

    @classmethod
    def build(
        cls, verdict: str, text: str | None = "", *, reviewer: str | None = None,
        score: int | None = None, findings: list[Any] | None = None, actor: str | None = None,
    ) -> Verdict:
        """Check the feedback and score (raises ``InvalidInput``); the reviewer defaults to the actor."""
        text = (text or "").strip()
        if verdict in ("changes_requested", "rejected") and not text:
            raise InvalidInput(f"a {verdict.replace('_', ' ')} verdict needs feedback saying why")
        if score is not None and not 0 <= int(score) <= 100:
            raise InvalidInput("score must be between 0 and 100")
        model.body(text, model.COMMENT_MAX, "feedback")
        return cls(verdict, text, reviewer or actor or "person", score, tuple(findings or ()))


def _review_record(tx: Tx, board: str, task_id: str, v: Verdict, now: float) -> int | None:
    rid = tx.scalar(
        "SELECT id FROM task_runs WHERE task_id = :id AND status = 'closed' "
        "AND (claim_lock IS NULL OR claim_lock NOT LIKE :rv) ORDER BY id DESC LIMIT 1",
        {"id": task_id, "rv": REVIEW_CLAIM + "%"},
    )
    findings = list(v.findings)
    record = {"reviewer": v.reviewer, "verdict": v.verdict, "score": v.score, "summary": v.text, "findings": findings}
    tx.execute(
        "INSERT INTO reviews (task_id, board, run_id, reviewer, verdict, score, summary, findings, created_at) "
        "VALUES (:t, :b, :r, :who, :v, :sc, :s, :f, :now)",
        {"t": task_id, "b": board, "r": rid, "who": v.reviewer, "v": v.verdict, "sc": v.score, "s": v.text,
         "f": dump_json(findings), "now": now},
    )
    if rid is not None:
        tx.execute("UPDATE task_runs SET review = :rv WHERE id = :r", {"rv": dump_json(record), "r": rid})
    return int(rid) if rid is not None else None


def _rework_limit(tx: Tx, board: str) -> int:
    """How many times review may send a task of ``board`` back (the board's ``rework_limit``, else
    the installation's)."""
    value = board_settings(tx, board).get("rework_limit")
    return int(value) if value else int(getattr(tx.db.settings, "rework_limit", 5))


def _give_up_rework(tx: Tx, board: str, task: Row, rounds: int, limit: int, feedback: str, actor: str | None,
                    now: float) -> Row:
    """Block a task review sent back ``rounds`` times (its ``rework_limit``) ``gave_up``."""
    states.check("block", task["status"], states.BLOCKED, task["id"])
    reason = (f"gave up: review sent it back {rounds} times (rework_limit {limit}); last feedback: "
              f"{model.reason_line(feedback) or feedback}"[:280] + "; read the reviews, then unblock it for another round")
    tx.execute("UPDATE tasks SET status = 'blocked', block_kind = 'gave_up', block_reason = :r, updated_at = :now "
               "WHERE id = :id", {"r": reason, "now": now, "id": task["id"]})
    tx.event(board, task["id"], "blocked", {"reason": reason, "kind": "gave_up", "rework": rounds}, actor=actor, at=now)
    task.update(status=states.BLOCKED, block_kind="gave_up", block_reason=reason)
    return hooks.blocked(tx, board, task, "gave_up", reason, actor)


def review_in(tx: Tx, board: str, task_id: str, v: Verdict, *, actor: str | None = None,
              integrated: bool = False) -> Row:
    """Apply a review verdict inside the caller's transaction (see :func:`review`)."""
    verdict, text, reviewer, score = v.verdict, v.text, v.reviewer, v.score
    task = get_task(tx, board, task_id, lock=True)
    now = time.time()
    if verdict == "approved":
        states.check("approve", task["status"], states.DONE, task_id)
        if not integrated and integration_due_in(tx, board, task, approval=True) == "integrate":
            raise Conflict(f"approving task {task_id} integrates its branch into the board's base branch: approve "
                           "it through agentboard (`agentboard review --approve`, the API, the dashboard or "
                           "Board.approve), which integrates it first")
        rid = _review_record(tx, board, task_id, v, now)
        tx.execute(
            "UPDATE tasks SET status = 'done', completed_at = :now, consecutive_failures = 0, "
            "last_outcome = 'approved', updated_at = :now WHERE id = :id",
            {"now": now, "id": task_id},
        )
        tx.event(board, task_id, "approved", {"reviewer": reviewer, "score": score, "summary": first_line(text)}, run_id=rid, actor=actor, at=now)
        hooks.reviewed(tx, board, task_id, verdict)
        hooks.task_done(tx, board, task_id)
        task.update(status=states.DONE)
        after_satisfied(tx, board, task, actor)
    elif verdict == "changes_requested":
        target = ready_or_todo(tx, task_id, task["assignee"], board)
        states.check("request_changes", task["status"], target, task_id)
        rid = _review_record(tx, board, task_id, v, now)
        tx.execute(
            "INSERT INTO task_comments (task_id, board, author, body, kind, created_at) "
            "VALUES (:t, :b, :a, :body, 'review', :now)",
            {"t": task_id, "b": board, "a": reviewer, "body": f"Changes requested: {text}", "now": now},
        )
        tx.execute(
            "UPDATE tasks SET status = :s, rework_count = rework_count + 1, "
            "last_outcome = 'changes_requested', updated_at = :now WHERE id = :id",
            {"s": target, "now": now, "id": task_id},
        )
        tx.event(board, task_id, "changes_requested", {"reviewer": reviewer, "feedback": text[:2000], "score": score}, run_id=rid, actor=actor, at=now)
        hooks.reviewed(tx, board, task_id, verdict)
        task.update(status=target)
        hooks.sent_back(tx, board, task, actor)
        rounds, limit = int(task.get("rework_count") or 0) + 1, _rework_limit(tx, board)
        if rounds >= limit:  # a review loop ends: a person reads the reviews and decides
            task = _give_up_rework(tx, board, task, rounds, limit, text, actor, now)
    elif verdict == "rejected":
        states.check("reject", task["status"], states.BLOCKED, task_id)
        rid = _review_record(tx, board, task_id, v, now)
        tx.execute(
            "UPDATE tasks SET status = 'blocked', block_kind = 'rejected', block_reason = :r, "
            "last_outcome = 'rejected', updated_at = :now WHERE id = :id",
            {"r": model.reason_line(text) or text, "now": now, "id": task_id},
        )
        tx.event(board, task_id, "rejected", {"reviewer": reviewer, "reason": text[:2000], "score": score}, run_id=rid, actor=actor, at=now)
        hooks.reviewed(tx, board, task_id, verdict)
        task.update(status=states.BLOCKED, block_kind="rejected", block_reason=model.reason_line(text) or text)
        task = hooks.blocked(tx, board, task, "rejected", text, actor)
    else:
        raise InvalidInput(f"unknown verdict {verdict!r}: use approved, changes_requested or rejected")
    return task_out(task)


def review(
    db: Database, board: str, task_id: str, verdict: str, text: str = "", *, reviewer: str | None = None,
    score: int | None = None, findings: list[Any] | None = None, actor: str | None = None,
    integrated: bool = False,
) -> Row:
    """Record a review verdict (a person's or the reviewer agent's) and apply it. Approving a
    worktree task on a board that integrates needs ``integrated=True`` (``dispatch.finish``)."""
    v = Verdict.build(verdict, text, reviewer=reviewer, score=score, findings=findings, actor=actor)
    return db.write(review_in, board, task_id, v, actor=actor, integrated=integrated)


def approve(db: Database, board: str, task_id: str, *, text: str = "", actor: str | None = None) -> Row:
    return review(db, board, task_id, "approved", text, actor=actor)


def request_changes(db: Database, board: str, task_id: str, feedback: str, *, actor: str | None = None) -> Row:
    return review(db, board, task_id, "changes_requested", feedback, actor=actor)


def reject(db: Database, board: str, task_id: str, reason: str, *, actor: str | None = None) -> Row:
    return review(db, board, task_id, "rejected", reason, actor=actor)


# -- review runs ----------------------------------------------------------------------------------
#
# A review run is a reviewer (a profile's agent, or one LLM call) judging a task in review. It is a
# run of the task like any other (caps, usage, the runs list), marked by its claim lock
# (``REVIEW_CLAIM``) and its metadata (``{"review_run": true, "reviewer": ..., "reviews_run": N}``);
# the task keeps its status and has no current run meanwhile.

#: prefix of the claim lock of a review run
REVIEW_CLAIM = "review:"


def worker_of_review(db: Database, task_id: str) -> Row | None:
    """The worker run whose work a task in review holds (its last run that is not a review
    run): ``id``, ``worker_pid``, ``worker_host``, ``started_at``, ``ended_at`` and
    ``exit_code`` (None until the dispatcher saw its process exit), or None."""
    def _r(tx: Tx) -> Row | None:
        return tx.one("SELECT id, worker_pid, worker_host, started_at, ended_at, exit_code FROM task_runs "
                      "WHERE task_id = :t AND (claim_lock IS NULL OR claim_lock NOT LIKE :rv) ORDER BY id DESC LIMIT 1",
                      {"t": task_id, "rv": REVIEW_CLAIM + "%"})
    return db.read(_r)


def _open_review_run(tx: Tx, board: str, task_id: str, profile: str | None, reviewer: str, host: str | None,
                     reviews_run: int | None, ttl: int | None) -> int | None:
    task = get_task(tx, board, task_id, lock=True)
    if task["status"] != states.REVIEW:
        return None
    if tx.scalar("SELECT 1 FROM task_runs WHERE task_id = :t AND status = 'open' LIMIT 1", {"t": task_id}):
        return None
    if budgets.gate_in(tx, {**task, "assignee": profile or task["assignee"]}) is not None:
        return None  # the budget cannot afford a review run: the task waits in review
    now = time.time()
    meta = dump_json({"review_run": True, "reviewer": reviewer, "reviews_run": reviews_run})
    rid = tx.scalar(
        "INSERT INTO task_runs (task_id, board, profile, attempt, status, claim_lock, claim_expires, "
        "worker_host, started_at, last_heartbeat_at, metadata, synthetic) "
        "VALUES (:t, :b, :p, (SELECT COALESCE(MAX(attempt), 0) + 1 FROM task_runs WHERE task_id = :t2), "
        "'open', :lock, :exp, :host, :now, :now2, :m, 0) RETURNING id",
        {"t": task_id, "t2": task_id, "b": board, "p": profile, "lock": f"{REVIEW_CLAIM}{host or ''}:{now}",
         "exp": now + claim_ttl(tx, ttl), "host": host, "now": now, "now2": now, "m": meta})
    return int(rid)


def open_review_run(db: Database, board: str, task_id: str, *, reviewer: str, profile: str | None = None,
                    host: str | None = None, reviews_run: int | None = None, ttl: int | None = None) -> int | None:
    """Open a review run on a task in review; its id, or None when the task left review or
    already has an open run (one reviewer at a time)."""
    return db.write(_open_review_run, board, task_id, profile, reviewer, host, reviews_run, ttl)


def _close_review_run_in(tx: Tx, board: str, task_id: str, run_id: int, outcome: str, error: str | None,
                         exit_code: int | None, usage: dict[str, Any] | None) -> bool:
    now = time.time()
    row = tx.one(
        "UPDATE task_runs SET status = 'closed', outcome = :o, ended_at = :now, error = :e, "
        "exit_code = COALESCE(:ec, exit_code), input_tokens = COALESCE(:in_t, input_tokens), "
        "output_tokens = COALESCE(:out_t, output_tokens), cost_usd = COALESCE(:cost, cost_usd) "
        "WHERE id = :r AND task_id = :t AND status = 'open' AND claim_lock LIKE :rv" + budgets.CLOSED_RUN,
        {"o": outcome, "now": now, "e": error, "ec": exit_code, "r": run_id, "t": task_id,
         "rv": REVIEW_CLAIM + "%", **usage_params(usage)})
    closed = row is not None
    budgets.account_run_in(tx, row, actor="dispatcher")
    if closed and error:
        tx.event(board, task_id, outcome, {"review_run": True, "error": error[:2000], "exit_code": exit_code},
                 run_id=run_id, actor="dispatcher", at=now)
    return closed


def extend_review_claim(db: Database, board: str, task_id: str, run_id: int, *, ttl: int | None = None) -> bool:
    """Renew the claim of an open review run whose reviewer is alive, so another host never takes
    it for a dead one. False when the run is closed."""
    def _w(tx: Tx) -> bool:
        now = time.time()
        exp = now + claim_ttl(tx, ttl)
        tx.execute("UPDATE task_runs SET claim_expires = :exp WHERE id = :r AND task_id = :t AND status = 'open' "
                   "AND claim_lock LIKE :rv", {"exp": exp, "r": run_id, "t": task_id, "rv": REVIEW_CLAIM + "%"})
        if tx.rowcount != 1:
            return False
        tx.event(board, task_id, "claim_extended", {"until": exp, "review_run": True}, run_id=run_id,
                 actor="dispatcher", at=now)
        return True
    return db.write(_w)


def close_review_run(db: Database, board: str, task_id: str, run_id: int, outcome: str, *,
                     error: str | None = None, exit_code: int | None = None,
                     usage: dict[str, Any] | None = None, verdict: Verdict | None = None) -> bool:
    """Close an open review run that gave no verdict (``outcome``: ``crashed``,
    ``protocol_violation``, ``spawn_failed``, ``superseded``...; an ``error`` is also an event of
    that kind), or whose ``verdict`` could not be applied as it stands (an approval whose branch
    could not be integrated: kept on the run). False when it was closed already."""
    def _w(tx: Tx) -> bool:
        closed = _close_review_run_in(tx, board, task_id, run_id, outcome, error, exit_code, usage)
        if closed and verdict is not None:
            _keep_verdict(tx, run_id, verdict)
        return closed
    return db.write(_w)


def _keep_verdict(tx: Tx, run_id: int, v: Verdict) -> None:
    tx.execute("UPDATE task_runs SET summary = :s, review = :rv WHERE id = :r",
               {"s": first_line(v.text, 500), "r": run_id, "rv": dump_json(
                   {"reviewer": v.reviewer, "verdict": v.verdict, "score": v.score, "summary": v.text,
                    "findings": list(v.findings)})})


def review_run_verdict(db: Database, board: str, task_id: str, run_id: int, v: Verdict, *,
                       actor: str | None = None, usage: dict[str, Any] | None = None,
                       integrated: bool = False) -> Row:
    """Apply the verdict of review run ``run_id`` and close the run, in one transaction.
    :class:`StaleRun` when the run is closed already; the kernel's refusal when the task left
    review meanwhile (a person decided first). ``integrated``: an approval's branch is on the
    base branch already (``dispatch.finish.review_run``), as for :func:`review`."""
    def _w(tx: Tx) -> Row:
        if not tx.scalar("SELECT 1 FROM task_runs WHERE id = :r AND task_id = :t AND status = 'open' "
                         "AND claim_lock LIKE :rv", {"r": run_id, "t": task_id, "rv": REVIEW_CLAIM + "%"}):
            raise StaleRun(f"review run {run_id} of task {task_id} is closed already")
        out = review_in(tx, board, task_id, v, actor=actor, integrated=integrated)
        _close_review_run_in(tx, board, task_id, run_id, "reviewed", None, None, usage)
        _keep_verdict(tx, run_id, v)
        return out
    return db.write(_w)
