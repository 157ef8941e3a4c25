"""`backup` and `restore` of a SQLite home (PostgreSQL: pg_dump, see docs/operations.md)."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from . import common
from .common import handle_errors, json_option

PG_HINT = ("this home uses PostgreSQL: back it up with `pg_dump -Fc -f agentboard.dump DBNAME` and restore "
           "with `pg_restore --clean -d DBNAME agentboard.dump` (docs/operations.md), or copy it with "
           "`agentboard export`")


@click.command("backup")
@click.argument("path", required=False, metavar="[PATH]")
@json_option
@handle_errors
def backup(path: str | None, as_json: bool) -> None:
    """Copy the database (consistent, while the dispatcher and API keep writing), the attachment
    files, the templates and config.toml into the new folder PATH (default: HOME/backups/<time>).
    A failed backup removes what it wrote."""
    from agentboard.domain.errors import InvalidInput
    from agentboard.store import backup as store_backup

    s = common.settings()
    if not s.is_sqlite:
        raise InvalidInput(PG_HINT)
    dest = Path(path).absolute() if path else None  # None: a new HOME/backups/<time>[-N]
    from .output import progress

    with progress("", as_json=as_json) as bar:
        info = store_backup.backup(s.home, s.db_path, dest, progress=bar)
    shown = path or info.path
    if info.integrity != "ok":
        common.fail(f"the copy in {shown} fails its integrity check ({info.integrity}); take it again", 1)
    common.emit(info.as_dict(), as_json,
                f"backed up {info.tasks} tasks, {info.events} events, {info.files} attachment file(s) and "
                f"{info.templates} template(s) to {shown} (integrity ok)")


@click.command("restore")
@click.argument("targets", nargs=-1, metavar="PATH | ID...")
@click.option("--force", is_flag=True, help="(PATH) replace a home that already holds tasks (its database is "
              "kept in HOME/backups/pre-restore-<time>/ first)")
@click.option("--board", "board", default=None, help=common.TASK_BOARD_HELP)
@json_option
@handle_errors
def restore(targets: tuple[str, ...], force: bool, board: str | None, as_json: bool) -> None:
    """Restore a backup folder (PATH, made by `agentboard backup`) as this home's database and
    files, or archived tasks (task ids) to todo/ready."""
    from agentboard.domain.errors import InvalidInput

    if len(targets) == 1 and ("/" in targets[0] or Path(targets[0]).exists()):
        _restore_backup(Path(targets[0]), force, as_json)
        return
    if force:
        raise InvalidInput("--force is for restoring a backup folder; task ids need no --force")
    from .status import restore as restore_tasks

    assert restore_tasks.callback is not None
    restore_tasks.callback(task_ids=targets, board=board, as_json=as_json)


def _restore_backup(path: Path, force: bool, as_json: bool) -> None:
    from agentboard.dispatch.planning import running_dispatchers
    from agentboard.domain.errors import Conflict, InvalidInput
    from agentboard.store import backup as store_backup

    s = common.settings()
    if not s.is_sqlite:
        raise InvalidInput(PG_HINT)
    busy = running_dispatchers(s.home)
    if busy:
        raise Conflict("a dispatcher is running on this home (" + ", ".join(busy) + "); stop it and "
                       "`agentboard serve` before restoring")
    held = store_backup.has_tasks(s.db_path)
    if held and not force:
        raise Conflict(f"{s.home} is a live home ({held} tasks); restoring would replace them. Pass --force "
                       "to restore anyway (the current database is kept in HOME/backups/pre-restore-<time>/)")
    from .output import progress

    with progress("", as_json=as_json) as bar:
        info = store_backup.restore(path.absolute(), s.home, s.db_path, keep_current=bool(held), progress=bar)
    common.emit(info.as_dict(), as_json,
                f"restored {info.tasks} tasks, {info.events} events, {info.files} attachment file(s) and "
                f"{info.templates} template(s) from {path}")
    if info.config_left is not None and not as_json:
        click.echo(f"note: the backup's settings were not restored; to use them: "
                   f"cp {shlex.quote(str(info.config_left))} {shlex.quote(str(s.home / 'config.toml'))}", err=True)
