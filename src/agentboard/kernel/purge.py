"""Purge: remove a task and every row about it for real, leaving one audit event on its board.

Every table with a ``task_id`` column loses the task's rows (runs, comments, events,
attachments, reviews, subscriptions, run tokens, and any table added later), its links go both
ways, and wiki pages that cite it as their source keep their text but forget the id. A task
with running work or children that are not finished is refused unless ``force``; with ``force``
the children it held back are promoted as if it were done. The ``purged`` event (no task id, so
it outlives the task) is written before the deletions, so event ids keep increasing.

What the task left outside the database (its worktree, branch, worker logs, scratch workspace)
is not the kernel's: :func:`purge` answers where they are (``workspace``), and the surfaces hand
that to ``dispatch.gc.after_purge``, which removes what can go and says what it kept.
:func:`branch_users` and :func:`purged_ids` are the reads it (and ``gc``) needs.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from ..domain import states
from ..domain.errors import Conflict
from ..store.engine import Database, Row, Tx, in_list
from .attachments import attachments_dir
from .common import get_task
from .flow import promote_children, settle_goal

#: columns that name a task without owning a row of it: cleared, not deleted
_CITING = {"wiki_pages": "source_task_id"}


def _purge(tx: Tx, board: str, task_id: str, force: bool, actor: str | None) -> Row:
    task = get_task(tx, board, task_id, lock=True)
    running = task["status"] == states.RUNNING or task["current_run_id"] is not None
    unfinished = [r["id"] for r in tx.all(
        "SELECT c.id FROM task_links l JOIN tasks c ON c.id = l.child_id "
        "WHERE l.parent_id = :id AND c.status NOT IN ('done', 'archived') ORDER BY c.id", {"id": task_id})]
    if not force:
        if running:
            raise Conflict(f"task {task_id} is running (run {task['current_run_id']}); reclaim it first, or "
                           "purge with --force to stop its worker and remove it anyway")
        if unfinished:
            raise Conflict(f"task {task_id} has unfinished children ({', '.join(unfinished[:5])}); finish or purge "
                           "them first, or purge with --force")
    now = time.time()
    workspace = {"kind": task.get("workspace_kind"), "path": task.get("workspace_path"),
                 "branch": task.get("branch_name")}
    tx.event(board, None, "purged", {"task": task_id, "title": task["title"], "status": task["status"],
                                     "forced": bool(force), "children": unfinished,
                                     **({"workspace": workspace} if workspace["path"] else {})},
             actor=actor, at=now)
    # the tables' definitions: read by a purge only, not by every process that builds the web app
    from ..store.schema import metadata
    from .insights import add_pending_of_task_in

    add_pending_of_task_in(tx, task_id)  # its runs stay counted in the insights, as runs added before

    removed: dict[str, int] = {}
    for table in metadata.sorted_tables:
        if table.name == "tasks":
            continue
        if "task_id" in table.columns:
            tx.execute(f"DELETE FROM {table.name} WHERE task_id = :id", {"id": task_id})  # noqa: S608
            if tx.rowcount:
                removed[table.name] = tx.rowcount
        col = _CITING.get(table.name)
        if col:
            tx.execute(f"UPDATE {table.name} SET {col} = NULL WHERE {col} = :id", {"id": task_id})  # noqa: S608
    children = [r["child_id"] for r in tx.all("SELECT child_id FROM task_links WHERE parent_id = :id", {"id": task_id})]
    tx.execute("DELETE FROM task_links WHERE parent_id = :id OR child_id = :id", {"id": task_id})
    if tx.rowcount:
        removed["task_links"] = tx.rowcount
    tx.execute("DELETE FROM tasks WHERE id = :id", {"id": task_id})
    removed["tasks"] = 1
    # the children it held back no longer wait for it
    promoted: list[str] = []
    if children:
        for child in children:
            promoted += _promote_one(tx, board, child, task_id, actor)
    settle_goal(tx, board, task.get("goal_id"), actor)
    worker = ({"pid": task["worker_pid"], "host": task["worker_host"]}
              if running and task.get("worker_pid") else None)
    return {"id": task_id, "board": board, "purged": True, "title": task["title"], "status": task["status"],
            "removed": removed, "promoted": promoted, "worker": worker, "workspace": workspace}


def _promote_one(tx: Tx, board: str, child: str, purged: str, actor: str | None) -> list[str]:
    """Promote ``child`` if every parent it has left is satisfied (it may have none now)."""
    row = tx.one("SELECT id, status FROM tasks WHERE id = :id", {"id": child})
    if row is None or row["status"] != states.TODO:
        return []
    # promote_children works from a parent; with the link gone, ask through any remaining parent,
    # or directly when none is left
    parent = tx.one("SELECT parent_id FROM task_links WHERE child_id = :id LIMIT 1", {"id": child})
    if parent is not None:
        return [c for c in promote_children(tx, board, parent["parent_id"], actor) if c == child]
    from .common import default_assignee

    task = tx.one("SELECT assignee FROM tasks WHERE id = :id", {"id": child})
    assignee = (task or {}).get("assignee") or default_assignee(tx, board)
    if not assignee:
        return []
    now = time.time()
    tx.execute("UPDATE tasks SET status = 'ready', assignee = :a, updated_at = :now WHERE id = :id AND status = 'todo'",
               {"a": assignee, "now": now, "id": child})
    if tx.rowcount:
        tx.event(board, child, "promoted", {"by": purged, "purged": True}, actor=actor, at=now)
        return [child]
    return []


def purge(db: Database, board: str, task_id: str, *, force: bool = False, actor: str | None = None,
          home: Path | None = None) -> Row:
    """Remove ``task_id`` and its rows (see the module doc), then its attachment files. The
    answer's ``workspace`` (``kind``, ``path``, ``branch`` as the task had them) is where its
    files and branch outside the database are, for ``dispatch.gc.after_purge``."""
    out = db.write(_purge, board, task_id, force, actor)
    folder = attachments_dir(home if home is not None else db.settings.home, board, task_id)
    shutil.rmtree(folder, ignore_errors=True)
    return out


def branch_users(db: Database, names: list[str]) -> dict[str, dict[str, list[str]]]:
    """The tasks that still need each branch of ``names``: ``own``, those whose own branch it is
    (any status), and ``base``, those not finished that start from it. ``{name: {"own": [task
    id, ...], "base": [...]}}``, only the names some task needs."""
    if not names:
        return {}

    def _r(tx: Tx) -> dict[str, dict[str, list[str]]]:
        out: dict[str, dict[str, list[str]]] = {}
        for i in range(0, len(names), 500):
            chunk = names[i:i + 500]
            p: dict[str, object] = {}
            own = in_list("n", chunk, p)
            base = in_list("m", chunk, p)
            for r in tx.all(
                    f"SELECT id, branch_name, base_branch, status FROM tasks WHERE branch_name IN {own} "  # noqa: S608
                    f"OR (base_branch IN {base} AND status NOT IN ('done', 'archived')) ORDER BY id", p):
                if r["branch_name"] in chunk:
                    out.setdefault(r["branch_name"], {"own": [], "base": []})["own"].append(r["id"])
                if r["base_branch"] in chunk and r["status"] not in states.SATISFIED:
                    out.setdefault(r["base_branch"], {"own": [], "base": []})["base"].append(r["id"])
        return out
    return db.read(_r)


def purged_ids(db: Database, board: str, task_ids: list[str]) -> set[str]:
    """Those of ``task_ids`` that ``board`` purged (a ``purged`` event names them; those events
    are never pruned): what ``gc`` may clear up after, in a target repository that other homes'
    boards may use too."""
    wanted = set(task_ids)
    if not wanted:
        return set()
    rows = db.read(lambda tx: tx.all(
        "SELECT payload FROM task_events WHERE board = :b AND task_id IS NULL AND kind = 'purged'", {"b": board}))
    out: set[str] = set()
    for r in rows:
        try:
            task = json.loads(r["payload"] or "{}").get("task")
        except (TypeError, ValueError, AttributeError):
            continue
        if task in wanted:
            out.add(task)
    return out
