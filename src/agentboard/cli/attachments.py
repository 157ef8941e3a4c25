"""Files attached to tasks: `attach ID FILE` and `attachments ID`."""

from __future__ import annotations

import click

from . import common
from .common import handle_errors, json_option, task_board_option


@click.command("attach")
@click.argument("task_id", metavar="ID")
@click.argument("path", metavar="FILE")
@click.option("--name", default=None, help="store it under this name (default: the file's name)")
@task_board_option
@json_option
@handle_errors
def attach(task_id: str, path: str, name: str | None, board: str | None, as_json: bool) -> None:
    """Copy FILE next to the task (size-capped) and record it."""
    from agentboard.kernel import attachments

    api = common.remote()
    if api is not None:
        from pathlib import Path

        out = api.attach(task_id, Path(path), name=name, board=board)
        common.emit(out, as_json, f"{task_id}: attached {out['name']} ({out['size']} bytes) at {out['path']}")
        return
    slug = common.task_board(task_id, board)
    s = common.settings()
    out = attachments.attach(common.db(), slug, task_id, path, home=s.home, name=name,
                             max_bytes=s.attachment_max_bytes, actor=common.actor())
    common.emit(out, as_json, f"{task_id}: attached {out['name']} ({out['size']} bytes) at {out['path']}")


@click.command("attachments")
@click.argument("task_id", required=False, metavar="[ID]")
@task_board_option
@json_option
@handle_errors
def attachments(task_id: str | None, board: str | None, as_json: bool) -> None:
    """List a task's attachments."""
    from agentboard.kernel import attachments as kernel_attachments

    tid = common.worker_task(task_id)
    api = common.remote()
    if api is not None:
        rows = api.attachments(tid, board=board)
    else:
        rows = kernel_attachments.list_attachments(common.db(), common.task_board(tid, board), tid)
    if as_json:
        common.emit_json(rows)
        return
    from .output import table

    table(["id", "name", "size", "sha256", "path"],
          [(a["id"], a["name"], a["size"], (a.get("sha256") or "")[:12], a["path"]) for a in rows],
          status_column=None, empty=f"{tid} has no attachments")
