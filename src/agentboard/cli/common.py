"""Shared CLI plumbing: settings, database, board resolution, output, error mapping.

A task id names one task in the whole installation: a verb given task ids acts on each task's
own board (:func:`task_board`); only board-wide verbs (``list``, ``create``, ``watch``, …) use
``--board`` / AGENTBOARD_BOARD / the current board (:func:`resolve_board`).

Inside a worker (:func:`agentboard.remote.worker_mode`: the dispatcher gave it the API's URL
and a run token, never the home) the worker verbs call the API through :func:`remote` and every
other verb is refused: :func:`settings` and :func:`db` are not available there.

Every command uses :func:`command` (or applies :func:`handle_errors`) so kernel errors become one
line on stderr and the documented exit code (0 ok, 1 unexpected, 2 invalid input, 3 not found,
4 conflict, 5 unauthorized/forbidden, 6 unavailable), never a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:  # imported when a command runs, so `agentboard --version` stays fast
    from agentboard.config import Settings
    from agentboard.domain.worker_env import WorkerEnv
    from agentboard.remote import WorkerClient
    from agentboard.store.engine import Database

F = TypeVar("F", bound=Callable[..., Any])

_state: dict[str, Any] = {}

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}


class Group(click.Group):
    """A command group whose --help gives each command's whole first sentence (wrapped to the
    terminal) instead of clipping it with "..."."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=300)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def group(name: str) -> Callable[[Callable[..., Any]], Group]:
    """``@common.group("boards")``: a sub-command group with -h/--help and full command summaries."""
    return click.group(name, cls=Group, context_settings=HELP_OPTIONS)


@contextlib.contextmanager
def ctrl_c_flag() -> Iterator[threading.Event]:
    """Ctrl-C (SIGINT) as a flag that a loop reads between its steps, instead of a
    ``KeyboardInterrupt`` raised wherever the main thread happens to be: inside the database
    pool's locked sections it would leave a lock held that the process's exit then waits on
    forever. Off the main thread, a flag nobody sets (signals reach only the main thread)."""
    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: flag.set())
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def in_worker() -> bool:
    """Whether this process is a worker that reaches the board only through the API."""
    from agentboard.remote import worker_mode

    return worker_mode()


def remote() -> WorkerClient | None:
    """Inside a worker: the API client its verbs call instead of the kernel; else ``None``.

    A worker without the API's URL and token gets :class:`Unavailable` (exit 6)."""
    if "remote" not in _state:
        from agentboard.remote import WorkerClient

        client = WorkerClient.from_env() if in_worker() else None
        if client is not None:  # a call that waits for the board says so, once
            client.on_retry = lambda why: click.echo(f"agentboard: {why}", err=True)
        _state["remote"] = client
    return _state["remote"]  # type: ignore[no-any-return]


def settings() -> Settings:
    """The settings of the current home (config.toml and AGENTBOARD_*), loaded once.

    Inside a worker there is no home: :class:`Forbidden` (exit 5)."""
    if "settings" not in _state:
        from agentboard import config

        if in_worker():
            from agentboard.domain.errors import Forbidden

            raise Forbidden("a worker reaches the board only through the API with its run token; "
                            "this verb needs the board's home and is not available inside a worker")

        _state["settings"] = config.load()
    return _state["settings"]  # type: ignore[no-any-return]


def db() -> Database:
    """The open, migrated database of the current home (created on first use)."""
    if "db" not in _state:
        from agentboard.client import open_home

        _state["db"] = open_home(settings())
    return _state["db"]  # type: ignore[no-any-return]


def home() -> Path:
    return settings().home


def current_board_file() -> Path:
    return home() / "current_board"


def resolve_board(explicit: str | None) -> str:
    """--board, then AGENTBOARD_BOARD, then the board saved by `boards switch`, then default."""
    from agentboard.domain import model

    value = explicit or me().board
    if not value and not in_worker():
        f = current_board_file()
        if f.exists():
            value = f.read_text().strip() or None
    return model.board_slug(value or "default")


def task_board(task_id: str, explicit: str | None = None) -> str:
    """The board that holds ``task_id``, wherever it lives (exit 3 if none does).

    ``--board`` (``explicit``) need not be given; if it is, it must name the task's board (else
    exit 2). AGENTBOARD_BOARD and the current board never narrow a task id.
    """
    from agentboard.kernel import lookups

    return _own_board("task", task_id, explicit, lookups.task_board)


def goal_board(goal_id: str, explicit: str | None = None) -> str:
    """The board that holds ``goal_id``, wherever it lives (exit 3 if none does): goal ids are
    unique in the home like task ids, and ``--board`` is checked the same way (:func:`task_board`)."""
    from agentboard.kernel import lookups

    return _own_board("goal", goal_id, explicit, lookups.goal_board)


