"""The workers an earlier dispatcher process on this host left: each one taken over becomes a
worker of this dispatcher's registry like those it started (:class:`.spawn.Worker` holding an
:class:`.spawn.Adopted`), so every check of a pass applies to it — its run's liveness and
limits, its log's cap, and once its run is no longer current (a race it lost, an archived task,
a reclaimed claim) the stop, its exit recorded and counted; and the end of a worker that the
guard of its dead (or stopped, not taken over) dispatcher ended, which is that dispatcher's
loss, not the task's failure (:mod:`.guard`).

Used by :meth:`.reaping.Reaper.take_over_leftovers` and the reaper's reading of an exit.
"""

from __future__ import annotations

import logging
import mmap
import re
import time
from pathlib import Path
from typing import Any

from ..domain.errors import NotFound
from ..kernel import profiles as kprofiles
from ..store.engine import Row
from . import guard, spawn
from .runtime import Context

log = logging.getLogger("agentboard.dispatch")

#: what follows a run's ``=== run N of T`` line when that process was a repair attempt or a reminder
_ATTEMPT = re.compile(rb": repair attempt (\d+) ===")
_REMINDED = b": reminded to report ==="


def adopt(ctx: Context, run: Row, pid: int, at: float, profiles: dict[str, Row]) -> spawn.Worker:
    """The worker (``pid``, started at ``at``) of the open run ``run`` (its row of ``task_runs``)
    that an earlier dispatcher process on this host started, as a worker of this one: its log
    read from the line its own process started with (which attempt it is, where its output
    starts, where a cut already made keeps its start), its profile, its workspace. ``profiles``:
    the profiles read so far (by name), kept across calls."""
    rid, board, task_id = int(run["id"]), str(run["board"]), str(run["task_id"])
    name = str(run.get("profile") or "")
    if name not in profiles:
        try:
            profiles[name] = kprofiles.get(ctx.db, name)
        except NotFound:
            profiles[name] = {"name": name}
    path = Path(run["log_path"]) if run.get("log_path") else spawn.log_path(ctx.home, board, task_id)
    attempt, cut = _log_start(path, rid, task_id, int(ctx.settings.log_max_bytes or 0))
    reminded = attempt < 0
    attempt = abs(attempt)
    deadline = at + float(ctx.settings.repair_deadline) if attempt and not reminded else None
    w = spawn.Worker(board, task_id, rid, spawn.Adopted(pid, at, spawn.exit_path(ctx.home, board, task_id, rid)),
                     dict(profiles[name]), Path(run.get("workspace_path") or "."), path, cut.log_offset, started=at,
                     attempt=attempt, deadline=deadline)
    w.log_head_end = cut.log_head_end
    w.scanned = w.offline_scanned = max(cut.log_offset, cut.log_head_end)
    return w


def _log_start(path: Path, run_id: int, task_id: str, max_bytes: int) -> tuple[int, spawn.LogCut]:
    """Where the output of run ``run_id``'s last process starts in its task's log (after the last
    ``=== run N of …`` line of the run: a repair attempt or a reminder writes one of its own) and
    which attempt that process is (0: the worker itself, N: repair attempt N, -1: the reminder
    after the worker stopped without reporting); the part an earlier cut kept, as
    :func:`.spawn.run_log` finds it."""
    cut = spawn.LogCut(path)
    attempt = 0
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
            # a process's line was written when the log was below max_bytes (rotated otherwise)
            limit = min(len(m), max_bytes + 4096) if max_bytes else len(m)
            mark = f"=== run {run_id} of {task_id}".encode()
            at = m.rfind(mark, 0, limit)
            if at < 0:
                return 0, cut
            end = m.find(b"\n", at, limit)
            line = m[at:end if end >= 0 else limit]
            found = _ATTEMPT.search(line)
            attempt = int(found.group(1)) if found else (-1 if _REMINDED in line else 0)
            cut.log_offset = end + 1 if end >= 0 else at
            if max_bytes:
                cut_at = m.find(spawn.CUT_MARK, cut.log_offset, cut.log_offset + max_bytes // spawn.LOG_KEEP_SHARE + 4096)
                if cut_at >= 0:
                    nl = m.find(b"\n", cut_at)
                    cut.log_head_end = nl + 1 if nl >= 0 else 0
    except (OSError, ValueError):  # (an empty log cannot be mapped)
        pass
    return attempt, cut


def dispatcher_gone(ctx: Context, pid: int | None, since: Any) -> str | None:
    """Why the worker ``pid`` of a run started at ``since`` is gone, when the guard of its
    dispatcher ended it because that dispatcher died, or stopped and was not taken over in time
    (:func:`.guard.ended_by_guard`); None when no guard of this host ended it (it exited by
    itself, its status unknown to this process)."""
    if not pid:
        return None
    found = guard.ended_by_guard(guard.ended_file(guard.guard_pid_file(ctx.home, ctx.host)), int(pid),
                                 float(since or 0))
    if found is None:
        return None
    when = time.strftime("%H:%M:%S UTC", time.gmtime(found[0]))
    if found[1] == "detached":
        why = ("its dispatcher was stopped and no dispatcher on this host took its worker over in time, so the "
               f"dispatcher's guard stopped the worker (pid {pid}) at {when}")
    else:
        why = f"its dispatcher died, and the dispatcher's guard stopped the worker (pid {pid}) at {when}"
    return why + "; back in the queue, not counted as a failure of the task"


def host_gone(ctx: Context, host: str | None, now: float) -> str | None:
    """Why the claim of a run on another ``host`` lapsed when that host's dispatcher is gone: it
    left a mark (``kernel.monitoring.mark_pass``) and has not been seen alive for two intervals
    and more (stopped for maintenance, or died and not back; its guard stopped its workers).
    None when it is still seen, or never left a mark (a one-shot pass, a hand claim's host)."""
    if not host:
        return None
    from ..kernel import monitoring

    try:
        marks = {m["host"]: m for m in monitoring.dispatcher_passes(ctx.db)}
    except Exception:  # the marks are a hint: without them the lapse counts, as before
        return None
    mark = marks.get(host)
    if mark is None:
        return None
    seen = float(mark.get("seen") or mark["at"])
    window = 2 * max(float(ctx.settings.dispatch_interval), monitoring.PASS_MARK_EVERY) + 30.0
    if now - seen <= window:
        return None
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seen))
    return (f"claim expired: the dispatcher on host {host!r} has not passed since {when} (stopped or died), "
            "and its guard stops its workers; back in the queue, not counted as a failure of the task")
