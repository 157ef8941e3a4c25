"""The comment thread, and @mentions that create follow-up tasks.

A mention in a comment a worker's run wrote (``run_id`` given) lands its follow-up in
``triage``: a worker proposes work, a person (or an orchestrator's own flow) releases it, so a
worker cannot hand another profile a ready task (and that profile's run token its rights). A
run's comments, and the follow-ups its mentions make, count against what one run may post
(:mod:`.run_limits`).
"""

from __future__ import annotations

import re
import time

from ..domain import model
from ..domain.errors import InvalidInput
from ..store.engine import Database, Row, Tx
from . import run_limits
from .common import get_task, require_board
from .tasks import NewTask, create_in

MENTION_RE = re.compile(r"(?<![\w.@])@([A-Za-z0-9][A-Za-z0-9_.-]{0,63})")


def _comment(tx: Tx, board: str, task_id: str, body: str, author: str, mentions: bool, kind: str,
             run_id: int | None, limits: tuple[int, int]) -> Row:
    task = get_task(tx, board, task_id)
    require_board(tx, board)  # an archived board's threads stay as they are until it is restored
    now = time.time()
    if run_id is not None:  # a worker run's: within what one run may post (kernel.run_limits)
        run_limits.charge(tx, task_id, run_id, run_limits.COMMENTS, limits[0])
    cid = tx.scalar(
        "INSERT INTO task_comments (task_id, board, author, body, kind, created_at) "
        "VALUES (:t, :b, :a, :body, :k, :now) RETURNING id",
        {"t": task_id, "b": board, "a": author, "body": body, "k": kind, "now": now},
    )
    spawned: list[str] = []
    skipped: list[str] = []
    if mentions:
        names = []
        for name in dict.fromkeys(m.rstrip(".") for m in MENTION_RE.findall(body)):
            if tx.one("SELECT name, enabled FROM profiles WHERE name = :n", {"n": name}) is None:
                skipped.append(name)
            else:
                names.append(name)
        if run_id is not None:  # each follow-up a run's mention makes is one of its proposals
            run_limits.charge(tx, task_id, run_id, run_limits.PROPOSALS, limits[1], len(names))
        made: list[Row] = []
        for name in names:
            title = f"Follow-up for @{name} on {task_id}: {task['title']}"[: model.TITLE_MAX]
            child = create_in(tx, NewTask(
                board=board, title=title, body=body, assignee=name, parents=(task_id,),
                tenant=task["tenant"], goal=task["goal_id"], priority=task["priority"],
                triage=run_id is not None, actor=author, check_board=False,
            ))
            spawned.append(child["id"])
            made.append(child)
        if run_id is not None:
            run_limits.proposed_in(tx, board, task_id, run_id, author, made)
    tx.event(
        board, task_id, "commented",
        {"comment_id": cid, "author": author, "excerpt": body[:200], "spawned_subtasks": spawned, "skipped_mentions": skipped},
        run_id=run_id, actor=author, at=now,
    )
    return {"id": cid, "task_id": task_id, "author": author, "body": body, "kind": kind, "created_at": now,
            "spawned_subtasks": spawned, "skipped_mentions": skipped}


def comment(
    db: Database, board: str, task_id: str, body: str, *, author: str | None = None,
    mentions: bool = True, kind: str = "comment", run_id: int | None = None,
) -> Row:
    """Add a comment; each ``@profile`` mention (with ``mentions``) creates a follow-up task
    for that profile, in ``triage`` when the comment comes from a worker's run (``run_id``)."""
    text = (body or "").strip()
    if not text:
        raise InvalidInput("comment is empty: write something")
    model.body(text, model.COMMENT_MAX, "comment")
    limits = (int(db.settings.run_comment_limit), int(db.settings.run_proposal_limit))
    return db.write(_comment, board, task_id, text, author or "person", mentions, kind, run_id, limits)