def _own_board(kind: str, ident: str, explicit: str | None, lookup: Callable[[Database, str], str]) -> str:
    """The board ``lookup`` finds for the task or goal ``ident``; a given ``--board`` must exist and be it."""
    from agentboard.domain import model
    from agentboard.domain.errors import InvalidInput

    if explicit:
        from agentboard.domain.errors import NotFound
        from agentboard.kernel import boards

        try:
            boards.get(db(), model.board_slug(explicit))
        except NotFound:
            raise NotFound(f"there is no board {explicit!r}: leave out --board (a {kind} id finds its own board), "
                           "or see `agentboard boards list`") from None
    slug = lookup(db(), ident)
    if explicit and model.board_slug(explicit) != slug:
        raise InvalidInput(f"{kind} {ident} is on board {slug!r}, not {model.board_slug(explicit)!r}; "
                           f"leave out --board (a {kind} id finds its own board)")
    return slug


def worker_task(explicit: str | None) -> str:
    """The task a worker verb acts on: the argument, else AGENTBOARD_TASK."""
    from agentboard.domain.errors import InvalidInput

    value = explicit or me().task
    if not value:
        raise InvalidInput("no task id given and AGENTBOARD_TASK is not set")
    return value


def worker_run_id(explicit_task: str | None) -> int | None:
    """The run id a worker passes: AGENTBOARD_RUN_ID when acting on its own task."""
    env = me()
    if explicit_task and explicit_task != env.task:
        return None
    return env.run_id


def me() -> WorkerEnv:
    """The worker identity in this process's environment (``domain/worker_env.py``; empty for a
    person's shell, apart from ``AGENTBOARD_BOARD`` / ``AGENTBOARD_ACTOR`` if set)."""
    from agentboard.domain.worker_env import WorkerEnv

    return WorkerEnv.from_environ()


def actor() -> str:
    env = me()
    return env.actor or env.profile or ("worker" if env.task else os.environ.get("USER", "person"))


def own_task(task_id: str) -> bool:
    """Whether ``task_id`` is the worker's own task (AGENTBOARD_TASK)."""
    task = me().task
    return bool(task) and task_id == task


def fail(message: str, code: int) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def handle_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from agentboard.domain.errors import AgentboardError

        try:
            return fn(*args, **kwargs)
        except AgentboardError as exc:
            fail(exc.message, exc.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except KeyboardInterrupt:
            sys.exit(130)
        except BrokenPipeError:  # the reader went away (`| head`): not an error
            try:
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep the interpreter quiet on exit
            except OSError:
                pass
            sys.exit(0)
        except Exception as exc:  # unexpected: still one line, exit 1
            from agentboard.domain.errors import Unavailable
            from agentboard.store.engine import DISK_FULL, disk_full

            if disk_full(exc):  # a full disk outside a transaction (a file, a migration)
                fail(DISK_FULL, Unavailable.exit_code)
            if os.environ.get("AGENTBOARD_DEBUG"):
                raise
            fail(f"{type(exc).__name__}: {exc} (set AGENTBOARD_DEBUG=1 for a traceback)", 1)
    return wrapper  # type: ignore[return-value]


def board_option(fn: F) -> F:
    return click.option("--board", "board", default=None, help="board slug (default: AGENTBOARD_BOARD, the current board, or 'default')")(fn)


TASK_BOARD_HELP = "the task's board, if you want it checked (a task id finds its own board)"


def task_board_option(fn: F) -> F:
    """``--board`` of a verb given task ids: optional, and it must name the tasks' board."""
    return click.option("--board", "board", default=None, help=TASK_BOARD_HELP)(fn)


def goal_board_option(fn: F) -> F:
    """``--board`` of a verb given a goal id: optional, and it must name the goal's board."""
    return click.option("--board", "board", default=None,
                        help="the goal's board, if you want it checked (a goal id finds its own board)")(fn)


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="print one JSON document")(fn)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str, ensure_ascii=False))


def emit(data: Any, as_json: bool, line: str) -> None:
    """A write verb's answer: ``data`` as one JSON document with --json, else one human line."""
    if as_json:
        emit_json(data)
    else:
        from .output import printable

        click.echo(printable(line))


def parse_json_object(value: str | None, what: str = "--metadata") -> dict[str, Any] | None:
    from agentboard.domain.errors import InvalidInput

    if value is None:
        return None
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{what} is not valid JSON ({exc.msg} at position {exc.pos}); pass an object like '{{\"k\": 1}}'") from None
    except RecursionError:
        raise InvalidInput(f"{what} is nested too deeply; pass a flatter JSON object") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{what} must be a JSON object like '{{\"k\": 1}}'")
    return data


def reset() -> None:
    """Forget the cached settings and database (in-process callers that switch homes)."""
    db_ = _state.pop("db", None)
    _state.clear()
    if db_ is not None:
        try:
            db_.close()
        except Exception:  # pragma: no cover - closing is best effort
            pass


