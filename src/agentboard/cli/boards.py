"""`boards list|create|switch|show|set|rename|rm|restore|checks|paths`: isolated queues in one home,
and the named checks and paths an admin configures on a board for members to pick by name."""

from __future__ import annotations

from typing import Any

import click

from . import common
from .common import board_option, handle_errors, json_option


def _current() -> str:
    try:
        return common.resolve_board(None)
    except Exception:  # a broken saved board: fall back to the default
        return "default"


def _save_current(slug: str) -> None:
    f = common.current_board_file()
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(slug + "\n")


@common.group("boards")
def boards() -> None:
    """Boards: isolated queues (slug, name, target directory); one home holds many."""


@boards.command("list")
@click.option("--archived", is_flag=True, help="include archived boards")
@json_option
@handle_errors
def list_(archived: bool, as_json: bool) -> None:
    """Every board with its task count; * marks the current one."""
    from agentboard.kernel import boards as kb

    rows = kb.list_boards(common.db(), include_archived=archived)
    current = _current()
    if as_json:
        common.emit_json([{**r, "current": r["slug"] == current} for r in rows])
        return
    from .output import table

    table(["", "slug", "name", "tasks", "workdir", "archived"],
          [("*" if r["slug"] == current else " ", r["slug"], r["name"], r.get("task_count", 0),
            r.get("default_workdir"), r["archived"]) for r in rows],
          status_column=None)


@boards.command("create")
@click.argument("slug")
@click.option("--name", default=None, help="display name (default: the slug)")
@click.option("--description", default="", help="what the board is for")
@click.option("--icon", default=None)
@click.option("--color", default=None)
@click.option("--workdir", default=None, metavar="DIR",
              help="the board's target directory (relative paths resolve against the current one)")
@click.option("--workdir-mode", type=click.Choice(["linked-new", "linked-existing"]), default=None,
              help="linked-new: an empty or new folder; linked-existing: take over an existing one "
                   "(default: linked-existing when DIR exists)")
@click.option("--create", "create_dir", is_flag=True,
              help="create DIR when it does not exist (a missing DIR is refused otherwise)")
@click.option("--switch", "switch_", is_flag=True, help="make it the current board")
@json_option
@handle_errors
def create(slug: str, name: str | None, description: str, icon: str | None, color: str | None,
           workdir: str | None, workdir_mode: str | None, create_dir: bool, switch_: bool, as_json: bool) -> None:
    """Create a board."""
    import os

    from agentboard.domain import model
    from agentboard.kernel import boards as kb

    if name is not None:  # one line, shown in every list: nothing invisible (a title's rule)
        model.visible(name, "board name")
    if workdir is not None and workdir.strip():
        workdir = os.path.abspath(os.path.expanduser(workdir))
        from agentboard.dispatch.targets import validate_target

        workdir_mode = workdir_mode or ("linked-existing" if os.path.exists(workdir) else "linked-new")
        workdir = validate_target(common.db(), workdir, workdir_mode, slug, home=common.home(), create=create_dir)
    row = kb.create(common.db(), slug, name=name, description=description, icon=icon, color=color,
                    workdir=workdir or None, workdir_mode=workdir_mode if workdir else None,
                    actor=common.actor(), create_dir=create_dir)
    if switch_:
        _save_current(row["slug"])
    if as_json:
        common.emit_json(row)
        return
    click.echo(f"board {row['slug']} created" + (" (now current)" if switch_ else ""))


@boards.command("switch")
@click.argument("slug")
@handle_errors
def switch(slug: str) -> None:
    """Make SLUG the current board for later commands (AGENTBOARD_BOARD and --board still win)."""
    from agentboard.domain.errors import Conflict
    from agentboard.kernel import boards as kb

    row = kb.get(common.db(), slug)
    if row["archived"]:
        raise Conflict(f"board {row['slug']!r} is archived; restore it first (agentboard boards restore {row['slug']})")
    _save_current(row["slug"])
    click.echo(f"current board: {row['slug']}")


