"""`diff ID`: the diff of a task's work, the one its reviewer reads."""

from __future__ import annotations

import click

from . import common
from .common import handle_errors, json_option, task_board_option


@click.command("diff")
@click.argument("task_id", metavar="ID")
@click.option("--stat", is_flag=True, help="only the files with their +/- counts")
@click.option("--file", "path", default=None, metavar="PATH", help="only this file")
@click.option("--page", default=None, type=click.IntRange(1), metavar="N",
              help="only the files of page N (20 files a page; --json: page 1 without it)")
@task_board_option
@json_option
@handle_errors
def diff(task_id: str, stat: bool, path: str | None, page: int | None, board: str | None, as_json: bool) -> None:
    """The diff of a task's work: for a worktree task its branch against its base (plus what is
    not committed yet), for a dir: workspace in a git repository its working tree.

    With --json: the files with their counts, and the unified diff of the files of one page.
    On a terminal the control characters of file names and contents are shown as escapes
    (``\\x1b``); into a pipe or a file the unified diff is written exactly."""
    from agentboard.dispatch import diffs
    from agentboard.domain.errors import InvalidInput, NotFound

    slug = common.task_board(task_id, board)
    doc = diffs.task_diff(common.db(), slug, task_id, page=page or 1, path=path)
    if path is not None and not any(f["path"] == path for f in doc["files"]):
        from .output import printable

        named = printable(", ".join(_one_line(f["path"]) for f in doc["files"][:10])
                          + (", …" if len(doc["files"]) > 10 else ""))
        raise NotFound(f"no file {path!r} in the diff of {task_id}; "
                       + (f"its files: {named}" if named else "it changes no file"))
    if page is not None and page > doc["pages"]:
        raise InvalidInput(f"--page {page} is past the end: the diff of {task_id} has {doc['pages']} page(s) of "
                           f"{doc['per_page']} files")
    if as_json:
        common.emit_json(doc)
        return
    from .output import is_tty, printable

    tty = is_tty()

    def line(text: str) -> None:  # our own lines: a worker's bytes in them are always escaped
        click.echo(printable(text))

    def patch(text: str) -> None:  # the unified diff: escaped on a terminal, exact into a pipe (as `log`)
        text = text.rstrip("\n")
        click.echo(printable(text) if tty else text, color=True)

    git = doc.get("git") or {}
    line(f"# {task_id}: {git.get('summary') or doc['how']}")
    if not doc["files"]:
        line("# no changes" if not doc["how"].startswith("none") else f"# no diff: {doc['how'][6:]}")
        return
    if stat or path is None:
        for f in doc["files"]:
            flag = " (uncommitted)" if f["uncommitted"] else ""
            counts = "binary" if f["binary"] else f"+{f['additions']} -{f['deletions']}"
            line(f"# {f['status']:<8} {counts:>12}  {_one_line(f['path'])}{flag}")
        line(f"# {doc['total_files']} file(s), +{doc['additions']} -{doc['deletions']}")
    if stat:
        return
    if path is not None or page is not None:
        if page is not None:
            line(f"# page {doc['page']} of {doc['pages']}: {len(doc['shown'])} file(s)")
        for f in doc["shown"]:
            patch(f["diff"])
            if f["truncated"]:
                line(f"# {_one_line(f['path'])}: cut at {diffs.FILE_MAX} of {f['size']} characters")
        return
    text, _how = diffs.raw_diff(common.db(), slug, task_id)
    patch(text)


def _one_line(name: str) -> str:
    """A file name on one line of the listing: its line breaks and tabs shown as escapes too."""
    return name.replace("\n", "\\x0a").replace("\t", "\\x09")
