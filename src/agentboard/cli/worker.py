"""Worker verbs: claim, heartbeat, complete, block.

Inside a worker process (AGENTBOARD_TASK and AGENTBOARD_RUN_ID set by the dispatcher) these
default to the worker's own task and pass its run id, so a late call from a reclaimed run is
refused instead of overwriting the current attempt; there they call the API with the run token
(:func:`common.remote`), elsewhere the kernel on the home's database. This module imports only
click at load time; the kernel loads when a command runs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from . import common
from .common import handle_errors, json_option, task_board_option

if TYPE_CHECKING:
    from agentboard.store.engine import Database


@click.command("claim")
@click.argument("task_id", metavar="ID")
@click.option("--ttl", default=None, metavar="DUR", help="claim lifetime (30s, 30m, 2h, 1d or seconds)")
@task_board_option
@json_option
@handle_errors
def claim(task_id: str, ttl: str | None, board: str | None, as_json: bool) -> None:
    """Claim a ready task by hand: opens a run and prints its id."""
    from agentboard.domain import model
    from agentboard.kernel import runs

    slug = common.task_board(task_id, board)
    who = common.actor()
    out = runs.claim(common.db(), slug, task_id, ttl=model.duration(ttl),
                     host=common.settings().host_id, pid=None, actor=who,
                     lock=f"{runs.HAND_CLAIM}{who}:{time.time()}")
    if as_json:
        common.emit_json(out)
        return
    from .output import when

    click.echo(f"{task_id}: claimed, run {out['run_id']} (claim expires {when(out['claim_expires'])})")
    click.echo(f"report as this run with: AGENTBOARD_TASK={task_id} AGENTBOARD_RUN_ID={out['run_id']}")


@click.command("heartbeat")
@click.argument("task_id", required=False, metavar="[ID]")
@click.option("--note", default=None, metavar="TEXT", help="what the worker is doing")
@click.option("--ttl", default=None, metavar="DUR", help="extend the claim by this much")
@task_board_option
@json_option
@handle_errors
def heartbeat(task_id: str | None, note: str | None, ttl: str | None, board: str | None,
              as_json: bool) -> None:
    """Record liveness for a running task and extend its claim."""
    from agentboard.domain import model
    from agentboard.kernel import runs

    tid = common.worker_task(task_id)
    api = common.remote()
    if api is not None:
        out = api.heartbeat(tid, run_id=common.worker_run_id(task_id), note=note, ttl=model.duration(ttl),
                            board=board)
    else:
        out = runs.heartbeat(common.db(), common.task_board(tid, board), tid,
                             run_id=common.worker_run_id(task_id), note=note, ttl=model.duration(ttl),
                             actor=common.actor(), messages=True)
    common.emit(out, as_json, f"{tid}: heartbeat recorded (run {out['run_id']})" + _messages_text(out))
    if out.get("stop") and not as_json:  # a spent budget: the worker must stop now
        from .output import printable

        click.echo(printable(f"STOP: {out.get('stop_reason')}"), err=True)


def _messages_text(out: dict[str, Any]) -> str:
    """The new comments a heartbeat brought, as lines a worker reads in its shell."""
    msgs = out.get("messages") or []
    if not msgs:
        return ""
    lines = [f"\n{len(msgs)} new message(s) on your task (answer with `agentboard comment ID \"...\"`):"]
    for m in msgs:
        lines.append(f"--- #{m['id']} from {m['author']}:\n{m['body']}")
    return "\n".join(lines)


def _complete_one(db: Database, board: str, task_id: str, **kwargs: Any) -> dict[str, Any]:
    from agentboard.dispatch import finish

    run_id = common.worker_run_id(task_id)
    return finish.complete(db, board, task_id, run_id=run_id, **kwargs)


def _describe_done(task: dict[str, Any]) -> str:
    from .output import status

    if task.get("pending_verification"):
        return (f"{task['id']}: held until verification passes (the verify commands run when this worker "
                "exits; the task completes only if they pass)")
    if task.get("pending_integration"):
        return (f"{task['id']}: held until its branch is integrated (when this worker exits, the board "
                "merges it into its base branch; the task is done once that succeeded)")
    if task.get("pending") in ("spawn", "exit"):
        return f"{task['id']}: received; applied when this worker exits"
    if task.get("status") == "kept":  # the board could not take it (remote.KEPT)
        return f"{task['id']}: {task.get('note')}"
    line = f"{task['id']}: {status(task['status'])}"
    promoted = task.get("promoted") or []
    if promoted:
        ids = [p if isinstance(p, str) else p.get("id", "?") for p in promoted]
        line += f"; now ready: {', '.join(ids)}"
    return line


@click.command("complete")
@click.argument("task_ids", nargs=-1, metavar="[ID]...")
@click.option("--summary", default=None, metavar="S", help="the hand-off: what was done")
@click.option("--metadata", default=None, metavar="JSON", help="a JSON object (files changed, links, ...)")
@click.option("--result", default=None, metavar="LINE", help="one short result line")
@click.option("--usage", default=None, metavar="JSON",
              help='{"input_tokens": N, "output_tokens": N, "cost_usd": X}')
@task_board_option
@json_option
@handle_errors
def complete(task_ids: tuple[str, ...], summary: str | None, metadata: str | None,
             result: str | None, usage: str | None, board: str | None, as_json: bool) -> None:
    """Finish task(s): running -> done (or review); a person may close ready/blocked/review.

    Inside a worker, ID defaults to the worker's own task and the run id is passed.
    """
    from agentboard.domain.errors import InvalidInput

    ids = common.split_ids(task_ids) or [common.worker_task(None)]
    meta = common.parse_json_object(metadata, "--metadata")
    use = common.parse_json_object(usage, "--usage")
    if len(ids) > 1 and (summary or meta or result or use):
        raise InvalidInput(
            "a summary, metadata, result or usage belongs to one run: complete the tasks one at a "
            "time to give each its own hand-off, or close them together without one"
        )
    api = common.remote()
    if api is not None:
        common.run_each(lambda tid: api.complete(tid, run_id=common.worker_run_id(tid), summary=summary,
                                                 metadata=meta, result=result, usage=use, board=board),
                        ids, as_json=as_json, describe=_describe_done)
        return
    common.run_bulk(_complete_one, board, ids, as_json=as_json, describe=_describe_done,
                    summary=summary, metadata=meta, result=result, usage=use, actor=common.actor())


def _block_one(db: Database, board: str, task_id: str, reason: str, *, kind: str | None,
               actor: str, on: str | None = None) -> dict[str, Any]:
    from agentboard.kernel import tasks

    run_id = common.worker_run_id(task_id)
    if kind is None:
        kind = "dependency" if on else ("needs_input" if common.own_task(task_id) else "manual")
    return tasks.block(db, board, task_id, reason, kind=kind, run_id=run_id, on=on, actor=actor)


@click.command("block")
@click.argument("args", nargs=-1, metavar="[ID] REASON [ID]...")
@click.option("--kind", default=None,
              type=click.Choice(["needs_input", "gave_up", "rejected", "budget", "dependency", "manual"]),
              help="default: needs_input from a worker, manual from a person")
@click.option("--ids", "more_ids", multiple=True, metavar="ID", help="more tasks to block with the same reason")
@click.option("--on", "on", default=None, metavar="TASK",
              help="kind dependency: wait in todo for TASK and resume by itself when it is done")
@task_board_option
@json_option
@handle_errors
def block(args: tuple[str, ...], kind: str | None, more_ids: tuple[str, ...], on: str | None, board: str | None,
          as_json: bool) -> None:
    """Block task(s) with a reason: they wait for a person or another agent.

    Inside a worker, `agentboard block "reason"` blocks the worker's own task. With
    `--on TASK` (kind dependency) the task waits in todo and resumes by itself when TASK is done.
    """
    from agentboard.domain import model
    from agentboard.domain.errors import InvalidInput

    own = common.me().task
    if len(args) == 1 and own:
        ids, reason = [own], args[0]
    elif len(args) >= 2:
        ids, reason = [args[0], *args[2:]], args[1]
    else:
        raise InvalidInput('give the task id and a reason: agentboard block ID "what it waits for"')
    model.plain(reason, "reason")  # a person's or a worker's reason: no terminal controls (the API's rule)
    ids = common.split_ids([*ids, *more_ids])
    api = common.remote()
    if api is not None:
        common.run_each(lambda tid: api.block(tid, reason, run_id=common.worker_run_id(tid), board=board, on=on,
                                              kind=kind or ("dependency" if on else
                                                            "needs_input" if common.own_task(tid) else "manual")),
                        ids, as_json=as_json, describe=lambda t: f"{t['id']}: {t.get('note')}" if t.get("status") == "kept"
                        else f"{t['id']}: blocked ({t.get('block_kind')})")
        return
    common.run_bulk(_block_one, board, ids, reason, as_json=as_json, kind=kind, actor=common.actor(), on=on,
                    describe=lambda t: f"{t['id']}: blocked ({t.get('block_kind')})")