@boards.command("show")
@click.argument("slug", required=False)
@json_option
@handle_errors
def show(slug: str | None, as_json: bool) -> None:
    """A board's fields and task counts (default: the current board)."""
    from agentboard.kernel import boards as kb
    from agentboard.kernel import queries

    slug = common.resolve_board(slug)
    row: dict[str, Any] = dict(kb.get(common.db(), slug))
    row["counts"] = queries.stats(common.db(), slug)["by_status"]
    row["current"] = slug == _current()
    if as_json:
        common.emit_json(row)
        return
    from .output import fields, when

    fields([
        ("slug", row["slug"]), ("name", row["name"]), ("description", row.get("description")),
        ("icon", row.get("icon")), ("color", row.get("color")), ("workdir", row.get("default_workdir")),
        ("current", row["current"]), ("archived", row["archived"] or None),
        ("base", (row.get("settings") or {}).get("base")),
        ("integrate", (row.get("settings") or {}).get("integrate")),
        ("review before integrate", (row.get("settings") or {}).get("review_before_integrate")),
        ("env setup", (row.get("settings") or {}).get("env_setup")),
        ("created", when(row.get("created_at"))),
        ("tasks", ", ".join(f"{s} {n}" for s, n in row["counts"].items() if n) or "none"),
    ])


@boards.command("set")
@click.argument("slug", required=False)
@click.option("--base", default=None, metavar="BRANCH",
              help="the branch root tasks start from and approval integrates into (default: the target's "
                   "current branch; '' clears)")
@click.option("--integrate", type=click.Choice(["none", "merge", "squash", "rebase", "pr"]), default=None,
              help="what finishing a task does with its branch: on approval, and when a task without "
                   "review is done (default none: the branch is left)")
@click.option("--review-before-integrate/--integrate-unreviewed", "review_first", default=None,
              help="integrate only tasks approved in review (a task without review keeps its branch); "
                   "default: a task without review is integrated when it is done")
@click.option("--env-setup", default=None, metavar="VENV",
              help="the project's virtualenv workers and verify commands use (absolute or relative to the "
                   "target directory; default: a detected .venv; '' clears)")
@json_option
@handle_errors
def set_(slug: str | None, base: str | None, integrate: str | None, review_first: bool | None,
         env_setup: str | None, as_json: bool) -> None:
    """Set a board's git workflow: its base branch, what finishing a task does with its branch
    (and whether only reviewed tasks are integrated), the project's virtualenv (default: the
    current board)."""
    from agentboard.dispatch import branches
    from agentboard.domain.errors import InvalidInput

    if base is None and integrate is None and env_setup is None and review_first is None:
        raise InvalidInput("nothing to set: give --base BRANCH, --integrate MODE, --review-before-integrate "
                           "or --env-setup VENV")
    slug = common.resolve_board(slug)
    row = branches.configure(common.db(), slug, base=base, integrate=integrate, env_setup=env_setup,
                             review_before_integrate=review_first, actor=common.actor())
    st = row.get("settings") or {}
    mode = st.get("integrate") or "none"
    if mode != "none":
        mode += " (reviewed tasks only)" if st.get("review_before_integrate") else " (every finished task)"
    common.emit(row, as_json, f"board {slug}: base {st.get('base') or '(the target’s current branch)'}, "
                f"integrate {mode}, env setup {st.get('env_setup') or '(detected .venv)'}")


@boards.command("rename")
@click.argument("slug")
@click.argument("name")
@json_option
@handle_errors
def rename(slug: str, name: str, as_json: bool) -> None:
    """Change a board's display name (the slug never changes)."""
    from agentboard.domain import model
    from agentboard.kernel import boards as kb

    model.visible(name, "board name")  # one line, shown in every list: nothing invisible
    row = kb.rename(common.db(), slug, name, actor=common.actor())
    common.emit(row, as_json, f"board {row['slug']} is now named {row['name']!r}")


@boards.command("rm")
@click.argument("slug")
@click.option("--delete", is_flag=True, help="remove it and everything on it for good")
@json_option
@handle_errors
def rm(slug: str, delete: bool, as_json: bool) -> None:
    """Archive a board (recoverable with `boards restore`), or --delete it for good."""
    from agentboard.kernel import boards as kb

    db = common.db()
    home = common.home()
    row = kb.delete(db, slug, home=home, actor=common.actor()) if delete else kb.archive(
        db, slug, home=home, actor=common.actor())
    if delete:  # its tasks' worktrees and branches in its target
        from agentboard.dispatch import gc as gcmod

        row.update(gcmod.after_board_delete(db, home, row))
    f = common.current_board_file()
    if f.exists() and f.read_text().strip() == row["slug"]:
        f.unlink()
    if as_json:
        common.emit_json(row)
    elif delete:
        lines = [f"board {row['slug']} deleted"]
        lines += [f"  removed {path}" for path in row.get("files_removed", [])]
        lines += [f"  removed branch {b['branch']} in {b['repo']}" for b in row.get("branches_removed", [])]
        for k in row.get("kept", []):
            lines += [f"  kept {k['path']}: {k['why']}", f"    {k['how']}"]
        click.echo("\n".join(lines))
    else:
        click.echo(f"board {row['slug']} archived (agentboard boards restore {row['slug']} brings it back)")


