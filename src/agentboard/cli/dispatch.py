"""Dispatcher commands: ``dispatch`` (one pass), ``dispatcher`` (the loop), ``log``, ``gc``, ``demo``.

Workers reach the board only through the API with their run token: ``dispatch`` and
``dispatcher`` hand them the API of a ``serve`` (or another dispatcher) running on the same home,
else serve it themselves (:class:`agentboard.api.serve.WorkerAPI`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from .common import (
    board_option,
    db,
    emit_json,
    existing_board,
    handle_errors,
    json_option,
    me,
    settings,
    task_board,
    task_board_option,
)

if TYPE_CHECKING:
    from agentboard.dispatch.report import PassReport


def _print_pass(rep: PassReport) -> None:
    if rep.skipped_boards:
        click.echo(f"skipped board(s) {', '.join(rep.skipped_boards)}: {rep.skipped_reason}")
    for s in rep.spawned:
        click.echo(f"spawned {s.task} ({s.profile}) run {s.run_id} pid {s.pid} in {s.workspace}")
    for w in rep.would_spawn:
        click.echo(f"would spawn {w.task} ({w.profile}, priority {w.priority}): {w.title}")
    for f in rep.spawn_failed:
        click.echo(f"could not start {f.task}: {f.error}" + (" (systemic: blocked)" if f.systemic else ""))
    for k in rep.skipped:
        click.echo(f"skipped {k.task or ''}: {k.reason}".replace("skipped : ", "skipped: "))
    for k in rep.budget_blocked:
        click.echo(f"blocked {k.task}: {k.reason}")
    counts = {"exits": rep.exits, "timeouts": rep.timeouts, "stale": rep.stale, "reclaimed": rep.reclaimed,
              "extended": rep.extended, "promoted": rep.promoted}
    busy = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    if busy:
        click.echo(busy)
    if not any((rep.spawned, rep.would_spawn, rep.spawn_failed, rep.skipped, rep.skipped_boards, rep.budget_blocked,
                busy)):
        click.echo("nothing to do")


#: the line a detached pass prints after its report (the command that started it stops reading there)
_DETACHED_MARK = "\x00agentboard: pass done\x00"


@click.command("dispatch")
@click.option("--dry-run", is_flag=True, help="show what would be started, change nothing")
@click.option("--max", "max_spawn", type=click.IntRange(0), default=None, metavar="N",
              help="start at most N workers (0: only handle exits and expired claims)")
@click.option("--all-boards", is_flag=True, help="every board, not just the current one")
@click.option("--wait", is_flag=True,
              help="wait until the workers this pass started exit, and record how they ended")
@click.option("--detached-pass", "detached", is_flag=True, hidden=True)
@board_option
@json_option
@handle_errors
def dispatch(dry_run: bool, max_spawn: int | None, all_boards: bool, wait: bool, detached: bool, board: str | None,
             as_json: bool) -> None:
    """One dispatcher pass now: handle exits and expired claims, then start ready tasks.

    Returns once the workers are started (--wait: once they exit). With no `serve` or
    `dispatcher` on this home, the pass serves its workers' API itself: in a background process
    that ends when they exit, after recording how they ended."""
    from agentboard.api.serve import WorkerAPI, run_tokens, running_api

    boards = None if all_boards else [existing_board(board)]
    if not (dry_run or wait or detached) and running_api(settings().home) is None:
        _run_detached(max_spawn, boards, as_json)
        return
    from agentboard.dispatch.dispatcher import Dispatcher

    # the port is bound first (the workers are handed its URL); the app behind it is built only
    # once a worker this pass started needs it
    api = None if dry_run else WorkerAPI(settings(), db()).start(lazy=True)
    try:
        d = Dispatcher(db(), settings(), boards=boards, one_shot=True, api_url=api.url if api else None,
                       token_factory=run_tokens(db()) if api else None)
        rep = d.run_pass_report(max_spawn=max_spawn, dry_run=dry_run)
        d.wait_idle(timeout=60)
        if as_json:
            emit_json(rep.to_dict())
        else:
            _print_pass(rep)
        sys.stdout.flush()
        if api is None:
            return
        # the workers an earlier pass started whose API died with its process: this one serves
        # their API again, on the port they were given, until they exit
        earlier = _earlier_workers(d, set(rep.skipped_boards)) if api.own else []
        if detached:
            _detach(d, len(earlier))
        if api.own and (d.workers.all() or earlier):
            api.serve()
        if wait or api.own:
            _wait_for_workers(d, api.own and not detached, earlier)
    finally:
        if api is not None:
            api.stop()


def _earlier_workers(d: Any, held: set[str]) -> list[tuple[int, float]]:
    """The live workers on this host of open runs that this pass did not start, ``(pid, started)``:
    an earlier one-shot pass started them, and its background API died with its process (no API
    is recorded on the home, or this pass would use it). The workers of boards another dispatcher
    holds (``held``: the pass skipped them) are that dispatcher's, and left to it. They report to the URL they were given,
    on the port this pass serves (:func:`agentboard.api.serve.bind_worker_port` takes the one
    the last pass used), so serving it again lets their report — retried meanwhile,
    ``remote.RETRY_FOR`` — through, instead of the worker failing to report and being nudged
    into doing its job again."""
    from agentboard.dispatch.liveness import pid_alive
    from agentboard.kernel import dispatching

    snap = dispatching.pass_snapshot(d.db, host=d.host)
    own = {w.pid for w in d.workers.all()}
    found = [(r, r.get("run_started_at")) for r in snap.running] + [(r, r.get("started_at")) for r in snap.reviewing]
    out = []
    for row, at in found:
        pid = row.get("worker_pid")
        if (pid and at and int(pid) not in own and row.get("board") not in held and d.ctx.local(row)
                and pid_alive(int(pid), started_after=float(at))):
            out.append((int(pid), float(at)))
    return out


def _run_detached(max_spawn: int | None, boards: list[str] | None, as_json: bool) -> None:
    """Run the pass in a process of its own session that outlives this command: it prints the
    pass's report (shown here), then serves its workers' API until they exit."""
    import os
    import subprocess

    argv = [sys.executable, "-m", "agentboard", "dispatch", "--detached-pass"]
    if max_spawn is not None:
        argv += ["--max", str(max_spawn)]
    argv += ["--all-boards"] if boards is None else ["--board", boards[0]]
    if as_json:
        argv.append("--json")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True,
                            env=os.environ.copy())
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode("utf-8", "replace")
        if line.rstrip("\n") == _DETACHED_MARK:
            return
        sys.stdout.write(line)
        sys.stdout.flush()
    code = proc.wait()
    if code:
        sys.exit(code)


def _detach(d: Any, earlier: int = 0) -> None:
    """The background side of a pass: say who serves the workers, then let go of the terminal.
    ``earlier``: how many more an earlier pass started (whose API had stopped)."""
    import os

    left = len([w for w in d.workers.all() if not w.poll()]) + earlier
    if left:
        click.echo(f"{left} worker(s) report to an API served in the background (pid {os.getpid()}) until "
                   "they exit; `agentboard dispatch` again records how they ended"
                   + (f" ({earlier} started by an earlier pass whose API had stopped)" if earlier else ""), err=True)
    sys.stdout.write(_DETACHED_MARK + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (1, 2):
        os.dup2(null, fd)
    os.close(null)


#: seconds between the passes ``dispatch --wait`` makes while its workers run (their max runtime,
#: budgets and repair deadlines are enforced by a pass)
LIMITS_EVERY = 1.0


def _wait_for_workers(d: Any, say: bool, earlier: list[tuple[int, float]] | None = None) -> None:
    """Wait until the workers this pass started exit, then record how they ended (a pass that
    starts nothing). ``say``: tell the person that this command serves their API meanwhile.
    ``earlier``: workers an earlier pass started (``(pid, started)``, not this process's
    children; :func:`_earlier_workers`), waited for as well, and how they ended recorded the
    same way (from the exit status their wrapper wrote).

    Ctrl-C sets a flag this loop reads between its steps (:func:`.common.ctrl_c_flag`), so an
    interrupt never lands inside a pass; the command then stops serving and exits with 130, its
    workers still running."""
    import time

    from agentboard.dispatch.liveness import pid_alive

    from .common import ctrl_c_flag

    others = list(earlier or [])

    def registered() -> set[tuple[int, int]]:
        return {(w.run_id, w.pid) for w in d.workers.all()}

    def idle_within(seconds: float) -> None:  # no exit in hand any more (Ctrl-C ends the wait)
        deadline = time.monotonic() + seconds
        while not stop.is_set() and not d.wait_idle(timeout=0.2) and time.monotonic() < deadline:
            pass

    def running() -> bool:
        others[:] = [(pid, at) for pid, at in others if pid_alive(pid, started_after=at)]
        return any(not w.poll() for w in d.workers.all()) or bool(others)

    with ctrl_c_flag() as stop:  # before the message that tells the person about Ctrl-C
        left = len([w for w in d.workers.all() if not w.poll()]) + len(others)
        if left and say:
            click.echo(f"serving the API for {left} worker(s) until they exit (no `serve` or `dispatcher` "
                       "runs on this home); Ctrl-C stops it and they can then only report through "
                       ".board/result.json", err=True)
        unchanged_since: float | None = None
        while not stop.is_set():
            looked = time.monotonic()
            waited = bool(others)
            while running() and not stop.wait(0.1):
                if time.monotonic() - looked >= LIMITS_EVERY:  # a max runtime, a budget hold meanwhile
                    d.run_pass_report(max_spawn=0)
                    looked = time.monotonic()
            if waited and not stop.is_set():  # how the earlier pass's workers ended (a nudge: one of ours)
                d.run_pass_report(max_spawn=0)
                idle_within(60)
            # an exit in hand (the exit watcher's) has forgotten its worker and may be starting
            # the next (a nudge, a repair): what is registered means something only once it is done
            idle_within(600)
            before = registered()
            if stop.is_set() or not before:
                break  # every worker's exit is recorded (a recorded worker is forgotten)
            d.run_pass_report(max_spawn=0)  # their exits (a nudge or a repair attempt starts one more)
            idle_within(600)
            # a nudge or a repair attempt started by that pass (perhaps already ended) is its run's
            # worker now: round again until none is left; a pass that changed nothing waits a little
            if registered() != before:
                unchanged_since = None
            else:
                unchanged_since = unchanged_since or time.monotonic()
                if time.monotonic() - unchanged_since > 60:
                    break
                stop.wait(0.2)
    if stop.is_set():
        left = len([w for w in d.workers.all() if not w.poll()]) + len(others)
        if left:
            click.echo(f"stopped waiting: {left} worker(s) still running; run `agentboard dispatch` after they exit "
                       "to record how they ended (their reports are kept in .board/result.json)", err=True)
        sys.exit(130)


@click.command("dispatcher")
@click.option("--board", "boards", multiple=True, metavar="SLUG", help="only these boards (default: all)")
@click.option("--interval", type=float, default=None, metavar="S",
              help="fallback pass interval in seconds, 0.1 to 86400 (default: the dispatch_interval setting, 60)")
@click.option("--quiet", is_flag=True, help="log only warnings")
@click.option("--log-format", type=click.Choice(["text", "json", "auto"]), default=None,
              help="text, json (one object per line) or auto (json when stderr is not a terminal); "
                   "default: the log_format setting, text")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None, metavar="N",
              help="serve /metrics, /healthz and /readyz without a token on this port")
@click.option("--metrics-host", default="127.0.0.1", show_default=True, metavar="HOST",
              help="the address of --metrics-port (0.0.0.0 for a scrape network)")
@handle_errors
def dispatcher(boards: tuple[str, ...], interval: float | None, quiet: bool, log_format: str | None,
               metrics_port: int | None, metrics_host: str) -> None:
    """Run the dispatcher until SIGTERM/SIGINT; workers keep running when it stops."""
    import signal
    import threading

    from agentboard.api.serve import WorkerAPI, run_tokens
    from agentboard.config import DISPATCHER_POOL, is_set, redact, setting_value
    from agentboard.dispatch.dispatcher import Dispatcher

    from .serve import announce, observe_setup, start_metrics

    s = settings()
    if interval is not None:  # the limits and the message of the dispatch_interval setting
        s.dispatch_interval = setting_value("dispatch_interval", interval, "--interval")
    only = [existing_board(b) for b in dict.fromkeys(boards)] or None
    observed = observe_setup(s, log_format, "WARNING" if quiet else "INFO")
    for name, size in zip(("pg_pool_size", "pg_max_overflow"), DISPATCHER_POOL, strict=True):
        if not is_set(s, name):  # a dispatcher host's share of the server's connections (docs/deploy.md)
            setattr(s, name, size)
    api = WorkerAPI(s, db())  # its own API, always (never another process's, which may stop first)
    api.serve_in_background()  # the first pass runs meanwhile; an early worker's call waits for it
    d = Dispatcher(db(), s, boards=only, api_url=api.url, token_factory=run_tokens(db()))
    d.claim_host()  # another live dispatcher with this host id: one line, nothing touched
    done = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    announce(f"dispatcher on {redact(s.url) if not s.is_sqlite else s.home} as host {d.host} "
             f"(max_parallel {s.max_parallel}); workers report to "
             f"{'its own API at ' if api.own else 'the API at '}{api.url}; Ctrl-C to stop", observed)
    held = _held_elsewhere(s, only)
    if held:
        announce(f"warning: another dispatcher is running on this home for board(s) {', '.join(held)}; this one "
                 "skips them until it stops (one dispatcher per board on a SQLite home)", observed)
    metrics_server = None
    if metrics_port is not None:
        metrics_server = start_metrics(f"[{metrics_host}]:{metrics_port}", s, db(), d,
                                       "warning" if quiet else "info")
    d.start()
    from agentboard.notify.notifier import start_notifier

    notifier = start_notifier(db(), s)
    try:
        while not done.wait(0.5):
            pass
    finally:
        d.stop()
        if notifier is not None:
            notifier.stop()
        own = api.own
        api.stop()
        if metrics_server is not None:
            metrics_server.stop()
        left = d.workers.running()
        note = "; they report through .board/result.json until then" if left and own else ""
        announce(f"dispatcher stopped; {left} worker(s) left running will be picked up by the next "
                 f"dispatcher{note}", observed)


def _held_elsewhere(s: Any, only: list[str] | None) -> list[str]:
    """The boards (of ``only``, else every one) another dispatcher on this SQLite home holds now,
    each as ``"<board> (pid N)"`` (looked at before this one takes any)."""
    if not s.is_sqlite:
        return []
    from agentboard.dispatch.planning import running_dispatchers

    return [b for b in running_dispatchers(s.home) if only is None or b.split(" ", 1)[0] in only]


def _run_part(data: bytes, run_id: int) -> bytes:
    """The part of a task's log that run ``run_id`` wrote: from its first ``=== run N of`` line
    to the first line of another run (the whole log when it has no such line)."""
    import re

    mine = f"=== run {run_id} of ".encode()
    start = 0 if data.startswith(mine) else data.find(b"\n" + mine) + 1
    if start == 0 and not data.startswith(mine):
        return data
    for m in re.finditer(rb"\n=== run (\d+) of ", data[start:]):
        if int(m.group(1)) != run_id:
            return data[start: start + m.start() + 1]
    return data[start:]


@click.command("log")
@click.argument("task_id", required=False, metavar="ID")
@click.option("--tail", "tail", type=click.IntRange(1), default=None, metavar="BYTES", help="only the last BYTES")
@click.option("--run", "run_no", type=click.IntRange(1), default=None, metavar="N",
              help="the log of attempt N (as `agentboard runs` and the drawer number them; a run id works too)")
@task_board_option
@handle_errors
def log_(task_id: str | None, tail: int | None, run_no: int | None, board: str | None) -> None:
    """Print the worker log of a task's latest (or --run N) run: on a terminal with its control
    characters shown as escapes, into a pipe or a file byte for byte."""
    from pathlib import Path

    from agentboard.domain.errors import NotFound
    from agentboard.kernel import queries

    task_id = task_id or me().task
    if not task_id:
        raise click.UsageError("give a task id")
    slug = task_board(task_id, board)
    runs = queries.runs(db(), slug, task_id)
    chosen = [r for r in runs if not r.get("synthetic")]
    if run_no is not None:
        chosen = [r for r in chosen if r.get("attempt") == run_no or r.get("id") == run_no]
        if not chosen:
            raise NotFound(f"task {task_id} has no run {run_no}; see `agentboard runs {task_id}`")
    path = None
    for r in reversed(chosen):
        if r.get("log_path"):
            path = Path(r["log_path"])
            break
    if path is None:
        from agentboard.dispatch.spawn import log_path as default_log

        path = default_log(settings().home, slug, task_id)
    if not path.exists():
        raise NotFound(f"no worker log for {task_id} yet (expected at {path})")
    data = path.read_bytes()
    if chosen:  # the chosen run's part of the task's log (its repair and reminder parts included)
        data = _run_part(data, int(chosen[-1]["id"]))
    if tail:
        data = data[-tail:]
    if sys.stdout.isatty():  # a worker's bytes never act on the reader's terminal (title, clipboard, screen)
        from .output import printable

        data = printable(data.decode("utf-8", "replace")).encode("utf-8")
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


@click.command("gc")
@click.option("--event-retention-days", type=click.IntRange(0), default=None, metavar="N",
              help="prune events of finished tasks older than N days (default: setting, 30)")
@click.option("--log-retention-days", type=click.IntRange(0), default=None, metavar="N",
              help="remove worker logs older than N days (default: setting, 30)")
@click.option("--all-boards", is_flag=True, help="every board, not just the current one")
@click.option("--dry-run", is_flag=True, help="only show what would be removed")
@board_option
@json_option
@handle_errors
def gc(event_retention_days: int | None, log_retention_days: int | None, all_boards: bool, dry_run: bool,
       board: str | None, as_json: bool) -> None:
    """Remove finished tasks' scratch workspaces, finished races' losing attempts (worktree and
    branch), what purged tasks left (worktree, ab/ branch, logs), old logs and old events (never a
    dirty worktree, nor commits that would be lost)."""
    from agentboard.dispatch import gc as gcmod

    from .output import progress

    s = settings()
    with progress("workspaces", as_json=as_json) as bar:
        rep = gcmod.collect(
            db(), s.home, boards=None if all_boards else [existing_board(board)],
            log_retention_days=log_retention_days if log_retention_days is not None else s.log_retention_days,
            event_retention_days=event_retention_days if event_retention_days is not None else s.event_retention_days,
            dry_run=dry_run, progress=bar,
        )
    if as_json:
        emit_json(rep)
        if rep.get("unfinished"):
            sys.exit(6)
        return
    verb, pruned = ("would remove", "would prune") if dry_run else ("removed", "pruned")
    click.echo(f"{verb} {len(rep['workspaces_removed'])} scratch workspace(s), "
               f"{len(rep['worktrees_removed'])} worktree(s), {len(rep['branches_removed'])} branch(es), "
               f"{rep['logs_removed']} log(s); {pruned} {rep['events_pruned']} event(s)")
    if dry_run:
        for path in rep["workspaces_removed"] + rep["worktrees_removed"]:
            click.echo(f"would remove {path}")
    for b in rep["branches_removed"]:
        why = (f"attempt {b['n']} of race {b['race']}, not picked" if "race" in b
               else f"task {b['task']} no longer exists")
        click.echo(f"{verb} branch {b['branch']} in {b['repo']} ({why})")
    for k in rep["kept"]:
        click.echo(f"kept {k['path']}: {k['why']}" + (f"\n  {k['how']}" if k.get("how") else ""))
    if rep.get("unfinished"):  # the files above are gone; the database's part could not be done
        from agentboard.domain.errors import Unavailable

        raise Unavailable(f"gc removed what is listed above, but not the old events: {rep['unfinished']}")


@click.command("demo")
@click.option("--home", "home_dir", default=None, metavar="DIR",
              help="where to put the demo home: a new or empty folder (default: a new temp folder)")
@click.option("--timeout", type=float, default=120.0, help="give up after this many seconds")
@json_option
@handle_errors
def demo(home_dir: str | None, timeout: float, as_json: bool) -> None:
    """A self-contained run: three script agents, a fan-out/fan-in graph, no network, no LLM."""
    from agentboard.demo.run import run_demo

    out = run_demo(home_dir, timeout=timeout, echo=None if as_json else click.echo)
    if as_json:
        emit_json(out)
    if not out["ok"]:
        sys.exit(1)
