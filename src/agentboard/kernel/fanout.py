"""Specify and decompose: what an LLM proposed for a triage task, written in one transaction.

- :func:`specify` rewrites a triage task's title and body and releases it (event ``specified``).
- :func:`decompose` creates 2–6 new tasks linked among themselves by index, makes the root a
  child of every new task (its assignee judges completion once they are done) and moves the
  root from triage to todo (event ``decomposed``). Either the whole graph is written or
  nothing is.
- :func:`record_failure` leaves a failed attempt on the task: a comment saying what came back
  and a ``decompose_failed`` event with the time of the next automatic attempt.
- :func:`auto_candidates` is what the dispatcher's auto mode may try next.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, cast

from ..domain import model, states
from ..domain.errors import InvalidInput
from ..store.engine import Database, Row, Tx
from .common import default_assignee, get_task, ready_or_todo, require_board, task_out
from .rows import BoardView, DecomposeBackoff
from .tasks import NewTask, create_in

#: how many tasks a decomposition may create
MIN_CHILDREN = 2
MAX_CHILDREN = 6
#: the first automatic retry after a failed attempt waits this long; each further failure doubles
#: it, up to :data:`RETRY_MAX`
RETRY_FIRST = 300.0
RETRY_MAX = 6 * 3600.0
#: the most of a failed reply a comment quotes
QUOTE_MAX = 2000


@dataclass(frozen=True)
class Child:
    """One task of a decomposition: its parents are indexes into the same list."""

    title: str
    body: str = ""
    assignee: str | None = None
    parents: tuple[int, ...] = ()


def _triage_root(tx: Tx, board: str, task_id: str, verb: str) -> Row:
    require_board(tx, board)
    task = get_task(tx, board, task_id, lock=True)
    if task["status"] != states.TRIAGE:
        raise InvalidInput(f"task {task_id} is {task['status']}; only a triage task can be {verb}")
    return task


def _specify(tx: Tx, board: str, task_id: str, title: str, body: str, actor: str | None,
             llm_model: str | None) -> Row:
    task = _triage_root(tx, board, task_id, "specified")
    target = ready_or_todo(tx, task_id, task["assignee"], board)
    states.check("specify", task["status"], target, task_id)
    assignee = task["assignee"] or (default_assignee(tx, board) if target == states.READY else None)
    now = time.time()
    tx.execute(
        "UPDATE tasks SET title = :t, body = :body, status = :s, assignee = :a, updated_at = :now WHERE id = :id",
        {"t": title, "body": body, "s": target, "a": assignee, "now": now, "id": task_id},
    )
    tx.event(board, task_id, "specified",
             {"status": target, "title": title, "old_title": task["title"], "model": llm_model},
             actor=actor, at=now)
    task.update(title=title, body=body, status=target, assignee=assignee, updated_at=now)
    return task_out(task)


def specify(db: Database, board: str, task_id: str, *, title: str, body: str, actor: str | None = None,
            llm_model: str | None = None) -> Row:
    """Give triage task ``task_id`` its specified title and body and release it (ready when it
    has an assignee or the board a default one, else todo)."""
    return db.write(_specify, board, task_id, model.title(title), model.body(body), actor, llm_model)


def _order(children: list[Child]) -> list[int]:
    """The indexes of ``children`` parents first; raises on a bad index or a cycle."""
    n = len(children)
    for i, c in enumerate(children):
        for p in c.parents:
            if not 0 <= p < n or p == i:
                raise InvalidInput(f"task {i} names parent {p}: parents are the indexes 0-{n - 1} of other tasks")
    done: list[int] = []
    placed: set[int] = set()
    while len(done) < n:
        ready = [i for i in range(n) if i not in placed and all(p in placed for p in children[i].parents)]
        if not ready:
            raise InvalidInput("the proposed tasks' parents form a cycle")
        for i in ready:
            placed.add(i)
            done.append(i)
    return done


def check_children(children: list[Child]) -> list[Child]:
    """``children`` checked (count, titles, bodies, parents) and normalized; raises
    :class:`InvalidInput` saying what is wrong."""
    if not MIN_CHILDREN <= len(children) <= MAX_CHILDREN:
        raise InvalidInput(f"a decomposition has {MIN_CHILDREN}-{MAX_CHILDREN} tasks, not {len(children)}")
    out = [Child(title=model.title(c.title), body=model.body(c.body), assignee=(c.assignee or "").strip() or None,
                 parents=tuple(dict.fromkeys(int(p) for p in c.parents))) for c in children]
    _order(out)
    return out


def _assignee(tx: Tx, board: str, name: str | None, known: set[str]) -> str | None:
    """``name`` when it is a profile, else the board's default assignee."""
    if name and name in known:
        return name
    return default_assignee(tx, board)


