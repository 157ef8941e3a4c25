"""`archive` (and `archive --purge`: remove a task and its rows for real) and `attach-rm`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from . import common
from .common import handle_errors, json_option, task_board_option

if TYPE_CHECKING:
    from agentboard.store.engine import Database


@click.command("archive")
@click.argument("task_ids", nargs=-1, metavar="ID...")
@click.option("--purge", is_flag=True, help="remove the task(s) and every row about them for real "
              "(runs, comments, events, attachments), their worker logs and workspaces, a clean worktree, "
              "and their ab/ branch when no commit would be lost (what is kept is listed); an audit event "
              "stays on the board")
@click.option("--force", is_flag=True, help="with --purge: also a running task (its worker on this host is "
              "stopped) or one with unfinished children")
@task_board_option
@json_option
@handle_errors
def archive(task_ids: tuple[str, ...], purge: bool, force: bool, board: str | None, as_json: bool) -> None:
    """Hide task(s); an open run is closed as reclaimed. With --purge, delete them for good."""
    from agentboard.domain.errors import InvalidInput

    if not purge:
        if force:
            raise InvalidInput("--force goes with --purge; archiving needs no --force")
        from .status import archive as archive_tasks

        assert archive_tasks.callback is not None
        archive_tasks.callback(task_ids=task_ids, board=board, as_json=as_json)
        return
    from agentboard.dispatch import gc as gcmod
    from agentboard.dispatch.liveness import stop_if_local
    from agentboard.kernel import purge as kernel_purge

    ids = common.split_ids(task_ids)
    if not ids:
        raise InvalidInput("give at least one task id: agentboard archive --purge ID...")
    s = common.settings()

    def one(db: Database, slug: str, task_id: str, **_: Any) -> dict[str, Any]:
        out = kernel_purge.purge(db, slug, task_id, force=force, actor=common.actor(), home=s.home)
        out["worker_stopped"] = stop_if_local(out.get("worker"), s.host_id)
        out.update(gcmod.after_purge(db, s.home, out))
        return out

    def describe(out: dict[str, Any]) -> str:
        n = sum(out["removed"].values())
        lines = [f"{out['id']}: purged ({n} rows removed)"]
        for path in out.get("files_removed", []):
            lines.append(f"  removed {path}")
        for b in out.get("branches_removed", []):
            lines.append(f"  removed branch {b['branch']} in {b['repo']}")
        for k in out.get("kept", []):
            lines.append(f"  kept {k['path']}: {k['why']}")
            lines.append(f"    {k['how']}")
        return "\n".join(lines)

    common.run_bulk(one, board, ids, as_json=as_json, describe=describe)


@click.command("attach-rm")
@click.argument("task_id", metavar="ID")
@click.argument("which", metavar="NAME|ATTACHMENT_ID")
@task_board_option
@json_option
@handle_errors
def attach_rm(task_id: str, which: str, board: str | None, as_json: bool) -> None:
    """Remove an attachment from a task (its record and its file)."""
    from agentboard.kernel import attachments

    slug = common.task_board(task_id, board)
    out = attachments.remove_attachment(common.db(), slug, task_id, which, home=common.home(), actor=common.actor())
    common.emit(out, as_json, f"{task_id}: removed attachment {out['name']}")
