"""Messages to a running worker on disk, and the one nudge of a worker that stopped without
reporting.

``.board/inbox.md`` gets each comment written on the task while its run is open (the worker's
own excepted), appended by the dispatcher on the worker's host; ``.board/inbox.cursor`` remembers
``<run id> <last comment id>`` so nothing is appended twice. The heartbeat verb and the
``kanban_inbox`` MCP tool return the same comments (with their own cursor, on the run).

A worker that exits 0 without completing or blocking is started once more in its workspace, with
its prompt and a note saying it stopped without reporting (:func:`nudge`), before the exit is
judged a crash or a protocol violation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from ..config import Settings
from ..domain.errors import AgentboardError
from ..kernel import inbox as kinbox
from ..kernel import runs
from ..store.engine import Database, Row
from . import boarddir, safefs

log = logging.getLogger("agentboard.protocol")

INBOX_FILE = "inbox.md"
CURSOR_FILE = "inbox.cursor"
NUDGE_PROMPT_FILE = "nudge-prompt.md"


def inbox_path(workspace: Path) -> Path:
    return boarddir.board_dir(workspace) / INBOX_FILE


def _cursor(bdir: safefs.Dir, run_id: int) -> int:
    try:
        run_s, _, last = (bdir.read_text(CURSOR_FILE, limit=256) or "").strip().partition(" ")
        return int(last) if int(run_s) == run_id else -1
    except (OSError, ValueError):
        return -1


def _entry(m: Row) -> str:
    from ..domain.timespec import iso

    return f"## #{m['id']} from {m['author']} ({iso(float(m['created_at']))})\n\n{m['body'].rstrip()}\n\n"


HEADER = ("# Messages on your task\n\nComments people wrote while you work, newest last. Answer with "
          "`agentboard comment <task id> \"...\"` (or the kanban_comment tool) when one asks you something.\n\n")


def sync(db: Database, running: list[Row], local: Callable[[Row], bool]) -> int:
    """Append new comments to the ``.board/inbox.md`` of each running task whose worker is on
    this host; returns how many were appended."""
    where: dict[int, Path] = {}
    cursors: dict[int, int] = {}
    for r in running:
        rid = r.get("current_run_id")
        ws = r.get("run_workspace") or r.get("workspace_path")
        if rid is None or not ws or not local(r):
            continue
        workspace = Path(ws)
        try:  # a .board/ that is not a real folder (a link a worker planted) is skipped
            with safefs.open_board(workspace, create=False) as bdir:
                cursors[int(rid)] = max(_cursor(bdir, int(rid)), 0)
        except OSError:
            continue
        where[int(rid)] = workspace
    if not cursors:
        return 0
    n = 0
    for rid, msgs in kinbox.unread_for_files(db, cursors).items():
        workspace = where[rid]
        path = inbox_path(workspace)
        try:
            with safefs.open_board(workspace, create=False) as bdir:
                fresh = _cursor(bdir, rid) < 0
                text = "".join(_entry(m) for m in msgs)
                if fresh:
                    bdir.write_text(INBOX_FILE, HEADER + text)
                else:  # a link or hard link the worker left there is replaced, never written through
                    bdir.append_text(INBOX_FILE, text, header=HEADER)
                bdir.write_text(CURSOR_FILE, f"{rid} {msgs[-1]['id']}\n")
            n += len(msgs)
        except OSError as exc:
            log.info("cannot append to %s: %s", path, exc)
    return n


NUDGE = """
---

# You stopped without reporting

Your previous attempt at this task (run {run_id}) exited{status} without completing it or saying
what blocks it. The workspace is as you left it. Look at what is done, finish the task, and then
report exactly once: complete it (`agentboard complete --summary "..."`, the kanban_complete tool,
or `.board/result.json`), or block it with the question you need answered
(`agentboard block "..."`). This is the only reminder: another exit without a report counts as a
failed attempt.
"""


def nudge(db: Database, settings: Settings, board: str, task_id: str, run_id: int, workspace: Path,
          exit_code: int | None) -> Path | None:
    """The prompt of the one nudge of run ``run_id`` (its original prompt and the note above), or
    None when it was nudged already, nudging is off, or the workspace has no prompt."""
    if not settings.stop_nudge:
        return None
    bdir = boarddir.board_dir(Path(workspace))
    from .lifecycle import PROMPT_FILE

    try:  # the worker could have replaced it by a link or a hard link: never read through one
        original = safefs.read_file(bdir / PROMPT_FILE)
    except OSError as exc:
        log.info("no nudge for run %s: %s", run_id, exc)
        return None
    if original is None:
        return None
    try:
        if not runs.mark_nudged(db, board, task_id, run_id, exit_code=exit_code):
            return None
    except AgentboardError:
        return None
    status = f" with status {exit_code}" if exit_code not in (None, 0) else ""
    prompt = bdir / NUDGE_PROMPT_FILE
    boarddir.write_text(prompt, original.decode("utf-8", "replace") + NUDGE.format(run_id=run_id, status=status))
    return prompt
