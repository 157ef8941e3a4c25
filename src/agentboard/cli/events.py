"""Following the event log by cursor: `tail ID` (one task) and `watch` (the whole board)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from agentboard.domain.errors import one_line
from agentboard.observe.outage import PAUSE_FIRST, PAUSE_MAX  # a dispatcher's pauses in an outage

from . import common
from .common import board_option, handle_errors, task_board_option

POLL_SECONDS = 0.2

json_lines_option = click.option("--json", "as_json", is_flag=True,
                                 help="print each event as one JSON object per line")


def _follow(
    fetch: Callable[[int], Sequence[Mapping[str, Any]]],
    cursor: int,
    *,
    once: bool,
    as_json: bool,
    keep: Callable[[Sequence[Mapping[str, Any]]], Sequence[Mapping[str, Any]]] | None = None,
    with_task: bool = True,
    what: str = "watch",
) -> None:
    """Print events after ``cursor`` until interrupted (Ctrl-C, read as a flag between reads:
    :func:`common.ctrl_c_flag`) or once, with ``--once``.

    While the database (or the API) cannot be reached — a restart, a failover — the feed keeps its
    cursor and tries again after 1, 2, 4, then 8 s, saying so on stderr once when it starts and
    once when it is back; it then goes on after the last event it printed, so none is missed or
    printed twice. ``--once`` has no feed to keep: the error ends it (exit 6)."""
    from agentboard.domain.errors import Unavailable

    from .output import event_line

    down_since: float | None = None
    tries = 0
    with common.ctrl_c_flag() as stop:
        while not stop.is_set():
            try:
                batch = fetch(cursor)
                shown = keep(batch) if keep and batch else batch
            except Unavailable as exc:
                if once:
                    raise
                tries += 1
                if down_since is None:
                    down_since = time.monotonic()
                    click.echo(f"{what}: the database cannot be reached ({one_line(exc.message)}); reconnecting "
                               f"every {PAUSE_MAX:.0f} s at most, to go on after event {cursor} (Ctrl-C to stop)",
                               err=True)
                stop.wait(min(PAUSE_MAX, PAUSE_FIRST * (1 << min(tries - 1, 8))))
                continue
            if down_since is not None:
                click.echo(f"{what}: reconnected after {time.monotonic() - down_since:.0f} s; going on after "
                           f"event {cursor}", err=True)
                down_since, tries = None, 0
            if batch:
                for ev in shown:
                    if as_json:
                        click.echo(json.dumps(ev, default=str, ensure_ascii=False))
                    else:
                        click.echo(event_line(ev, with_task=with_task))
                cursor = batch[-1]["id"]
                if len(batch) >= 500:
                    continue  # more are waiting: read them before sleeping
            if once:
                return
            stop.wait(POLL_SECONDS)


@click.command("tail")
@click.argument("task_id", required=False, metavar="[ID]")
@click.option("--since", default=0, type=click.IntRange(0), metavar="N", help="start after event id N (default: the beginning)")
@click.option("--once", is_flag=True, help="print what is there and exit")
@task_board_option
@json_lines_option
@handle_errors
def tail(task_id: str | None, since: int, once: bool, board: str | None, as_json: bool) -> None:
    """Follow one task's events (Ctrl-C to stop); --json prints one object per line."""
    from agentboard.kernel import queries

    tid = common.worker_task(task_id)
    api = common.remote()
    if api is not None:
        api.events(tid, 0, board=board)  # not found → exit 3 before following
        _follow(lambda c: api.events(tid, c, board=board), since, once=once, as_json=as_json, with_task=False,
                what="tail")
        return
    slug = common.task_board(tid, board)  # not found → exit 3 before following
    db = common.db()
    _follow(lambda c: queries.events_after(db, slug, c, task_id=tid), since, once=once,
            as_json=as_json, with_task=False, what="tail")


@click.command("watch")
@click.option("--assignee", default=None, metavar="P", help="only tasks assigned to P")
@click.option("--tenant", default=None, metavar="T", help="only tasks of tenant T")
@click.option("--kinds", default=None, metavar="K,K", help="only these event kinds (comma-separated)")
@click.option("--since", default=None, type=int, metavar="N",
              help="start after event id N (default: now, only new events)")
@click.option("--once", is_flag=True, help="print what is there and exit")
@board_option
@json_lines_option
@handle_errors
def watch(assignee: str | None, tenant: str | None, kinds: str | None, since: int | None,
          once: bool, board: str | None, as_json: bool) -> None:
    """Print the board's events live as they happen (Ctrl-C to stop)."""
    from agentboard.domain import events as event_kinds
    from agentboard.domain.errors import InvalidInput
    from agentboard.kernel import boards, queries

    slug = common.resolve_board(board)
    db = common.db()
    boards.get(db, slug)  # unknown board → exit 3
    kind_list = [k.strip() for k in (kinds or "").split(",") if k.strip()]
    unknown = [k for k in kind_list if k not in event_kinds.ALL]
    if unknown:
        raise InvalidInput(f"unknown event kind '{unknown[0]}'; use one of {', '.join(sorted(event_kinds.ALL))}")
    if since is not None and since < 0:
        raise InvalidInput("--since must be an event id (0 or more)")
    cursor = queries.last_event_id(db) if since is None else since

    keep = None
    if assignee or tenant:
        def keep(batch: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
            owners = queries.task_owners(db, slug, [e["task_id"] for e in batch if e.get("task_id")])
            out = []
            for e in batch:
                o = owners.get(e.get("task_id") or "")
                if o is None:
                    continue
                if assignee and o["assignee"] != assignee:
                    continue
                if tenant and o["tenant"] != tenant:
                    continue
                out.append(e)
            return out

    if "completed" in kind_list and "approved" not in kind_list:
        kind_list.append("approved")  # a task finished through review completes with its approval
    _follow(lambda c: queries.events_after(db, slug, c, kinds=kind_list or None), cursor,
            once=once, as_json=as_json, keep=keep)