@boards.command("restore")
@click.argument("slug")
@json_option
@handle_errors
def restore(slug: str, as_json: bool) -> None:
    """Bring back an archived board."""
    from agentboard.kernel import boards as kb

    row = kb.restore(common.db(), slug, home=common.home(), actor=common.actor())
    common.emit(row, as_json, f"board {row['slug']} restored")


# -- named checks and named paths --------------------------------------------------------------------


def _named_list(key: str, board: str | None, as_json: bool) -> None:
    from agentboard.kernel import host_access

    slug = common.existing_board(board)
    read = host_access.board_checks if key == "checks" else host_access.board_paths
    named = read(common.db(), slug)
    if as_json:
        common.emit_json(named)
        return
    if not named:
        click.echo(f"board {slug} has no named {key}")
        return
    from .output import table

    table(["name", "command" if key == "checks" else "workspace"], sorted(named.items()), status_column=None)


def _named_set(key: str, name: str, value: str | None, board: str | None, as_json: bool) -> None:
    from agentboard.kernel import boards as kb

    slug = common.resolve_board(board)
    named = kb.set_named(common.db(), slug, key, name, value, actor=common.actor())
    what = key.rstrip("s")
    common.emit(named, as_json, f"board {slug}: named {what} {name!r} " + ("removed" if value is None else "set"))


@boards.group("checks", cls=common.Group, context_settings=common.HELP_OPTIONS)
def checks() -> None:
    """Named checks: verify commands an admin configures on a board; members pick them by
    name (`create --check NAME`, or "check:NAME" in a task's verify through the API)."""


@checks.command("list")
@board_option
@json_option
@handle_errors
def checks_list(board: str | None, as_json: bool) -> None:
    """The board's named checks and the commands they run."""
    _named_list("checks", board, as_json)


@checks.command("add")
@click.argument("name")
@click.argument("command")
@board_option
@json_option
@handle_errors
def checks_add(name: str, command: str, board: str | None, as_json: bool) -> None:
    """Add (or replace) the named check NAME running the shell COMMAND in the task's workspace.

    Tasks that name the check run its command as it is when they are verified.
    """
    _named_set("checks", name, command, board, as_json)


@checks.command("rm")
@click.argument("name")
@board_option
@json_option
@handle_errors
def checks_rm(name: str, board: str | None, as_json: bool) -> None:
    """Remove the named check NAME (tasks naming it then fail verification until it is back)."""
    _named_set("checks", name, None, board, as_json)


@boards.group("paths", cls=common.Group, context_settings=common.HELP_OPTIONS)
def paths() -> None:
    """Named paths: workspaces an admin configures on a board; members pick them by name
    (`create --workspace path:NAME`)."""


@paths.command("list")
@board_option
@json_option
@handle_errors
def paths_list(board: str | None, as_json: bool) -> None:
    """The board's named paths and the workspaces they stand for."""
    _named_list("paths", board, as_json)


@paths.command("add")
@click.argument("name")
@click.argument("path")
@click.option("--worktree", is_flag=True, help="PATH is a git repository: each task runs in a worktree of it")
@board_option
@json_option
@handle_errors
def paths_add(name: str, path: str, worktree: bool, board: str | None, as_json: bool) -> None:
    """Add (or replace) the named path NAME: the folder PATH (absolute), shared by the tasks that
    pick it; sensitive locations (credentials, system folders, the agentboard home) are refused."""
    import os

    path = os.path.abspath(os.path.expanduser(path))
    _named_set("paths", name, ("worktree:" if worktree else "dir:") + path, board, as_json)


@paths.command("rm")
@click.argument("name")
@board_option
@json_option
@handle_errors
def paths_rm(name: str, board: str | None, as_json: bool) -> None:
    """Remove the named path NAME (tasks created with it keep their workspace)."""
    _named_set("paths", name, None, board, as_json)