def read_text(text: str | None, path: str | None, what: str = "--body") -> str | None:
    """The value of a ``--body TEXT | --body-file F`` pair (``-`` reads stdin)."""
    from agentboard.domain.errors import InvalidInput

    if text is not None and path is not None:
        raise InvalidInput(f"give either {what} or {what}-file, not both")
    if path is None:
        return text
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"{what}-file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{what}-file {path}: cannot read it ({exc})") from None


def exit_code_for(code: str) -> int:
    """The exit code of a kernel error code name (as found in bulk results)."""
    from agentboard.domain import errors

    for cls in (errors.InvalidInput, errors.NotFound, errors.Conflict, errors.InvalidTransition,
                errors.StaleRun, errors.Unauthorized, errors.Forbidden, errors.TooLarge, errors.TooMany,
                errors.Unavailable):
        if cls.code == code:
            return cls.exit_code
    return 1


def split_ids(values: tuple[str, ...] | list[str]) -> list[str]:
    """Task ids from repeated/comma-separated arguments, in order, without duplicates."""
    out: list[str] = []
    for value in values:
        for part in value.replace(",", " ").split():
            if part not in out:
                out.append(part)
    return out


def run_bulk(
    fn: Callable[..., dict[str, Any]],
    board: str | None,
    ids: list[str],
    *args: Any,
    as_json: bool = False,
    describe: Callable[[dict[str, Any]], str] | None = None,
    **kwargs: Any,
) -> None:
    """Apply a kernel verb to each id, on the id's own board (``board``: the --board given, which
    each id must be on); report each result; exit non-zero if any failed.

    One id: the kernel's error is the one-line message and decides the exit code, and --json
    prints the task. Several: every id is tried, each in its own transaction, successes print
    on stdout, failures on stderr (--json: one list of per-id results), and the exit code is
    the first failure's.
    """
    from agentboard.kernel.tasks import bulk

    def on_its_board(db_: Database, _board: str, task_id: str, *a: Any, **kw: Any) -> dict[str, Any]:
        return fn(db_, task_board(task_id, board), task_id, *a, **kw)

    if len(ids) == 1:
        _print_results([], ids, as_json, describe, one=on_its_board(db(), "", ids[0], *args, **kwargs))
        return
    from .output import progress

    with progress("tasks", as_json=as_json) as bar:
        done = 0

        def counted(db_: Database, _board: str, task_id: str, *a: Any, **kw: Any) -> dict[str, Any]:
            nonlocal done
            try:
                return on_its_board(db_, _board, task_id, *a, **kw)
            finally:
                done += 1
                if bar is not None:
                    bar("tasks", done, len(ids))

        results = bulk(counted if bar is not None else on_its_board, db(), board or "", ids, *args, **kwargs)
    _print_results(results, ids, as_json, describe)


def run_each(apply: Callable[[str], dict[str, Any]], ids: list[str], *, as_json: bool = False,
             describe: Callable[[dict[str, Any]], str] | None = None) -> None:
    """:func:`run_bulk` for a worker: ``apply(task_id)`` is one API call; the same output and
    exit codes."""
    from agentboard.domain.errors import AgentboardError

    if len(ids) == 1:
        _print_results([], ids, as_json, describe, one=apply(ids[0]))
        return
    from .output import progress

    results: list[dict[str, Any]] = []
    with progress("tasks", as_json=as_json) as bar:
        for task_id in ids:
            try:
                task = apply(task_id)
                results.append({"id": task_id, "ok": True, "status": task.get("status"), "task": task})
            except AgentboardError as exc:
                results.append({"id": task_id, "ok": False, "error": {"code": exc.code, "message": exc.message}})
            if bar is not None:
                bar("tasks", len(results), len(ids))
    _print_results(results, ids, as_json, describe)


def _print_results(results: list[dict[str, Any]], ids: list[str], as_json: bool,
                   describe: Callable[[dict[str, Any]], str] | None, one: dict[str, Any] | None = None) -> None:
    if one is not None:
        if as_json:
            emit_json(one)
        else:
            click.echo(describe(one) if describe else f"{ids[0]}: {one.get('status')}")
        return
    failed = [r for r in results if not r["ok"]]
    if as_json:
        emit_json(results)
    else:
        for r in results:
            if r["ok"]:
                click.echo(describe(r["task"]) if describe else f"{r['id']}: {r['status']}")
            else:
                click.echo(f"error: {r['id']}: {r['error']['message']}", err=True)
        if failed and len(ids) > 1:
            click.echo(f"error: {len(failed)} of {len(ids)} failed", err=True)
    if failed:
        sys.exit(exit_code_for(failed[0]["error"]["code"]))


def existing_board(explicit: str | None) -> str:
    """Like :func:`resolve_board`, and the board must exist (read verbs that would show nothing)."""
    from agentboard.kernel import boards

    slug = resolve_board(explicit)
    boards.get(db(), slug)
    return slug