def _decompose(tx: Tx, board: str, task_id: str, children: list[Child], actor: str | None,
               llm_model: str | None) -> Row:
    root = _triage_root(tx, board, task_id, "decomposed")
    states.check("decompose", root["status"], states.TODO, task_id)
    known = {r["name"] for r in tx.all("SELECT name FROM profiles")}
    ids: dict[int, str] = {}
    created: list[Row] = []
    for i in _order(children):
        c = children[i]
        row = create_in(tx, NewTask(
            board=board, title=c.title, body=c.body, assignee=_assignee(tx, board, c.assignee, known),
            parents=tuple(ids[p] for p in c.parents), tenant=root["tenant"], goal=root["goal_id"],
            priority=root["priority"], actor=actor, check_board=False,
        ))
        ids[i] = row["id"]
        created.append(row)
    now = time.time()
    # the root waits for every new task: its assignee judges completion once they are done
    tx.executemany(
        "INSERT INTO task_links (parent_id, child_id, board, created_at) VALUES (:p, :c, :b, :now)",
        [{"p": ids[i], "c": task_id, "b": board, "now": now} for i in range(len(children))],
    )
    tx.execute("UPDATE tasks SET status = 'todo', updated_at = :now WHERE id = :id", {"now": now, "id": task_id})
    order = [ids[i] for i in range(len(children))]
    tx.event(board, task_id, "decomposed", {"children": order, "status": states.TODO, "model": llm_model},
             actor=actor, at=now)
    root.update(status=states.TODO, updated_at=now)
    out = task_out(root)
    out["children"] = sorted(created, key=lambda r: order.index(r["id"]))
    return out


def decompose(db: Database, board: str, task_id: str, children: list[Child], *, actor: str | None = None,
              llm_model: str | None = None) -> Row:
    """Create ``children`` (2–6 tasks, parents by index) and make triage task ``task_id`` a child
    of each, in one transaction; the root moves to todo. An assignee that is no profile falls
    back to the default assignee. Returns the root with its new ``children``."""
    checked = check_children(children)
    return db.write(_decompose, board, task_id, checked, actor, llm_model)


def _attempts(tx: Tx, task_id: str) -> int:
    return int(tx.scalar("SELECT COUNT(*) FROM task_events WHERE task_id = :t AND kind = 'decompose_failed'",
                         {"t": task_id}) or 0)


def retry_delay(attempts: int) -> float:
    """How long auto mode waits after the ``attempts``-th failure of a task."""
    return float(min(RETRY_FIRST * 2 ** max(attempts - 1, 0), RETRY_MAX))


