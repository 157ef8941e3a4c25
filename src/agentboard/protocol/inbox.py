"""Messages to a running worker on disk, and the one nudge of a worker that stopped without
reporting.

``.board/inbox.md`` gets each comment written on the task while its run is open (the worker's
own excepted), appended by the dispatcher on the worker's host; ``.board/inbox.cursor`` remembers
``<run id> <last comment id>`` so nothing is appended twice; the dispatcher keeps the same
cursor in memory (:class:`Inboxes`), so a pass reads the files of only the runs whose task has
a comment past it (one indexed read of each running task's newest comment id). The heartbeat verb and the
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
from ..kernel.worker_protocol import exit_state
from ..store.engine import Database, Row
from . import boarddir, repair, safefs

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
          "the kanban_comment tool (or `agentboard comment <task id> \"...\"` where your instructions offer "
          "shell commands) when one asks you something.\n\n")


class Inboxes:
    """The dispatcher's inbox files: per open run of this host, the last comment id known to be
    written (or not meant for the worker). Only the pass thread uses it."""

    def __init__(self) -> None:
        self.cursors: dict[int, int] = {}
        #: how many runs' files the last sync opened (what it saved shows here)
        self.opened = 0

    def sync(self, db: Database, running: list[Row], local: Callable[[Row], bool]) -> int:
        """Append new comments to the ``.board/inbox.md`` of each running task whose worker is
        on this host and whose task has a comment past the run's cursor; returns how many were
        appended. Each row's newest comment id comes with it (``newest_comment``, the pass's
        snapshot) or is read here."""
        where: dict[int, tuple[str, str]] = {}
        for r in running:
            rid = r.get("current_run_id")
            ws = r.get("run_workspace") or r.get("workspace_path")
            if rid is not None and ws and local(r):
                where[int(rid)] = (str(r["id"]), str(ws))
        self.cursors = {rid: c for rid, c in self.cursors.items() if rid in where}
        self.opened = 0
        if not where:
            return 0
        if all("newest_comment" in r for r in running):  # read with the rows (a pass's snapshot)
            newest = {str(r["id"]): int(r["newest_comment"]) for r in running if r["newest_comment"] is not None}
        else:
            newest = kinbox.newest_comments(db, [t for t, _ in where.values()])
        todo = {rid: w for rid, w in where.items()
                if w[0] in newest and newest[w[0]] > self.cursors.get(rid, -1)}
        if not todo:
            return 0
        self.opened = len(todo)
        n = 0
        for rid, (written, appended) in _sync({rid: Path(ws) for rid, (_, ws) in todo.items()}, db).items():
            if written is None:  # not readable now: looked at again next pass
                continue
            # the file is up to date, or has the first LIMIT of more: then its cursor, not the newest
            self.cursors[rid] = written if appended else newest[todo[rid][0]]
            n += appended
        return n


def _sync(where: dict[int, Path], db: Database) -> dict[int, tuple[int | None, int]]:
    """The inbox files of the runs in ``where`` (run id → workspace) brought up to date; per
    run, the last comment id its file holds now (None: its ``.board/`` could not be read or
    written) and how many comments were appended."""
    cursors: dict[int, int] = {}
    out: dict[int, tuple[int | None, int]] = {}
    for rid, workspace in where.items():
        try:  # a .board/ that is not a real folder (a link a worker planted) is skipped
            with safefs.open_board(workspace, create=False) as bdir:
                cursors[rid] = max(_cursor(bdir, rid), 0)
        except OSError:
            out[rid] = (None, 0)
    if not cursors:
        return out
    out.update({rid: (c, 0) for rid, c in cursors.items()})
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
            out[rid] = (int(msgs[-1]["id"]), len(msgs))
        except OSError as exc:
            log.info("cannot append to %s: %s", path, exc)
            out[rid] = (None, 0)
    return out


NUDGE = """
---

# You stopped without reporting

Your previous attempt at this task (run {run_id}) exited{status} without completing it or saying
what blocks it. The workspace is as you left it. Look at what is done, finish the task, and then
report exactly once, one of the ways the instructions above give: complete it (the kanban_complete
tool, or `.board/result.json`), or block it with the question you need answered (kanban_block, or
`.board/result.json` with `"success": false`). This is the only reminder: another exit without a
report counts as a failed attempt.
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
    note = NUDGE.format(run_id=run_id, status=status)
    refused = repair.refused_report(exit_state(db, board, task_id, run_id).run)
    if refused is not None:
        note += (f"\nYour last report ({refused.get('verb')}) was refused: {refused.get('error')}. Correct what it "
                 "names and report again: a refused report is no report.\n")
    prompt = bdir / NUDGE_PROMPT_FILE
    boarddir.write_text(prompt, original.decode("utf-8", "replace") + note)
    return prompt
