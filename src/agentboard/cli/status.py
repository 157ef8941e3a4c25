"""Status verbs a person uses on one or many tasks: unblock, archive, restore, reclaim, reopen,
release, and review (a person's verdict on a task in review)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from . import common
from .common import handle_errors, json_option, task_board_option


def _describe(task: dict[str, Any]) -> str:
    from .output import status

    return f"{task['id']}: {status(task['status'])}"


def _bulk_command(name: str, kernel_attr: str, doc: str, *, with_reason: bool = False) -> click.Command:
    def fn_for() -> Callable[..., Any]:
        import importlib

        module, _, attr = kernel_attr.partition(":")
        return getattr(importlib.import_module(f"agentboard.kernel.{module}"), attr)  # type: ignore[no-any-return]

    @handle_errors
    def run(task_ids: tuple[str, ...], board: str | None, as_json: bool, reason: str | None = None) -> None:
        from agentboard.domain.errors import InvalidInput

        ids = common.split_ids(task_ids)
        if not ids:
            raise InvalidInput(f"give at least one task id: agentboard {name} ID...")
        kwargs: dict[str, Any] = {"actor": common.actor()}
        if with_reason and reason:
            kwargs["reason"] = reason
        common.run_bulk(fn_for(), board, ids, as_json=as_json, describe=_describe, **kwargs)

    params: list[click.Parameter] = [
        click.Argument(["task_ids"], nargs=-1, metavar="ID..."),
        click.Option(["--board", "board"], default=None, help=common.TASK_BOARD_HELP),
        click.Option(["--json", "as_json"], is_flag=True, help="print one JSON document"),
    ]
    if with_reason:
        params.append(click.Option(["--reason"], default=None, help="why (recorded in the event)"))
    return click.Command(name, callback=run, params=params, help=doc, short_help=doc.split("\n")[0])


unblock = _bulk_command("unblock", "tasks:unblock",
                        "Blocked -> ready/todo (resets the failure counter).")
archive = _bulk_command("archive", "tasks:archive",
                        "Hide task(s); an open run is closed as reclaimed.")
restore = _bulk_command("restore", "tasks:restore", "Archived -> todo/ready.")
reclaim = _bulk_command("reclaim", "runs:reclaim",
                        "Running -> ready: close the current run as reclaimed.", with_reason=True)
reopen = _bulk_command("reopen", "tasks:reopen",
                       "Done -> ready/todo; its ready children drop back to todo.", with_reason=True)
release = _bulk_command("release", "tasks:release", "Triage -> todo/ready.")


@click.command("review")
@click.argument("task_id", metavar="ID")
@click.option("--approve", is_flag=True, help="accept the work: review -> done")
@click.option("--request-changes", "changes", default=None, metavar="FEEDBACK",
              help="send it back to ready with feedback")
@click.option("--reject", "rejection", default=None, metavar="REASON", help="review -> blocked (rejected)")
@click.option("--note", default=None, metavar="TEXT", help="a remark recorded with an approval")
@click.option("--score", default=None, type=click.IntRange(0, 100), metavar="N", help="how good the work is")
@click.option("--pick", default=None, type=click.IntRange(1), metavar="N",
              help="a race: approve attempt N as the winner (with --approve)")
@task_board_option
@json_option
@handle_errors
def review(task_id: str, approve: bool, changes: str | None, rejection: str | None,
           note: str | None, score: int | None, pick: int | None, board: str | None, as_json: bool) -> None:
    """A verdict on a task in review: exactly one of --approve, --request-changes, --reject.

    Inside a review run (a reviewer agent) the verdict answers that run: it is written to
    .board/review-verdict.json and applied when the run ends."""

    from agentboard.domain.errors import InvalidInput

    chosen = [v for v in (approve or None, changes, rejection) if v is not None]
    if len(chosen) != 1:
        raise InvalidInput("give exactly one of --approve, --request-changes FEEDBACK or --reject REASON")
    if pick is not None and not approve:
        raise InvalidInput("--pick N approves attempt N of a race: give it with --approve")
    if approve:
        verdict, text = "approved", note or ""
    elif changes is not None:
        verdict, text = "changes_requested", changes
    else:
        verdict, text = "rejected", rejection or ""
    me = common.me()
    if me.review_run and me.workspace:
        _answer_review_run(task_id, verdict, text, score, as_json, pick)
        return
    slug = common.task_board(task_id, board)
    from agentboard.dispatch import finish

    if pick is not None:  # a person's approval of a race is its pick
        picked = finish.pick(common.db(), slug, task_id, pick, actor=common.actor())
        if as_json:
            common.emit_json(picked)
        else:
            click.echo(f"{task_id}: picked attempt {pick} -> {picked.get('status')}"
                       + (f" ({picked['integration']})" if picked.get("integration") else ""))
        return

    task = finish.review(common.db(), slug, task_id, verdict, text, score=score,
                            reviewer=common.actor(), actor=common.actor())
    refused = verdict == "approved" and task.get("integration") == "refused"
    if as_json:
        common.emit_json(task)
    elif refused:
        click.echo(f"{task_id}: not approved -> blocked (needs input): {task.get('block_reason')}")
    else:
        line = f"{task_id}: {verdict.replace('_', ' ')} -> {_describe(task).split(': ', 1)[1]}"
        if verdict == "approved" and task.get("integration"):
            line += f"; branch {task['integration'].replace('_', ' ')}" + (f": {task['pr_url']}" if task.get("pr_url") else "")
        click.echo(line)
    if refused:  # the approval did not happen: a script must not carry on as if it had
        raise SystemExit(4)


def _answer_review_run(task_id: str, verdict: str, text: str, score: int | None, as_json: bool,
                       pick: int | None = None) -> None:
    """A reviewer agent's verdict on the task its review run is for."""
    from agentboard.domain.errors import Forbidden, InvalidInput
    from agentboard.protocol import review

    me = common.me()
    own = me.task
    if task_id != own or me.workspace is None:
        raise Forbidden(f"this review run reviews task {own}, not {task_id}")
    if score is None:
        raise InvalidInput("a reviewer's verdict needs --score N (0-100): how good the work is")
    path = review.write_verdict(me.workspace, {"verdict": verdict, "score": score, "summary": text,
                                               **({"pick": pick} if pick is not None else {})})
    if as_json:
        common.emit_json({"task_id": task_id, "verdict": verdict, "score": score, "written": str(path)})
    else:
        click.echo(f"{task_id}: {verdict.replace('_', ' ')} written to {path}; applied when this review run ends")