def _record_failure(tx: Tx, board: str, task_id: str, use: str, error: str, reply: str | None,
                    actor: str | None) -> Row:
    get_task(tx, board, task_id)
    now = time.time()
    attempts = _attempts(tx, task_id) + 1
    retry_at = now + retry_delay(attempts)
    text = f"{use} failed: {error}"
    if reply is not None:
        quoted = reply if len(reply) <= QUOTE_MAX else reply[:QUOTE_MAX] + f"\n… ({len(reply) - QUOTE_MAX} more characters)"
        text += "\n\nThe LLM answered:\n\n```\n" + quoted.replace("```", "'''") + "\n```"
    text = text[: model.COMMENT_MAX]
    cid = tx.scalar(
        "INSERT INTO task_comments (task_id, board, author, body, kind, created_at) "
        "VALUES (:t, :b, :a, :body, 'comment', :now) RETURNING id",
        {"t": task_id, "b": board, "a": actor or use, "body": text, "now": now},
    )
    payload = {"use": use, "error": error[:500], "attempts": attempts, "retry_at": retry_at, "comment_id": cid}
    tx.event(board, task_id, "decompose_failed", payload, actor=actor, at=now)
    return payload


def record_failure(db: Database, board: str, task_id: str, *, use: str, error: str, reply: str | None = None,
                   actor: str | None = None) -> Row:
    """A failed specify / decompose on ``task_id`` (which stays as it was): a comment with the
    error and what the LLM answered, and a ``decompose_failed`` event whose ``retry_at`` holds
    auto mode back (doubling with each failure)."""
    return db.write(_record_failure, board, task_id, use, error, reply, actor)


def _backoff_in(tx: Tx, board: str) -> dict[str, Row]:
    rows = tx.all(
        "SELECT e.task_id, e.payload FROM task_events e JOIN tasks t ON t.id = e.task_id "
        "WHERE t.board = :b AND t.status = 'triage' AND e.kind = 'decompose_failed' ORDER BY e.id",
        {"b": board})
    out: dict[str, Row] = {}
    for r in rows:
        try:
            p = json.loads(r["payload"] or "{}")
        except ValueError:
            continue
        out[r["task_id"]] = {"attempts": p.get("attempts"), "retry_at": p.get("retry_at"), "error": p.get("error")}
    return out


def backoff(db: Database, board: str) -> dict[str, Row]:
    """The triage tasks of ``board`` whose specify / decompose failed:
    ``{task_id: {attempts, retry_at, error}}`` (for the cards and the dispatcher)."""
    return db.read(_backoff_in, board)


def mark_backoff(db: Database, board: str, view: BoardView) -> BoardView:
    """A board view whose triage cards carry ``decompose_backoff`` (``{attempts, retry_at,
    error}``) when a specify / decompose of theirs failed."""
    triage = [c for col in view.get("columns", []) if col.get("status") == states.TRIAGE for c in col["tasks"]]
    if triage:
        held = backoff(db, board)
        for card in triage:
            if card["id"] in held:
                card["decompose_backoff"] = cast(DecomposeBackoff, held[card["id"]])
    return view


def auto_decompose_on(db: Database, board: str, board_settings: dict[str, Any]) -> bool:
    """Whether ``board`` decomposes its triage tasks by itself: the board's ``auto_decompose``
    setting, else the installation's."""
    value = board_settings.get("auto_decompose")
    if value is None:
        return bool(db.settings.auto_decompose)
    return bool(value)


def auto_candidates(db: Database, board: str, limit: int, *, now: float, exclude: set[str]) -> list[Row]:
    """Up to ``limit`` triage tasks of ``board`` for auto mode, by priority then age: never one
    in ``exclude`` (being decomposed already) nor one whose last failure's ``retry_at`` is
    still ahead."""
    if limit <= 0:
        return []

    def _r(tx: Tx) -> list[Row]:
        held = {tid for tid, b in _backoff_in(tx, board).items() if float(b.get("retry_at") or 0) > now}
        skip = held | exclude
        rows = tx.all(
            "SELECT id, title FROM tasks WHERE board = :b AND status = 'triage' "
            "ORDER BY priority DESC, created_at, id LIMIT :lim", {"b": board, "lim": limit + len(skip)})
        return [r for r in rows if r["id"] not in skip][:limit]

    return db.read(_r)


__all__ = ["Child", "MAX_CHILDREN", "MIN_CHILDREN", "auto_candidates", "auto_decompose_on", "backoff",
           "check_children", "decompose", "mark_backoff", "record_failure", "retry_delay", "specify"]
